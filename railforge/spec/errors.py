from __future__ import annotations


class SpecError(Exception):
    """A spec that cannot be built. `field` is the dotted YAML path, `line` the source line if known."""

    def __init__(self, field: str, message: str, *, line: int | None = None, source: str | None = None):
        self.field = field
        self.message = message
        self.line = line
        self.source = source
        super().__init__(self.render())

    def render(self) -> str:
        where = [self.source] if self.source else []
        if self.line:
            where = [f"{self.source}:{self.line}"] if self.source else [f"line {self.line}"]
        if self.field or not where:
            where.append(self.field or "<spec>")
        return ": ".join([*where, self.message])


class SpecErrors(Exception):
    """Several spec errors found at once; each renders on its own line."""

    def __init__(self, errors: list[SpecError]):
        self.errors = errors
        super().__init__("\n".join(e.render() for e in errors))
