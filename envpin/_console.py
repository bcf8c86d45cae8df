"""The `envpin` console script. Importing the CLI takes a moment (Typer, rich); Ctrl-C during it exits 130
with one line, as Ctrl-C does once a command runs, instead of a traceback from deep inside an import."""

import sys


def interrupted(exc: BaseException) -> bool:
    """Whether `exc` is Ctrl-C, or came from it: Python wraps an exception raised while a class is created
    (a KeyboardInterrupt inside ``__set_name__``, e.g. while ipaddress is imported) in a RuntimeError."""
    seen = 0
    current: BaseException | None = exc
    while current is not None and seen < 16:
        if isinstance(current, KeyboardInterrupt):
            return True
        current = current.__cause__ or current.__context__
        seen += 1
    return False


def main() -> None:
    try:
        from envpin.cli import main as run
    except BaseException as exc:
        if not interrupted(exc):
            raise
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    run()
