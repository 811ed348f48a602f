"""railforge: one cluster spec, one plan, every artifact generated from it."""

__version__ = "0.1.0"
