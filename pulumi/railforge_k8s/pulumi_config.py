"""Read the stack's Pulumi config into a StackConfig."""

from __future__ import annotations

import pulumi

from .config import KNOWN_KEYS, StackConfig, config_from_mapping

OBJECT_KEYS = ("images", "charts", "registryMirrors", "imagePullSecrets", "tenantNamespaces")


def read_stack_config(cfg: pulumi.Config) -> StackConfig:
    values = {}
    for key in KNOWN_KEYS:
        value = cfg.get_object(key) if key in OBJECT_KEYS else cfg.get(key)
        if value is not None:
            values[key] = value
    return config_from_mapping(values)
