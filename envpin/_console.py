"""The `envpin` console script. Importing the CLI takes a moment (Typer, rich); Ctrl-C during it exits 130
with one line, as Ctrl-C does once a command runs, instead of a traceback from deep inside an import."""

import sys


def main() -> None:
    try:
        from envpin.cli import main as run
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    run()
