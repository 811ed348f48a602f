"""The `railforge` command's entry point: Ctrl-C at any moment (start-up included) ends it with one line and
status 130, and an unexpected failure with one line and status 70 (RAILFORGE_DEBUG=1 shows the traceback).
Once the command has returned, Ctrl-C is ignored: the interpreter's shutdown restores the default handler, and
a signal landing there killed a finished build with status -2 and no message."""

from __future__ import annotations

import os
import signal
import sys


class Interrupted(BaseException):
    """Raised by SIGINT instead of KeyboardInterrupt, so that no layer turns it into a traceback or 'Aborted!'."""


def _on_sigint(signum: int, frame: object) -> None:
    raise Interrupted


def main() -> None:
    try:
        signal.signal(signal.SIGINT, _on_sigint)  # a SIGINT during this call is still Python's KeyboardInterrupt
        from topology.cli import app

        try:
            app()
        finally:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # the work is over: a late Ctrl-C must not kill the exit
    except (Interrupted, KeyboardInterrupt):
        _last_words("railforge: interrupted")
        os._exit(130)
    except Exception as exc:
        if os.environ.get("RAILFORGE_DEBUG"):
            raise
        _last_words(f"railforge: internal error: {type(exc).__name__}: {exc}; please report it "
                    "(RAILFORGE_DEBUG=1 shows the traceback)")
        sys.exit(70)


def _last_words(line: str) -> None:
    try:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
