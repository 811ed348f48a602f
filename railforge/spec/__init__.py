"""The cluster spec: what the user writes, validated once at the door."""

from railforge.spec.errors import SpecError
from railforge.spec.loader import load_spec
from railforge.spec.models import ClusterSpec

__all__ = ["ClusterSpec", "SpecError", "load_spec"]
