"""A generated config_db.json as a SONiC switch holds it after `config qos reload` and `config load`: the SKU's
rendered buffer and QoS defaults (railforge/nos/sonic/buffers) for the file's own DEVICE_METADATA.type, PORT
and DEVICE_NEIGHBOR, with the file merged on top; and the BUFFER_PG/BUFFER_QUEUE keys that cover a priority
twice."""

from __future__ import annotations

from railforge.nos.sonic.buffer_defaults import defaults_for, id_ranges, load_buffers, priorities
from tests.helpers.sonic_yang import merged


def platform_defaults(db: dict, hwsku: str) -> dict:
    """What the SKU's templates write for this file's switch (BufferTemplateMissing where they do not render)."""
    sku = load_buffers(hwsku)
    return defaults_for(sku, db["DEVICE_METADATA"]["localhost"]["type"], list(db.get("PORT", {})),
                        set(db.get("DEVICE_NEIGHBOR", {})))


def as_applied(db: dict, hwsku: str) -> dict:
    return merged(platform_defaults(db, hwsku), db)


def buffermgrd_pg_keys(db: dict, hwsku: str) -> dict[str, dict]:
    """BUFFER_PG entries the traditional buffermgrd (sonic-swss cfgmgr/buffermgr.cpp) writes on a port for each
    pfc_enable it has had: the reload's (the templates') and then the file's; it removes none of them. Empty for
    the dynamic model, where lossless PGs are only the configured ones."""
    sku = load_buffers(hwsku)
    if sku.buffer_model != "traditional":
        return {}
    sonic_type = db["DEVICE_METADATA"]["localhost"]["type"]
    out = {}
    for port, qmap in db.get("PORT_QOS_MAP", {}).items():
        if port == "global" or port not in db.get("DEVICE_NEIGHBOR", {}):
            continue
        for pfc in (sku.pfc_enable(sonic_type), qmap.get("pfc_enable", "")):
            for ids in id_ranges({int(x) for x in pfc.split(",") if x}):
                out[f"{port}|{ids}"] = {"profile": "pg_lossless_<speed>_<cable>_profile"}
    return out


def overlapping_keys(db: dict) -> list[str]:
    """'TABLE port: a and b both cover priority n' for every pair of keys of one port that overlap."""
    found = []
    for table in ("BUFFER_PG", "BUFFER_QUEUE"):
        seen: dict[tuple[str, int], str] = {}
        for key in db.get(table, {}):
            port, _, ids = key.partition("|")
            for n in sorted(priorities(ids)):
                other = seen.setdefault((port, n), ids)
                if other != ids:
                    found.append(f"{table} {port}: {other} and {ids} both cover {n}")
    return found
