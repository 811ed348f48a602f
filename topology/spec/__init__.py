"""The cluster spec: what the user writes, validated once at the door."""

from topology.spec.errors import SpecError
from topology.spec.loader import load_spec
from topology.spec.models import ClusterSpec

__all__ = ["ClusterSpec", "SpecError", "load_spec"]
