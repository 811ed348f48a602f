"""What railforge knows about each switch operating system: one profile module per OS, looked up by name.

The OOB switches run the same Ethernet OSes as the fabric (`fabrics` says where each may be used).
Registration order is the order the spec's error messages list the names in. `nos.profile` is the lookup
function below: defined after the submodule `nos.profile` is imported, it takes the package attribute's name
(import the dataclass as `from railforge.nos.profile import NosProfile`).
"""

from __future__ import annotations

from railforge.nos import cumulus, eos, mlnx_os, sonic
from railforge.nos.profile import Fabric, Kind, NosProfile

_PROFILES: dict[str, NosProfile] = {p.name: p for p in (sonic.PROFILE, cumulus.PROFILE, eos.PROFILE, mlnx_os.PROFILE)}


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
