"""`envpin` and `python -m envpin`: hand over to envpin.cli, which parses, runs and reports every command.
Ctrl-C before it loads or after it returned is answered here as there: one `interrupted` line, exit 130."""

import signal
import sys

_PROGRAM = __name__ == "__main__" or sys.argv[0].rsplit("/", 1)[-1] == "envpin"  # not an import by a test


def _stop(signum: int, frame: object) -> None:
    import os

    try:  # noqa: SIM105 (contextlib would be one more import before the handler exists)
        sys.stdout.flush()  # what the command wrote still arrives
    except Exception:  # a closed pipe: nothing more can reach it
        pass
    sys.stderr.write("interrupted\n")  # line-buffered: written before the exit
    os._exit(130)


def main() -> None:
    """The console script: while the command runs, Ctrl-C is KeyboardInterrupt, which commands clean up after."""
    from envpin.cli import main as run

    if _PROGRAM:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        run()
    finally:  # the interpreter's shutdown is _stop's again, not a traceback
        if _PROGRAM:
            signal.signal(signal.SIGINT, _stop)


if _PROGRAM:
    signal.signal(signal.SIGINT, _stop)
    if __name__ == "__main__":
        main()
