"""Map the names a fabric reports (system names, port IDs, aliases) onto the plan's device and port names."""

from __future__ import annotations

from railforge.plan.model import Plan


class PlanNames:
    def __init__(self, plan: Plan):
        self.ports: dict[str, dict[str, str]] = {}
        self.nos: dict[str, str | None] = {d.name: d.nos for d in plan.devices}
        for d in plan.devices:
            names: dict[str, str] = {}
            for p in d.ports:
                names.setdefault(p.label, p.name)
            for p in d.ports:
                names[p.name] = p.name
            self.ports[d.name] = names

    def device(self, reported: str) -> str | None:
        """The plan's device for a reported system name; a domain suffix (`leaf1.dc.example`) is dropped."""
        name = reported.strip()
        if name in self.ports:
            return name
        short = name.split(".", 1)[0]
        return short if short in self.ports else None

    def port(self, device: str, reported: str) -> str:
        """The plan's port name for a reported port ID or alias; unknown names are kept as reported."""
        return self.ports.get(device, {}).get(reported.strip(), reported.strip())
