"""Arista EOS: `configs/<switch>/structured_config.yaml` and `configs/<switch>/startup-config` per EOS switch.

structured_config.yaml is AVD structured configuration (structured.py); startup-config is the EOS CLI that
Arista's `pyavd` renders from it (`eos_cli_config_gen` templates, `pyavd.get_device_config`) after
`pyavd.validate_structured_config` accepted it against AVD's schema. A structured configuration pyavd refuses
is a railforge bug and stops the build; nothing is written.
"""

from __future__ import annotations

from typing import Any

import yaml

from railforge.formats.output import Output, OutputError
from railforge.nos.eos import CONFIG, PROFILE, STRUCTURED
from railforge.nos.eos.structured import structured_config
from railforge.plan import outdir
from railforge.plan.model import Plan
from railforge.plan.switch_model import build_models


class AvdRejected(RuntimeError):
    """pyavd refused a structured configuration railforge wrote."""


def _pyavd() -> Any:
    try:
        import pyavd  # noqa: PLC0415 - imported only when a plan has EOS switches (it takes a second to load)
    except ImportError:
        raise OutputError("the plan has Arista EOS switches, whose startup-config pyavd renders, and pyavd is not "
                          "installed: pip install 'railforge[eos]'") from None
    return pyavd


def dump(sc: dict) -> str:
    return yaml.dump(sc, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False,
                     default_flow_style=False, width=120)


def validated(sc: dict, pyavd: Any | None = None) -> dict:
    """`sc` as pyavd validated it (types converted); AvdRejected names every violation and deprecation."""
    pyavd = pyavd or _pyavd()
    result = pyavd.validate_structured_config(sc)
    problems = [f"{'.'.join(v.path)}: {v.message}" for v in result.validation_result.violations]
    problems += [f"deprecated: {d.message}" for d in result.validation_result.deprecations]
    if problems or result.validated_data is None:
        raise AvdRejected(f"{sc.get('hostname')}: pyavd refused the structured configuration: {'; '.join(problems)}")
    return result.validated_data


def startup_config(sc: dict, pyavd: Any | None = None) -> str:
    pyavd = pyavd or _pyavd()
    return pyavd.get_device_config(validated(sc, pyavd))


def render(plan: Plan, out: Output) -> None:
    pyavd = None
    for sw in build_models(plan, nos=PROFILE.name, select=out.selects):
        sc = structured_config(sw)
        pyavd = pyavd or _pyavd()
        out.write_text(outdir.config_file(sw.hostname, STRUCTURED), dump(sc))
        out.write_text(outdir.config_file(sw.hostname, CONFIG), startup_config(sc, pyavd))
