"""Warnings about a valid spec that will not work as the user likely expects on real hosts: a build still
succeeds, but `validate` and `build` say so, naming the file, line and key. Kept apart from validation because
nothing here is wrong on paper: a spec without interface names plans `rail0`... with no PCI path or MAC, and the
rails role (which pins names by PCI path or MAC) then targets interfaces that a freshly installed host does not
have; a spec without `node.compute.hcas` on a server model whose HCA names no vendor document gives plans
`mlx5_0`... for NCCL_IB_HCA, gres.conf, the node check and burn-in, which is right on some boards and wrong on
others (a DGX H100's rails are mlx5_0,3,4,5,6,9,10,11)."""

from __future__ import annotations

from railforge.hardware.catalog import compute_hcas, merged_catalog
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
    guess = compute_hcas(spec, merged_catalog(spec)).guess
    if guess is not None:
        out.append(SpecError("node.compute.hcas", f"no hcas, and {guess}: a guess that NCCL_IB_HCA, gres.conf, the "
                                                  "node check and burn-in all use; read the rails' RDMA devices on "
                                                  "one node (`ibdev2netdev`, or /sys/class/infiniband/*/device/net) "
                                                  "and give node.compute.hcas in rail order",
                             line=_line_for(("node", "compute"), lines), source=source))
    return out
