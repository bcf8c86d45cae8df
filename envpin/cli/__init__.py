"""The command line: one Typer app, one module per command group, one place where errors become exit codes.

Each command parses its options, calls exactly one `envpin.api` function and hands the result to one
`envpin.views` renderer. api, views, rich and everything heavy are imported inside the commands, so
`envpin --help` loads Typer and these small modules only.
"""

from __future__ import annotations

import errno
import sys
from typing import Annotated

import typer

from envpin import __version__
from envpin.errors import EnvpinError, interrupted, shown

app = typer.Typer(
    name="envpin",
    help="Pin, build, verify and share bit-reproducible TensorFlow environments on NVIDIA NGC images.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    rich_markup_mode=None,
    # -h as well as --help, on every command (click hands the names down to subcommands).
    context_settings={"help_option_names": ["-h", "--help"]},
)

_state = {"debug": False}


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"envpin {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress or notes on stderr (errors still).")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Progress as plain lines even when stderr is not a terminal.")
    ] = False,
) -> None:
    from envpin.views import console

    if quiet and verbose:
        from envpin.errors import UsageError

        raise UsageError("--quiet and --verbose exclude each other", hint="choose one")
    _state["debug"] = debug
    console.settings.update(quiet=quiet, verbose=verbose)


def _register() -> None:
    """Attach the command groups (their modules import nothing heavy at module level)."""
    from envpin.cli import audit, catalog, doctor, environment, fleet, probe, runs, selftest

    for module in (catalog, environment, probe, selftest, doctor, audit, fleet, runs):
        module.register(app)


_register()


#: Options of the root command (all flags), which may come before the command's name.
_ROOT_FLAGS = frozenset({"--debug", "--quiet", "-q", "--verbose", "-v"})


def _app_for(args: list[str]) -> typer.Typer:
    """The app with only the command `args` name, else the whole app. Typer turns every registered command
    into a click command before it runs one (about a third of `envpin probe`'s start-up); the whole app is
    needed only for the root's help, shell completion and an unknown command's error."""
    import os

    if any(k.endswith("_COMPLETE") for k in os.environ):
        return app
    if all(a in _ROOT_FLAGS or a in _HELP for a in args) and (not args or any(a in _HELP for a in args)):
        return _summary_app()
    name = next((a for a in args if a not in _ROOT_FLAGS), None)
    if name is None or name.startswith("-"):
        return app
    commands = [c for c in app.registered_commands if c.name == name]
    groups = [g for g in app.registered_groups if g.name == name]
    if not commands and not groups:
        return app
    import copy

    only = copy.copy(app)
    only.registered_commands, only.registered_groups = commands, groups
    return only


_HELP = frozenset({"-h", "--help"})


def _summary_app() -> typer.Typer:
    """The app for the root's help (`envpin`, `envpin --help`): every command and group listed by its name and
    help alone. Their options are not shown there, and building them (Typer reads every signature) costs
    more than the rest of the help; the page is the same (tests/unit/test_cli_single_command.py)."""
    import copy

    def summary(info: typer.models.CommandInfo) -> typer.models.CommandInfo:
        listed = copy.copy(info)
        original = info.callback

        def callback() -> None:
            """Never runs: this command is only listed."""

        if original is not None:
            callback.__name__, callback.__doc__ = original.__name__, original.__doc__
        listed.callback = callback
        return listed

    def group(info: typer.models.TyperInfo) -> typer.models.TyperInfo:
        listed, inner = copy.copy(info), copy.copy(info.typer_instance)
        if inner is not None:
            inner.registered_commands, inner.registered_groups = [], []
        listed.typer_instance = inner
        return listed

    only = copy.copy(app)
    only.registered_commands = [summary(c) for c in app.registered_commands]
    only.registered_groups = [group(g) for g in app.registered_groups]
    return only


def _say(text: str) -> None:
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def _warnings() -> None:
    """What the library posted while the command ran (envpin.knowledge.notices: a damaged image-facts cache,
    image facts that contradict the written sources), each line once, as `warning:` lines; none with -q.
    Printed at the end, before an error's two lines, so those stay last."""
    if "envpin.knowledge.notices" not in sys.modules:  # never imported: nothing was posted (envpin --help)
        return
    from envpin.knowledge import notices
    from envpin.views import console

    lines = notices.drain()
    if not console.settings["quiet"]:
        for line in lines:
            _say(f"warning: {line}")


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: the one place where errors become messages and exit codes."""
    args = list(sys.argv[1:] if argv is None else argv)
    _state["debug"] = "--debug" in args
    command = None
    try:  # everything inside: Ctrl-C while modules load or Typer builds the command is Ctrl-C too
        # One process may run several commands (tests): each reports its own notices, with its own settings.
        # A module not imported yet starts that way (and `envpin --help` imports neither).
        if "envpin.knowledge.notices" in sys.modules:
            sys.modules["envpin.knowledge.notices"].drain()
        if "envpin.views.console" in sys.modules:
            sys.modules["envpin.views.console"].settings.update(quiet=False, verbose=False)
        command = typer.main.get_command(_app_for(args))
        rc = command.main(args=args, prog_name="envpin", standalone_mode=False)
        if argv is None and rc != 130:
            # The command is done and has said so: a Ctrl-C from here on must not kill the process by signal
            # after its success line (Python re-raises an uncaught one as SIGINT at exit).
            import signal

            signal.signal(signal.SIGINT, signal.SIG_IGN)
        sys.stdout.flush()  # a reader that went away is found here, not at exit
    except BrokenPipeError:
        _closed_stdout()
    except SystemExit as exc:
        # rich's console and Typer both exit 1 when stdout's reader went away (a BrokenPipeError behind it)
        if isinstance(exc.__context__, BrokenPipeError) or type(sys.stdout).__name__ == "PacifyFlushWrapper":
            _closed_stdout()
        raise
    except EnvpinError as exc:
        _warnings()
        if _state["debug"]:
            import traceback

            traceback.print_exc()
        # Messages quote user input and file contents: printed as plain text, never as markup.
        _say(f"error: {exc.message}")
        # Every error comes with a hint: the error's own, else where the expected input is described.
        _say(f"hint: {exc.hint or 'see ' + repr(_command_path(command, args) + ' --help')}")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        _say("interrupted")
        sys.exit(130)
    except OSError as exc:
        if exc.errno not in _PATH_ERRNOS or interrupted(exc):
            _internal_error(exc)
        # A path the system cannot follow (a name past NAME_MAX, a link loop) wherever a command looked at it
        _warnings()
        _say(f"error: {shown(exc.filename, 200)}: {exc.strerror}")
        _say("hint: shorten the path (names up to 255 bytes, paths up to 4,095) or fix the symbolic link")
        sys.exit(2)
    except Exception as exc:
        if type(exc).__name__ == "Abort" or interrupted(exc):
            _say("interrupted")
            sys.exit(130)
        _warnings()
        if not _is_usage_error(exc):
            _internal_error(exc)
        # Option-parsing errors: one line and a hint, exit 2, like every other bad input.
        _say(f"error: {exc.format_message()}")  # type: ignore[attr-defined]
        ctx = getattr(exc, "ctx", None)
        _say(f"hint: see '{ctx.command_path if ctx is not None else 'envpin'} --help'")
        sys.exit(2)
    try:  # Ctrl-C after the command's own output (while the notices print) is Ctrl-C too
        if rc == 130:
            # Typer (vendored click) turns Ctrl-C into a silent Exit(130); no command exits 130 by itself.
            _say("interrupted")
        else:
            _warnings()
    except KeyboardInterrupt:
        _say("interrupted")
        sys.exit(130)
    sys.exit(rc if isinstance(rc, int) else 0)


#: OSErrors that say a path given to envpin cannot be followed: input to refuse, not an internal error.
_PATH_ERRNOS = frozenset({errno.ENAMETOOLONG, errno.ELOOP})


#: The exit status of a process that wrote to a pipe nobody reads (128 + SIGPIPE), as `yes | head -1` gives.
CLOSED_STDOUT_EXIT = 141


def _closed_stdout() -> None:
    """stdout's reader went away (`envpin catalog | head -1`): end quietly with the Unix convention (141, what a
    process killed by SIGPIPE reports), never 1 ('a check found a problem') and never a traceback."""
    import os

    try:  # what is still buffered for stdout goes nowhere, so the flush at exit cannot fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    sys.exit(CLOSED_STDOUT_EXIT)


def _command_path(command: object, args: list[str]) -> str:
    """'envpin catalog show' for the arguments given: the command an error belongs to."""
    path, current = ["envpin"], command
    for arg in args:
        if arg.startswith("-"):
            continue
        sub = getattr(current, "commands", {}).get(arg)
        if sub is None:
            break
        path.append(arg)
        current = sub
    return " ".join(path)


def _is_usage_error(exc: BaseException) -> bool:
    # click.ClickException, or Typer's vendored copy of it (Typer >= 0.2x no longer depends on click).
    return hasattr(exc, "format_message") and hasattr(exc, "exit_code") and not isinstance(exc, EnvpinError)


def _internal_error(exc: BaseException) -> None:
    """Last resort: never show a traceback unless --debug asked for one; the exit code is 2 either way."""
    if _state["debug"]:
        import traceback

        traceback.print_exception(exc)
    _say(f"error: internal error: {type(exc).__name__}: {exc}")
    _say("hint: re-run as `envpin --debug <the same arguments>` and report the traceback")
    sys.exit(2)
