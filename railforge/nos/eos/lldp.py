"""EOS's `show lldp neighbors | json` (the eAPI answer to `show lldp neighbors`): one object with the table's
counters and `lldpNeighbors`, a list of `{port, neighborDevice, neighborPort, ttl}`. Read through the same strict
limits as every LLDP file (`railforge/verify/lldp.py`); the counters are allowed and ignored."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from railforge.inputs import InputError, Name, parse_json, shown, validate
from railforge.verify.lldp import LldpFormatError
from railforge.verify.names import PlanNames
from railforge.verify.observed import Adjacency, Observation

COMMAND = "`show lldp neighbors | json`"


class Neighbour(BaseModel):
    """One row: the local `port`, the neighbour's system name and its port ID."""

    model_config = ConfigDict(extra="allow")
    port: Name
    neighbor_device: Name = Field(alias="neighborDevice")
    neighbor_port: Name = Field(alias="neighborPort")


class NeighborTable(BaseModel):
    model_config = ConfigDict(extra="allow")
    lldp_neighbors: list[Neighbour] = Field(alias="lldpNeighbors")


TABLE = TypeAdapter(NeighborTable)


def parse_neighbors(text: str, device: str, names: PlanNames, source: str = "") -> Observation:
    where = source or device
    try:
        raw = parse_json(text, where)
    except InputError as exc:
        raise LldpFormatError(f"{exc} (an EOS switch's table is the output of {COMMAND})") from None
    try:
        table = validate(TABLE, raw, where, f"EOS {COMMAND}")
    except InputError as exc:
        raise LldpFormatError(str(exc)) from None
    obs = Observation(devices={device})
    for row in table.lldp_neighbors:
        peer = names.device(row.neighbor_device)
        if peer is None:
            obs.unresolved.append(f"{device}:{row.port} sees unknown system {shown(row.neighbor_device)} port "
                                  f"{shown(row.neighbor_port)}")
            continue
        obs.adjacencies.append(Adjacency((device, names.port(device, row.port)),
                                         (peer, names.port(peer, row.neighbor_port)), None, where))
    return obs
