"""LLDP neighbour tables: lldpd's `lldpcli -f json show neighbors [details]` and SONiC's `show lldp table`.

Neither names the local system, so each file is one device's view and its stem names the device
(`su001-leaf-r0.json`, `su001-leaf-r0.txt`). A folder holds one file per device.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from railforge.verify.names import PlanNames
from railforge.verify.observed import Adjacency, Observation

MAU_SPEED = re.compile(r"^\s*(\d+)\s*(G?)base", re.IGNORECASE)
SUFFIXES = (".json", ".txt", ".lldp")


class LldpFormatError(ValueError):
    pass


def mau_speed_mbps(mau: str | None) -> int | None:
    """`100GbaseCR4 - ...` -> 100000, `1000BaseTFD` -> 1000; None when the MAU type names no speed."""
    m = MAU_SPEED.match(mau or "")
    if not m:
        return None
    return int(m.group(1)) * (1000 if m.group(2) else 1)


def _entries(interface: object) -> list[tuple[str, dict]]:
    items = interface if isinstance(interface, list) else [interface]
    out: list[tuple[str, dict]] = []
    for item in items:
        if isinstance(item, dict):
            out += [(k, v) for k, v in item.items() if isinstance(v, dict)]
    return out


def _sysname(chassis: dict) -> str | None:
    if "name" in chassis and isinstance(chassis["name"], dict):
        return chassis["name"].get("value")
    names = [k for k, v in chassis.items() if isinstance(v, dict) and k not in ("id", "descr", "mgmt-ip")]
    return names[0] if names else None


def parse_lldpcli_json(text: str, device: str, names: PlanNames, source: str = "") -> Observation:
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LldpFormatError(f"{source or device}: not lldpcli JSON ({exc})") from None
    if not isinstance(raw, dict) or "lldp" not in raw:
        raise LldpFormatError(f"{source or device}: not lldpcli JSON (no top-level 'lldp' object; expected the "
                              "output of `lldpcli -f json show neighbors details`)")
    obs = Observation(devices={device})
    lldp = raw.get("lldp", {})
    if isinstance(lldp, list):
        lldp = lldp[0] if lldp else {}
    for local, entry in _entries(lldp.get("interface", [])):
        sysname = _sysname(entry.get("chassis", {}))
        port = entry.get("port", {})
        port_id = (port.get("id") or {}).get("value", "")
        descr = port.get("descr", "")
        peer = names.device(sysname) if sysname else None
        if peer is None:
            obs.unresolved.append(f"{device}:{local} sees unknown system {sysname!r} port {port_id!r}")
            continue
        peer_port = names.port(peer, port_id)
        if peer_port not in names.ports[peer] and descr:
            peer_port = names.port(peer, descr)
        speed = mau_speed_mbps((port.get("auto-negotiation") or {}).get("current"))
        obs.adjacencies.append(Adjacency((device, names.port(device, local)), (peer, peer_port), speed,
                                         source or device))
    return obs


def _columns(rule: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(r"-+", rule)]


def parse_sonic_lldp_table(text: str, device: str, names: PlanNames, source: str = "") -> Observation:
    """`show lldp table`: a header, a rule of dashes giving the column spans, rows, a closing rule."""
    lines = text.splitlines()
    head = next((i for i, x in enumerate(lines) if x.split()[:2] == ["LocalPort", "RemoteDevice"]), None)
    if head is None or head + 1 >= len(lines) or not set(lines[head + 1].strip()) <= {"-", " "}:
        raise LldpFormatError(f"{source or device}: no 'LocalPort RemoteDevice ...' header in SONiC LLDP table")
    header = lines[head].split()
    spans = _columns(lines[head + 1])
    obs = Observation(devices={device})
    for row in lines[head + 2:]:
        if not row.strip() or set(row.strip()) <= {"-"} or row.startswith("Total entries"):
            continue
        cells: dict[str, str] = {}
        for i, (start, _) in enumerate(spans):
            end = spans[i + 1][0] if i + 1 < len(spans) else len(row)
            cells[header[i] if i < len(header) else str(i)] = row[start:end].strip()
        local, sysname = cells.get("LocalPort", ""), cells.get("RemoteDevice", "")
        port_id, descr = cells.get("RemotePortID", ""), cells.get("RemotePortDescr", "")
        peer = names.device(sysname)
        if peer is None:
            obs.unresolved.append(f"{device}:{local} sees unknown system {sysname!r} port {port_id!r}")
            continue
        peer_port = names.port(peer, port_id)
        if peer_port not in names.ports[peer] and descr:
            peer_port = names.port(peer, descr)
        obs.adjacencies.append(Adjacency((device, names.port(device, local)), (peer, peer_port), None,
                                         source or device))
    return obs


def parse_lldp_file(path: Path, names: PlanNames, device: str | None = None) -> Observation:
    text = path.read_text()
    dev = device or path.stem
    if names.device(dev) is None:
        raise LldpFormatError(f"{path}: file name must be a planned device name, {dev!r} is not in the plan")
    dev = names.device(dev) or dev
    if path.suffix == ".json" or text.lstrip().startswith(("{", "[")):
        return parse_lldpcli_json(text, dev, names, str(path))
    return parse_sonic_lldp_table(text, dev, names, str(path))


def load_lldp(path: Path, names: PlanNames) -> Observation:
    files = sorted(p for p in path.iterdir() if p.suffix in SUFFIXES) if path.is_dir() else [path]
    if not files:
        raise LldpFormatError(f"{path}: no {', '.join(SUFFIXES)} files")
    obs = Observation()
    for f in files:
        obs.merge(parse_lldp_file(f, names))
    return obs
