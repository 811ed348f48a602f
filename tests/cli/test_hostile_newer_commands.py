"""Hostile input on the newer commands (issue 40 item 12): each case once gave an internal error, a traceback,
a usage box or a misleading line, and now gives one `error` line naming the option, the value and what would do."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from railforge.inputs import shown
from railforge.plan.model import SCHEMA_VERSION
from railforge.provision.credentials import CredentialError, load_credentials
from tests.baremetal.conftest import fill_host_macs
from tests.conftest import ROOT, run_cli

TINY = ROOT / "tests" / "specs" / "tiny-roce.yaml"
SAMPLE = ROOT / "tests" / "acceptance" / "samples" / "nccl-all-reduce-tail.txt"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("hostile40") / "cluster"
    base.mkdir()
    shutil.copy(TINY, base / "cluster.yaml")
    run_cli("build", str(base / "cluster.yaml"))
    fill_host_macs(base / "generated" / "host-macs.csv", base / "host-macs.csv")
    run_cli("acceptance", "plan", str(base))
    return base


def rf(*args: str, stdin: bytes = b"", env: dict | None = None) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "railforge", *args], input=stdin, capture_output=True, cwd=ROOT,
                          env={**os.environ, "COLUMNS": "300", **(env or {})}, timeout=120)
    err = proc.stderr.decode()
    assert "Traceback" not in err and "internal error" not in err and "Usage:" not in err, err
    return proc.returncode, " ".join(err.split())


@pytest.mark.parametrize("command", [["ztp", "CLUSTER", "--server", "http://127.0.0.1:8080"],
                                     ["boot", "files", "CLUSTER", "--server", "http://127.0.0.1:8080",
                                      "--report", "http://127.0.0.1:8081", "--report-key", "KEY"]],
                         ids=["ztp", "boot-files"])
def test_credentials_on_stdin_that_are_not_utf8(cluster: Path, command: list[str], tmp_path: Path) -> None:
    given = {"CLUSTER": str(cluster), "KEY": str(tmp_path / "report-in.key")}
    code, err = rf(*(given.get(a, a) for a in command), "--credentials", "-",
                   stdin=b"admin_password_hash: \xff\xfe\x80\n")
    assert code == 2
    assert err.startswith("error --credentials stdin: not UTF-8 text (byte 21)"), err


def test_credentials_error_names_the_variable_that_holds_the_bad_value() -> None:
    env = {"RAILFORGE_ADMIN_PASSWORD_HASH": "plain-password",
           "RAILFORGE_SSH_AUTHORIZED_KEYS": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG ops@example"}
    with pytest.raises(CredentialError) as exc:
        load_credentials(None, env)
    assert str(exc.value).startswith("RAILFORGE_ADMIN_PASSWORD_HASH: admin_password_hash must be a crypt(3) hash")


def test_analyze_json_where_nothing_can_be_written(cluster: Path, tmp_path: Path) -> None:
    results = tmp_path / "results" / "round-01" / "nccl"
    results.mkdir(parents=True)
    shutil.copy(SAMPLE, results / "su001-gpu01.txt")
    code, err = rf("acceptance", "analyze", str(cluster), str(tmp_path / "results"), "--json", "/proc/version")
    assert code == 2 and err == "error cannot write /proc/version: No such file or directory", err
    code, err = rf("acceptance", "analyze", str(cluster), str(tmp_path / "results"), "--json",
                   str(tmp_path / "no" / "a.json"))
    assert code == 2 and f"cannot write {tmp_path / 'no' / 'a.json'}" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results"]


@pytest.mark.parametrize("version", ["[[[[0]]]]", '{"a": 1}', "true", '"' + "[" * 100_000 + '"'],
                         ids=["nested-list", "object", "true", "long-string"])
def test_diff_of_a_plan_with_an_odd_schema_version(cluster: Path, tmp_path: Path, version: str) -> None:
    doc = json.loads((cluster / "generated" / "plan.json").read_text())
    doc["schema_version"] = "VERSION"
    (tmp_path / "plan.json").write_text(json.dumps(doc).replace('"VERSION"', version, 1))
    code, err = rf("diff", str(cluster / "generated" / "plan.json"), str(tmp_path / "plan.json"),
                   "--work-order", str(tmp_path / "wo.xlsx"))
    assert code == 2 and f"{tmp_path / 'plan.json'}: plan schema_version " in err, err
    assert f"; this railforge reads schema_version {SCHEMA_VERSION}: rebuild it with this version" in err
    assert len(err) < 400


def test_shown_bounds_what_an_error_echoes() -> None:
    deep: object = 0
    for _ in range(100_000):
        deep = [deep]
    assert shown(deep) == "[[[[...]]]]"
    assert shown(10 ** 5000) == "<an integer of about 5,001 digits>"
    assert shown({"k": [10 ** 5000]}) == "{'k': [<an integer of about 5,001 digits>]}"
    assert shown("x" * 100) == "'" + "x" * 56 + "..."


def test_sot_errors_start_like_every_other_command(cluster: Path, tmp_path: Path) -> None:
    (tmp_path / "token").write_text("0123456789abcdef0123456789abcdef01234567\n")
    for command in ("diff", "push"):
        code, err = rf("sot", command, str(cluster / "generated"), "--netbox", "http://127.0.0.1:9",
                       "--token-file", str(tmp_path / "token"))
        assert code == 2 and err.startswith("error cannot reach NetBox at http://127.0.0.1:9/api"), err


@pytest.mark.parametrize("listen", ["127.0.0.1:99999", "127.0.0.1:x", "nohost", "127.0.0.1:٣"])
def test_health_serve_listen_out_of_range(cluster: Path, listen: str) -> None:
    code, err = rf("health", "serve", str(cluster), "--listen", listen)
    assert code == 2 and err.startswith(f"error --listen {listen}: want HOST:PORT with a port 0-65535"), err
