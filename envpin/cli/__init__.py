"""The command line: one Typer app whose commands load from one table, and the one place where errors become
messages and exit codes.

Each command lives in envpin/cli/<group>.py as its own Typer app (see `command_app`); it parses its options,
calls exactly one `envpin.api` function and hands the result to one `envpin.views` renderer. A command's module
is imported, and its options built, only when that command runs: `envpin --version` builds no command, and
`envpin --help` lists the commands from their help texts without building their options.
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Iterator, MutableMapping, Sequence
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer
from typer.core import TyperCommand, TyperGroup

from envpin import __version__
from envpin.errors import EnvpinError, Terminated, interrupted, shown, speaking

if TYPE_CHECKING:
    from typer import _click as click  # Typer's own copy of click: the types it builds commands of

#: Every command, in the order `envpin --help` lists them: its words -> "module:attribute", the Typer app that
#: defines it under envpin.cli. A group (catalog, fleet) is a LazyGroup app holding only its callback, and its
#: subcommands are entries of their own ("catalog show"). A new command is one line here and its module.
COMMANDS: dict[str, str] = {
    "recipe": "environment:recipe_app",
    "render": "environment:render_app",
    "build": "environment:build_app",
    "lock": "environment:lock_app",
    "probe": "probe:probe_app",
    "diff": "probe:diff_app",
    "verify": "probe:verify_app",
    "sbom": "sbom:sbom_app",
    "attest": "attest:attest_app",
    "attest keygen": "attest:keygen_app",
    "attest sign": "attest:sign_app",
    "attest verify": "attest:verify_app",
    "selftest": "selftest:selftest_app",
    "doctor": "doctor:doctor_app",
    "audit": "audit:audit_app",
    "bisect": "runs:bisect_app",
    "study": "runs:study_app",
    "cost": "runs:cost_app",
    "resume-check": "runs:resume_app",
    "runs": "track:runs_app",
    "catalog": "catalog:catalog_app",
    "catalog show": "catalog:show_app",
    "catalog sync": "catalog:sync_app",
    "fleet": "fleet:fleet_app",
    "fleet report": "fleet:report_app",
    "fleet manifest": "fleet:manifest_app",
    "fleet probe": "fleet:probe_app",
    "fleet selftest": "fleet:selftest_app",
}


def _typer_app(path: str) -> typer.Typer:
    import importlib

    module, _, attribute = COMMANDS[path].partition(":")
    app: typer.Typer = getattr(importlib.import_module(f"envpin.cli.{module}"), attribute)
    return app


def _children(prefix: str) -> list[str]:
    """The names of the commands one word below `prefix` ("" for the root, "catalog " for its group)."""
    return [path[len(prefix) :] for path in COMMANDS if path.startswith(prefix) and " " not in path[len(prefix) :]]


class _Commands(MutableMapping[str, "click.Command"]):
    """A group's commands by name, each module imported and its command built on first use (TyperGroup reads
    its commands from this mapping: running one, listing, completing, suggesting a close name)."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        self._names = _children(prefix)
        self._built: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._built:
            if name not in self._names:
                raise KeyError(name)
            self._built[name] = typer.main.get_command(_typer_app(self._prefix + name))
        return self._built[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        raise TypeError("a group's commands come from envpin.cli.COMMANDS")

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def summaries(self) -> dict[str, click.Command]:
        """Stand-ins for a help page's listing: each command's name and help, no options (building every
        command's options costs half again the start-up of `envpin --help`)."""
        return {name: _summary(self._prefix + name, name) for name in self._names}


def _summary(path: str, name: str) -> click.Command:
    import inspect

    app = _typer_app(path)
    if len(app.registered_commands) == 1 and not app.registered_callback:  # a command, not a group
        info = app.registered_commands[0]
        help_text = inspect.cleandoc(info.help) if info.help else inspect.getdoc(info.callback)
        return TyperCommand(name=name, help=help_text, short_help=info.short_help, hidden=info.hidden)
    assert isinstance(app.info.help, str), f"the group {path} states its help"
    return TyperCommand(name=name, help=inspect.cleandoc(app.info.help))


class LazyGroup(TyperGroup):
    """A group whose commands come from COMMANDS, each built when it is used: the root, and a group app made
    with `command_app(name=..., cls=LazyGroup)` whose subcommands are COMMANDS entries under its name."""

    def __init__(self, **attrs: object) -> None:
        super().__init__(**attrs)  # type: ignore[arg-type]
        self.commands = self._lazy = _Commands("" if self.name == "envpin" else f"{self.name} ")

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Typer's listing, over the commands' help texts alone."""
        self.commands = self._lazy.summaries()
        try:
            super().format_commands(ctx, formatter)
        finally:
            self.commands = self._lazy


app = typer.Typer(
    name="envpin",
    cls=LazyGroup,
    help="Pin, build, verify and share bit-reproducible TensorFlow environments on NVIDIA NGC images.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish, PowerShell
    rich_markup_mode=None,
    # -h as well as --help, on every command (click hands the names down to subcommands).
    context_settings={"help_option_names": ["-h", "--help"]},
)

_state = {"debug": False, "terminated": False}


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
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Every progress change as a line when stderr is not a terminal (else: as work units end, "
            "others at most every few seconds).",
        ),
    ] = False,
) -> None:
    from envpin.views import console

    if quiet and verbose:
        from envpin.errors import UsageError

        raise UsageError("--quiet and --verbose exclude each other", hint="choose one")
    _state["debug"] = debug
    console.settings.update(quiet=quiet, verbose=verbose)


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
    if argv is None:
        _open_closed_streams()
        import signal

        signal.signal(signal.SIGTERM, _on_sigterm)
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
        command = root = typer.main.get_command(app)
        with speaking(lambda name, other, values: _option(root, args, name, other, values)):
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
        _failed(exc, command, args)
    except KeyboardInterrupt as exc:
        _stopped(exc)
    except Exception as exc:
        _unexpected(exc)
    _finish(rc)


def _on_sigterm(signum: int, frame: object) -> None:
    """SIGTERM (a scheduler's cancel, `kill`, a container stop) becomes Terminated: the clean-up of Ctrl-C runs
    (runs stopped with their trees, work folders removed) instead of Python's default of dying on the spot."""
    _state["terminated"] = True  # Typer returns 130 for any KeyboardInterrupt, Terminated included
    raise Terminated()


def _stopped(exc: KeyboardInterrupt | None) -> NoReturn:
    """Ctrl-C (exit 130) or SIGTERM (143), one line."""
    if isinstance(exc, Terminated) or _state.get("terminated"):
        _say("terminated (SIGTERM)")
        sys.exit(143)
    _say("interrupted")
    sys.exit(130)


def _failed(exc: EnvpinError, command: click.Command | None, args: list[str]) -> NoReturn:
    """An expected failure: the notices, then one error line and one hint line, and its exit code."""
    _warnings()
    if _state["debug"]:
        import traceback

        traceback.print_exc()
    # Messages quote user input and file contents: printed as plain text, never as markup.
    _say(f"error: {exc.message}")
    # Every error comes with a hint: the error's own, else where the expected input is described.
    _say(f"hint: {exc.hint or 'see ' + repr(_command_path(command, args) + ' --help')}")
    sys.exit(exc.exit_code)


def _unexpected(exc: Exception) -> NoReturn:
    """What no command raises on purpose: Ctrl-C wrapped by Python or click (130), a path the system cannot
    follow and click's option-parsing errors (one error line and a hint, exit 2), else an internal error."""
    if type(exc).__name__ == "Abort" or interrupted(exc):
        _stopped(interrupted(exc))
    if isinstance(exc, OSError) and exc.errno not in _PATH_ERRNOS:
        _internal_error(exc)
    _warnings()
    if isinstance(exc, OSError):  # a name past NAME_MAX or a link loop, wherever a command looked at it
        _say(f"error: {shown(exc.filename, 200)}: {exc.strerror}")
        _say("hint: shorten the path (names up to 255 bytes, paths up to 4,095) or fix the symbolic link")
        sys.exit(2)
    if not _is_usage_error(exc):
        _internal_error(exc)
    if type(exc).__name__ == "NoArgsIsHelpError":  # `envpin`, `envpin fleet`: asked for nothing, not wrongly
        sys.stdout.write(exc.ctx.get_help() + "\n")  # type: ignore[attr-defined]
        sys.stdout.flush()
        sys.exit(0)
    # Option-parsing errors: one line and a hint, exit 2, like every other bad input.
    _say(f"error: {exc.format_message()}")  # type: ignore[attr-defined]
    ctx = getattr(exc, "ctx", None)
    _say(f"hint: see '{ctx.command_path if ctx is not None else 'envpin'} --help'")
    sys.exit(2)


def _finish(rc: object) -> NoReturn:
    """The command returned: its notices (or, when click turned Ctrl-C into a silent Exit(130), one line)."""
    try:  # Ctrl-C after the command's own output (while the notices print) is Ctrl-C too
        if rc == 130:  # no command exits 130 by itself
            _stopped(None)
        else:
            _warnings()
    except KeyboardInterrupt as exc:
        _stopped(exc)
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
        if sys.__stdout__ is not None:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.__stdout__.fileno())
    except (OSError, ValueError):
        pass
    sys.exit(CLOSED_STDOUT_EXIT)


def _command_path(command: click.Command | None, args: list[str]) -> str:
    """'envpin catalog show' for the arguments given: the command an error belongs to."""
    return " ".join(["envpin", *_walk(command, args)[0]])


def _walk(command: click.Command | None, args: list[str]) -> tuple[list[str], click.Command | None]:
    """The names of the command (and subcommand) `args` run, and that command (`command` is the root)."""
    names: list[str] = []
    current = command
    for arg in args:
        if arg.startswith("-"):
            continue
        sub = getattr(current, "commands", {}).get(arg)
        if sub is None:
            break
        names.append(arg)
        current = sub
    return names, current


def _option(root: click.Command, args: list[str], name: str, command: str | None, values: Sequence[str] = ()) -> str:
    """How envpin.errors.param names parameter `name` on the command line: the option of the command `args` run
    that sets it (its long name; for `no_x`, the second name of a --x/--no-x flag; an argument's metavar), or
    `envpin COMMAND --option` for a parameter of another `command`; with `values`, the option once per value."""
    names, leaf = _walk(root, command.split() if command else args)
    negative = name.startswith("no_")
    for p in getattr(leaf, "params", ()):
        opts = p.secondary_opts if negative and p.name == name[3:] else p.opts if p.name == name else None
        if opts:
            flag = (
                next((o for o in opts if o.startswith("--")), opts[0])
                if p.param_type_name == "option"
                else p.human_readable_name
            )
            given = " ".join(f"{flag} {value}" for value in values) if values else flag
            return f"envpin {' '.join(names)} {given}" if command else given
    return f"`{name}`"  # no option sets it (tests/unit/test_flags_stay_in_cli.py checks that every name has one)


def _is_usage_error(exc: BaseException) -> bool:
    # click.ClickException, or Typer's vendored copy of it (Typer >= 0.2x no longer depends on click).
    return hasattr(exc, "format_message") and hasattr(exc, "exit_code") and not isinstance(exc, EnvpinError)


def _internal_error(exc: BaseException) -> NoReturn:
    """Last resort: never show a traceback unless --debug asked for one; the exit code is 2 either way."""
    if _state["debug"]:
        import traceback

        traceback.print_exception(exc)
    _say(f"error: internal error: {type(exc).__name__}: {exc}")
    _say("hint: re-run as `envpin --debug <the same arguments>` and report the traceback")
    sys.exit(2)


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
