"""`envpin` (the console script) and `python -m envpin`: run the CLI. Importing the CLI takes a moment
(Typer, rich); Ctrl-C during it exits 130 with one line, as Ctrl-C does once a command runs, instead of a
traceback from deep inside an import."""

import sys


def main() -> None:
    # Every import inside the try: this module is the first envpin code the console script runs, so
    # Ctrl-C can land in any of them.
    try:
        from envpin.cli import main as run
    except BaseException as exc:
        try:
            from envpin.errors import interrupted

            by_user = interrupted(exc)
        except BaseException:  # Ctrl-C again, or while envpin.errors itself was loading
            by_user = isinstance(exc, KeyboardInterrupt)
        if not by_user:
            raise
        sys.stderr.write("interrupted\n")
        sys.exit(130)
    run()


if __name__ == "__main__":
    main()
