"""The switch-OS registry: one line per OS below, each OS one folder `railforge/nos/<os>/` whose `__init__.py`
defines its `PROFILE` (the interface: railforge/nos/profile.py).

The OOB switches run the same Ethernet OSes as the fabric (`fabrics` says where each may be used).
Registration order is the order the spec's error messages list the names in and the order of the OS renderers'
build families. `nos.profile` is the lookup function below: defined after the submodule `nos.profile` is imported,
it takes the package attribute's name (import the dataclass as `from railforge.nos.profile import NosProfile`).
"""

from __future__ import annotations

from railforge.nos import cumulus, mlnx_os, sonic
from railforge.nos.profile import Fabric, Kind, LldpTable, NosProfile

_PROFILES: dict[str, NosProfile] = {p.name: p for p in (
    sonic.PROFILE,
    cumulus.PROFILE,
    mlnx_os.PROFILE,
)}


def profiles() -> tuple[NosProfile, ...]:
    """Every registered profile, in registration order."""
    return tuple(_PROFILES.values())


def names(fabric: Fabric | None = None, kind: Kind | None = None) -> tuple[str, ...]:
    """Registered OS names (those allowed in `fabric`, or of `kind`), in registration order."""
    return tuple(p.name for p in _PROFILES.values()
                 if (fabric is None or fabric in p.fabrics) and (kind is None or p.kind == kind))


def profile(name: str) -> NosProfile:
    try:
        return _PROFILES[name]
    except KeyError:
        raise KeyError(f"no switch OS profile {name!r} (known: {', '.join(_PROFILES)})") from None


def find(name: str | None) -> NosProfile | None:
    return _PROFILES.get(name or "")


def default(fabric: Fabric, kind: Kind = "ethernet") -> NosProfile:
    """The OS a spec fabric gets when it names none."""
    return next(p for p in _PROFILES.values() if p.kind == kind and fabric in p.default_for)


def lldp_tables() -> tuple[LldpTable, ...]:
    """The text LLDP table formats of the registered OSes (lldpd's JSON aside), in registration order."""
    return tuple(p.lldp_table for p in _PROFILES.values() if p.lldp_table is not None)


def lldp_table(name: str | None) -> LldpTable:
    """The text LLDP table of OS `name`; for a device whose OS has none (a host, or an OS whose tables come as
    lldpd JSON), the first registered one."""
    found = find(name)
    return found.lldp_table if found is not None and found.lldp_table is not None else lldp_tables()[0]
