"""A file the provisioning HTTP server hands out: its path inside the generated folder (the server's document
root), its text and its mode (credentials go into 0600 files)."""

from __future__ import annotations

from dataclasses import dataclass

SECRET_MODE = 0o600


@dataclass(slots=True, frozen=True)
class ServedFile:
    path: str
    text: str
    mode: int = 0o644


def url(server: str, rel: str) -> str:
    """The URL of `rel` (a path inside the generated folder) on `server`."""
    return f"{server.rstrip('/')}/{rel}"
