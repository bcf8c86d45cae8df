"""`envpin` (the console script) and `python -m envpin`: run the CLI. Importing the CLI takes a moment
(Typer, rich); Ctrl-C during it exits 130 with one line, as Ctrl-C does once a command runs, instead of a
traceback from deep inside an import."""

import sys

from envpin.errors import interrupted


def main() -> None:
    try:
        from envpin.cli import main as run
    except BaseException as exc:
        if not interrupted(exc):
            raise
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    run()


if __name__ == "__main__":
    main()
