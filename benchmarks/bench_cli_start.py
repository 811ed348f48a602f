"""Benchmark: what `railforge --version` and `railforge --help` cost in CPU now that subcommands load lazily,
against the same commands with every subcommand imported first (the eager start-up they replace) and against a
bare interpreter, side by side.

Every run is a fresh process; the variants alternate within each round on this shared, noisy machine, and the
result is each variant's median CPU seconds (user + system of the child) and its ratio to the eager start.
Target (issue 40 item 8): `--version` and `--help` under 0.3 s CPU.

    python benchmarks/bench_cli_start.py            # 7 rounds
    python benchmarks/bench_cli_start.py --rounds 15
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import subprocess
import sys

from railforge.cli.main import COMMANDS

TARGET_CPU_S = 0.3
EAGER = "import importlib; [importlib.import_module(m) for m in {modules!r}]; "
RUN = "import sys; sys.argv = ['railforge', *{args!r}]; from railforge.cli.entry import main; main()"


def variants() -> dict[str, str]:
    modules = sorted({c.module for c in COMMANDS.values()})
    return {
        "python -c pass": "pass",
        "--version": RUN.format(args=["--version"]),
        "--version, eager": EAGER.format(modules=modules) + RUN.format(args=["--version"]),
        "--help": RUN.format(args=["--help"]),
        "--help, eager": EAGER.format(modules=modules) + RUN.format(args=["--help"]),
    }


def cpu_of(code: str) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], check=True, stdout=subprocess.DEVNULL,
                   env={**os.environ, "COLUMNS": "100"})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    runs = variants()
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, code in runs.items():
            cpu[name].append(cpu_of(code))
    print(f"python {platform.python_version()}, {os.cpu_count()} CPUs, {args.rounds} rounds, CPU s per process")
    print(f"{'variant':<18} {'median':>8} {'min':>7} {'max':>7} {'vs eager':>9}")
    ok = True
    for name, values in cpu.items():
        med = statistics.median(values)
        base = name.split(",")[0]
        eager = cpu.get(f"{base}, eager")
        ratio = f"{med / statistics.median(eager):8.2f}x" if eager and not name.endswith("eager") else ""
        print(f"{name:<18} {med:8.3f} {min(values):7.3f} {max(values):7.3f} {ratio:>9}")
        if name in ("--version", "--help") and med >= TARGET_CPU_S:
            ok = False
    print(f"target: --version and --help under {TARGET_CPU_S} s CPU: {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
