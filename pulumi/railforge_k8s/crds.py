"""The pinned CRDs the stack installs itself, read from the repository (pulumi/crds/<component>-<version>/).

Nothing is fetched at deploy time: an air-gapped site has the same files as CI. Each CRD becomes a typed
CustomResourceDefinition resource whose inputs are the file's content, so the state does not depend on where the
checkout lives.
"""

from __future__ import annotations

from pathlib import Path

import pulumi_kubernetes as k8s
import yaml

import pulumi

from .config import ConfigError

CRD_ROOT = Path(__file__).resolve().parent.parent / "crds"
WHEREABOUTS = "whereabouts-v0.9.4"
NETWORK_OPERATOR = "network-operator-v26.4.1"  # the CRDs of the network-operator chart the stack needs


def crd_documents(component: str, root: Path = CRD_ROOT) -> list[dict]:
    """The CustomResourceDefinitions of one pinned component, in file-name order."""
    folder = root / component
    files = sorted(folder.glob("*.yaml"))
    if not files:
        raise ConfigError(f"pinned CRDs {component}: no *.yaml in {folder} (the railforge checkout is incomplete)")
    docs = []
    for path in files:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                docs.append(doc)
    return docs


def crd_resources(prefix: str, component: str,
                  opts: pulumi.ResourceOptions) -> list[k8s.apiextensions.v1.CustomResourceDefinition]:
    return [
        k8s.apiextensions.v1.CustomResourceDefinition(
            f"{prefix}-{doc['metadata']['name']}",
            metadata={key: doc["metadata"][key] for key in ("name", "annotations") if doc["metadata"].get(key)},
            spec=doc["spec"],
            opts=opts,
        )
        for doc in crd_documents(component)
    ]
