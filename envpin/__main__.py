"""`envpin` (the console script) and `python -m envpin`: run the CLI. Importing the CLI takes a moment
(Typer, rich); Ctrl-C during it exits 130 with one line, as Ctrl-C does once a command runs, instead of a
traceback from deep inside an import.

`--version` and the lean path (`audit FILES...` in pipes and hooks, `catalog`, `recipe --ngc TAG`: see
`_lean`) are answered here without importing Typer; everything else goes to envpin.cli."""

import sys

if __name__ == "__main__" or sys.argv[0].rsplit("/", 1)[-1] == "envpin":  # the program, not an import
    import _signal  # the C module: `signal` would import enum

    def _stop(signum: int, frame: object) -> None:
        """Ctrl-C outside main's try: the same one line and 130 as inside it. Before it nothing has been written;
        after it (the command has returned, the interpreter is shutting down) its output is flushed first."""
        import os

        try:  # noqa: SIM105 (contextlib.suppress would import contextlib into every start-up)
            sys.stdout.flush()
        except Exception:  # a closed pipe: nothing more can reach it
            pass
        sys.stderr.write("interrupted\n")
        sys.stderr.flush()
        os._exit(130)

    _signal.signal(_signal.SIGINT, _stop)

TYPE_CHECKING = False  # typing's, without importing typing (~8 ms of `envpin --version`)
if TYPE_CHECKING:
    from collections.abc import Callable

    from envpin.errors import EnvpinError

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


def _lean_call(args: list[str]) -> "tuple[str, Callable[[], Callable[[], int]]] | None":
    """The command `args` name and its work, for the argv the lean path reads: `audit FILES...` with its common
    options (as pre-commit and CI steps run it; only when neither stream is a terminal), `catalog` alone and
    `recipe --ngc TAG`. None for anything else: Typer answers that."""
    if args == ["catalog"]:
        return "catalog", _catalog
    if len(args) in (2, 3) and args[0] == "recipe":
        tag = args[2] if len(args) == 3 and args[1] == "--ngc" else args[1].removeprefix("--ngc=")
        if len(args) == 2 and not args[1].startswith("--ngc="):
            return None
        if tag and not tag.startswith("-"):
            return "recipe", lambda: _recipe(tag)
        return None
    parsed = _audit_args(args)
    if parsed is None:
        return None
    from envpin.views import console

    return ("audit", lambda: _audit(*parsed)) if console.plain_possible() else None


def _catalog() -> "Callable[[], int]":
    from envpin.api.catalog import catalog_entries
    from envpin.views import catalog, console

    entries = catalog_entries(tf=None, flavor=None, stock=False)
    return lambda: catalog.table(entries, console.results(), note=None) or 0


def _recipe(tag: str) -> "Callable[[], int]":
    from envpin.api.environment import recipe_for
    from envpin.views import console, environment

    entry, recipe = recipe_for(tag, None, None)
    return lambda: environment.recipe(entry.tag, recipe, console.results()) or 0


def _audit(files: list[str], values: dict[str, str], flags: set[str]) -> "Callable[[], int]":
    from pathlib import Path

    from envpin.api.audit import audit_files
    from envpin.views import audit as view
    from envpin.views import console

    chosen = view.output_format(values.get("--format"), "--json" in flags, "--sarif" in flags)
    res = audit_files([Path(f) for f in files], fail_on=values.get("--fail-on"),
                      use_config="--no-config" not in flags, read_context="--no-context" not in flags)

    def show() -> int:
        view.audited(res, chosen, False, console.Plain(False), console.Plain(True))
        return res.exit_code

    return show


def _lean(args: list[str]) -> bool:
    """Run the commands `_lean_call` reads without Typer (~0.05 s CPU, more than auditing a small Dockerfile):
    the same envpin.api call and envpin.views renderer as the command in envpin.cli, and the same output, errors
    and exit codes as envpin.cli.main (tests/unit/test_cli_lean.py runs both paths). False when it does not
    apply, or when the work fails with anything but an EnvpinError before any output (the full CLI then runs
    the command again and reports it as it does)."""
    import gc
    import os

    if any(k.endswith("_COMPLETE") for k in os.environ):  # shell completion: Typer answers
        return False
    # Importing creates tens of thousands of objects and no garbage cycles worth a collection; each full pass
    # rescans them all (~5 ms of a 3-line audit). Off until the command ends; the audit's own work turns it on
    # with its thresholds (envpin.audit), so an audit of any size still collects.
    gc.disable()
    try:
        call = _lean_call(args)
        if call is None:
            gc.enable()
            return False
        name, work = call
        from envpin.errors import EnvpinError

        try:
            show = work()
        except EnvpinError as exc:
            _failed(name, exc)
        except Exception:
            gc.enable()
            return False
        try:
            code = show()
            sys.stdout.flush()
        except EnvpinError as exc:
            _failed(name, exc)
        except BrokenPipeError:
            _closed_stdout()
        except SystemExit as exc:  # rich exits 1 when stdout's reader went away: envpin.cli.main's 141 instead
            if isinstance(exc.__context__, BrokenPipeError):
                _closed_stdout()
            raise
        except Exception as exc:
            _notices()
            from envpin.cli import _internal_error

            _internal_error(exc)
        _notices()
    except KeyboardInterrupt:
        _say("interrupted")
        sys.exit(130)
    _leave(code)
    return True  # not reached


def _leave(code: int) -> None:
    """End the process with `code` at once: the interpreter's teardown (freeing every module and object, ~5 ms
    of a 45 ms one-file audit) does nothing the lean path needs. Its output is flushed first (stdout's reader
    gone at the last moment is envpin.cli's 141, as during the command); it writes no file and registers no
    atexit handler. Called as a library function (not the program: tests, an embedding process) it is
    SystemExit, which the caller may catch."""
    import os

    if "_signal" not in globals():
        import signal

        signal.signal(signal.SIGINT, signal.SIG_IGN)  # done: Ctrl-C from here on must not undo the exit status
        sys.exit(code)
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)  # as above
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _closed_stdout()
    try:  # noqa: SIM105 (contextlib would be one more import at start-up)
        sys.stderr.flush()
    except OSError:  # nobody reads errors any more: the exit status is all that is left to give
        pass
    os._exit(code)


def _failed(name: str, exc: "EnvpinError") -> None:
    """An EnvpinError as envpin.cli.main reports it: the notices, then one error: and one hint: line."""
    _notices()
    _say(f"error: {exc.message}")
    _say(f"hint: {exc.hint or 'see ' + repr(f'envpin {name} --help')}")
    sys.exit(exc.exit_code)


def _closed_stdout() -> None:
    from envpin.cli import _closed_stdout as closed

    closed()


def _say(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _notices() -> None:
    """What the library posted while the command ran, as `warning:` lines (envpin.cli's _warnings)."""
    if "envpin.knowledge.notices" in sys.modules:
        for line in sys.modules["envpin.knowledge.notices"].drain():
            _say(f"warning: {line}")


def main() -> None:
    """The console script. Ctrl-C at any point is one `interrupted` line and exit 130: before this try through
    `_stop`, inside it as KeyboardInterrupt; the window before this module's first lines is Python's start-up."""
    _open_closed_streams()
    try:
        if "_signal" in globals():  # from here on Ctrl-C is KeyboardInterrupt, which the commands clean up after
            _signal.signal(_signal.SIGINT, _signal.default_int_handler)
        _main()
    except KeyboardInterrupt:
        _say("interrupted")
        sys.exit(130)
    finally:  # the command is over: Ctrl-C during the interpreter's shutdown is `_stop`'s again, not a traceback
        if "_signal" in globals():
            _signal.signal(_signal.SIGINT, _stop)


def _open_closed_streams() -> None:
    """A stream the shell closed (`>&-`, `2>&-`) is None in Python: each is bound to os.devnull on its own
    descriptor, so what would go there is dropped (as print() and rich drop it) and the exit status stays the
    command's, never a traceback, an internal error or the 1 of an uncaught exception."""
    import os

    for fd, name in ((1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        devnull = os.open(os.devnull, os.O_WRONLY)
        if devnull != fd:
            os.dup2(devnull, fd)
            os.close(devnull)
        setattr(sys, name, open(fd, "w", closefd=False))  # noqa: SIM115 (the process's stream, never closed)


def _main() -> None:
    if _version_only(sys.argv[1:]):
        from envpin import __version__

        sys.stdout.write(f"envpin {__version__}\n")
        sys.exit(0)
    if _lean(sys.argv[1:]):
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
