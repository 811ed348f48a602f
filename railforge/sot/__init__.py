"""The plan in a source of truth: NetBox (push, drift)."""
