"""Run the Pulumi program under pulumi.runtime.set_mocks and record every resource registration."""

from __future__ import annotations

import json
import runpy
from dataclasses import dataclass, field
from pathlib import Path

from pulumi.runtime import mocks as pulumi_mocks

import pulumi

PROJECT = "railforge-k8s"
PROGRAM = Path(__file__).resolve().parents[2] / "pulumi" / "__main__.py"


@dataclass
class Registration:
    urn: str
    type: str
    name: str
    custom: bool
    parent: str
    dependencies: list[str]
    inputs: dict


@dataclass
class Recording:
    resources: list[Registration] = field(default_factory=list)

    def of_type(self, type_: str) -> list[Registration]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str, name: str) -> Registration:
        found = [r for r in self.resources if r.type == type_ and r.name == name]
        assert len(found) == 1, f"expected one {type_} named {name}, found {len(found)}"
        return found[0]

    def by_urn(self) -> dict[str, Registration]:
        return {r.urn: r for r in self.resources}

    def custom(self) -> list[Registration]:
        return [r for r in self.resources if r.custom]


class _Mocks(pulumi.runtime.Mocks):
    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        return f"{args.name}-id", dict(args.inputs)

    def call(self, args: pulumi.runtime.MockCallArgs):
        return {}


class _RecordingMonitor(pulumi_mocks.MockMonitor):
    def __init__(self, mocks, recording: Recording):
        super().__init__(mocks)
        self.recording = recording

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.recording.resources.append(
                Registration(
                    urn=response.urn,
                    type=request.type,
                    name=request.name,
                    custom=bool(request.custom),
                    parent=request.parent,
                    dependencies=list(request.dependencies),
                    inputs=pulumi.runtime.rpc.deserialize_properties(request.object),
                )
            )
        return response


def run_program(config: dict, recording: Recording | None = None) -> Recording:
    """Run pulumi/__main__.py with the given stack config (keys without the project prefix)."""
    recording = recording if recording is not None else Recording()
    mocks = _Mocks()
    pulumi.runtime.set_mocks(
        mocks, project=PROJECT, stack="test", preview=False, monitor=_RecordingMonitor(mocks, recording)
    )
    pulumi.runtime.set_all_config({f"{PROJECT}:{key}": _config_text(value) for key, value in config.items()})

    @pulumi.runtime.test
    def program():
        runpy.run_path(str(PROGRAM), run_name="__main__")

    program()
    return recording


def _config_text(value) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value)
