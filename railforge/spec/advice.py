"""Warnings about a valid spec that will not work as the user likely expects on real hosts: a build still
succeeds, but `validate` and `build` say so, naming the file, line and key. Kept apart from validation because
nothing here is wrong on paper: a spec without interface names plans `rail0`... with no PCI path or MAC, and the
rails role (which pins names by PCI path or MAC) then targets interfaces that a freshly installed host does not
have."""

from __future__ import annotations

from railforge.spec.errors import SpecError
from railforge.spec.loader import LineMap, _line_for
from railforge.spec.models import ClusterSpec


def spec_warnings(spec: ClusterSpec, lines: LineMap, source: str) -> list[SpecError]:
    out = []
    for group, nic, default in (("compute", spec.node.compute, "rail0, rail1, ..." if spec.compute.fabric == "roce"
                                 else "ib0, ib1, ..."), ("storage", spec.node.storage, "stor0, stor1")):
        if nic.ifnames is None and nic.pci is None and nic.macs is None:
            key = f"node.{group}"
            out.append(SpecError(key, f"no ifnames, pci or macs: the plan names these ports {default} but nothing "
                                      "on a host is called that, and the host roles can pin a name only by PCI path "
                                      "or MAC; give `pci` (same for every node of a model) or `macs`, or `ifnames` "
                                      "with the names the hosts already use",
                                 line=_line_for(("node", group), lines), source=source))
    return out
