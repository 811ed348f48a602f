"""The `railforge` command's entry point: Ctrl-C at any moment (start-up included) ends it with one line and
status 130, and an unexpected failure with one line and status 70 (RAILFORGE_DEBUG=1 shows the traceback).
Once the command has returned, Ctrl-C is ignored: the interpreter's shutdown restores the default handler, and
a signal landing there killed a finished build with status -2 and no message.

A command that built something large hands it to `KeepUntilExit` (typer's context object), and the process then
ends with `os._exit` once its output is flushed, without freeing it: a 131K-GPU plan is ~10 M objects, and freeing
them one by one took 0.5 s at the end of a ~22 s build."""

from __future__ import annotations

import contextlib
import os
import signal
import sys


class Interrupted(BaseException):
    """Raised by SIGINT instead of KeyboardInterrupt, so that no layer turns it into a traceback or 'Aborted!'."""


def _on_sigint(signum: int, frame: object) -> None:
    raise Interrupted


class KeepUntilExit:
    """Objects a command leaves to the end of the process rather than freeing them."""

    def __init__(self) -> None:
        self.kept: list[object] = []

    def keep(self, obj: object) -> None:
        self.kept.append(obj)


def main() -> None:
    keep = KeepUntilExit()
    try:
        os.getcwd()
    except FileNotFoundError:
        _last_words("railforge: the current folder no longer exists (a build with --out . replaces it): cd to a "
                    "folder that exists")
        sys.exit(2)
    try:
        signal.signal(signal.SIGINT, _on_sigint)  # a SIGINT during this call is still Python's KeyboardInterrupt
        from railforge.cli.main import app

        try:
            app(obj=keep)
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the work is over: a late Ctrl-C must not kill the exit
    except SystemExit as exc:
        if keep.kept:
            _exit_now(exc.code)
        raise
    except (Interrupted, KeyboardInterrupt):
        _last_words("railforge: interrupted")
        os._exit(130)
    except Exception as exc:
        if os.environ.get("RAILFORGE_DEBUG"):
            raise
        _last_words(f"railforge: internal error: {type(exc).__name__}: {exc}; please report it "
                    "(RAILFORGE_DEBUG=1 shows the traceback)")
        sys.exit(70)


def _exit_now(code: object) -> None:
    """End the process with `code` as SystemExit would, without the interpreter's clean-up."""
    if code is not None and not isinstance(code, int):
        _last_words(str(code))
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code or 0)


def _last_words(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
