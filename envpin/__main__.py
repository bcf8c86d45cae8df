"""`envpin` (the console script) and `python -m envpin`: run the CLI. Importing the CLI takes a moment
(Typer, rich); Ctrl-C during it exits 130 with one line, as Ctrl-C does once a command runs, instead of a
traceback from deep inside an import."""

import sys

#: Root options that may stand beside --version (envpin.cli's _ROOT_FLAGS); none changes what it prints.
_ROOT_FLAGS = frozenset({"--debug", "--quiet", "-q", "--verbose", "-v"})


def _version_only(args: list[str]) -> bool:
    """`envpin --version` (with root flags only): answered here, without loading Typer to print one line."""
    import os

    if any(k.endswith("_COMPLETE") for k in os.environ):  # shell completion: Typer answers
        return False
    return "--version" in args and all(a == "--version" or a in _ROOT_FLAGS for a in args)


def main() -> None:
    if _version_only(sys.argv[1:]):
        from envpin import __version__

        sys.stdout.write(f"envpin {__version__}\n")
        sys.exit(0)
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
