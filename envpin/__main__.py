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


#: `envpin audit` options the lean path reads: flags, and options that take a value (with their choices).
_AUDIT_FLAGS = frozenset({"--json", "--sarif", "--no-config", "--no-context"})
_AUDIT_VALUES = {"--format": None, "--fail-on": ("error", "warning", "info")}


def _audit_args(args: list[str]) -> tuple[list[str], dict[str, str], set[str]] | None:
    """`audit FILES... [--format F|--json|--sarif] [--fail-on S] [--no-config] [--no-context]`, as pre-commit
    and CI steps run it: (files, option values, flags); None for anything else (Typer answers that)."""
    if not args or args[0] != "audit":
        return None
    files: list[str] = []
    values: dict[str, str] = {}
    flags: set[str] = set()
    rest = iter(args[1:])
    for arg in rest:
        name, eq, value = arg.partition("=")
        if arg in _AUDIT_FLAGS:
            flags.add(arg)
        elif name in _AUDIT_VALUES and name not in values:
            if not eq:
                value = next(rest, "")
            choices = _AUDIT_VALUES[name]
            if not value or value.startswith("-") or (choices is not None and value not in choices):
                return None
            values[name] = value
        elif arg and not arg.startswith("-"):
            files.append(arg)
        else:  # another option, --help, `--`, `-`, an empty name, a repeated option: Typer's to answer
            return None
    return (files, values, flags) if files else None


def _lean_audit(args: list[str]) -> bool:
    """Run `envpin audit` as `_audit_args` reads it without Typer and rich (they cost three times what auditing a
    small Dockerfile does), when neither stream is a terminal (pre-commit, CI, pipes): the same calls as
    envpin.cli.audit, the same output, errors and exit codes as envpin.cli.main (tests/unit/test_cli_lean.py
    runs both paths). False when it does not apply; anything unexpected goes to the full CLI."""
    import os

    parsed = _audit_args(args)
    if parsed is None or any(k.endswith("_COMPLETE") for k in os.environ):
        return False
    from envpin.views import console

    if not console.plain_possible():
        return False
    files, values, flags = parsed
    try:
        return _run_audit(files, values, flags)
    except KeyboardInterrupt:
        _say("interrupted")
        sys.exit(130)


def _run_audit(files: list[str], values: dict[str, str], flags: set[str]) -> bool:
    from pathlib import Path

    from envpin.api.audit import audit_files
    from envpin.errors import EnvpinError
    from envpin.views import audit as view
    from envpin.views import console

    try:
        chosen = view.output_format(values.get("--format"), "--json" in flags, "--sarif" in flags)
        res = audit_files([Path(f) for f in files], fail_on=values.get("--fail-on"),
                          use_config="--no-config" not in flags, read_context="--no-context" not in flags)
    except EnvpinError as exc:
        _notices()
        _say(f"error: {exc.message}")
        _say(f"hint: {exc.hint or 'see ' + repr('envpin audit --help')}")
        sys.exit(exc.exit_code)
    except Exception:  # the full CLI runs the command again and reports it as it does
        return False
    try:
        view.audited(res, chosen, False, console.Plain(False), console.Plain(True))
        sys.stdout.flush()
    except BrokenPipeError:
        from envpin.cli import _closed_stdout

        _closed_stdout()
    _notices()
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # done: Ctrl-C from here on must not undo the exit status
    sys.exit(res.exit_code)


def _say(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _notices() -> None:
    """What the library posted while the command ran, as `warning:` lines (envpin.cli's _warnings)."""
    if "envpin.knowledge.notices" in sys.modules:
        for line in sys.modules["envpin.knowledge.notices"].drain():
            _say(f"warning: {line}")


def main() -> None:
    if _version_only(sys.argv[1:]):
        from envpin import __version__

        sys.stdout.write(f"envpin {__version__}\n")
        sys.exit(0)
    if _lean_audit(sys.argv[1:]):
        return
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
