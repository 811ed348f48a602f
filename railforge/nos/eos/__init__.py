"""Arista EOS: everything railforge knows and writes for it, in this folder.

`profile.py` is the OS's profile (port names, management port, files, ZTP variant); `structured.py` turns the
plan's per-switch view into AVD structured configuration; `render.py` writes it with the EOS CLI that Arista's
own `pyavd` renders from it; `ztp.py` writes the zero-touch script; `lab.py` translates the structured
configuration into the frr.conf the lab boots.
"""

from __future__ import annotations

from railforge.nos.eos.profile import PROFILE

__all__ = ["PROFILE"]
