"""The two consoles: results on stdout, progress and errors on stderr; created on first use."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import sys
from collections.abc import Callable, Iterator

TYPE_CHECKING = False  # typing's, without importing typing (a one-file audit loads this module)
if TYPE_CHECKING:
    from typing import Any

    from rich.console import Console

    from envpin.image.buildlog import ProgressEvent


def _unreadable(value: str | None) -> bool:
    """A COLUMNS or LINES of digits int() cannot read ('²'): rich checks str.isdigit, then calls int() and fails;
    envpin ignores such a value, as rich ignores one that is not digits at all (COLUMNS=abc)."""
    return value is not None and value.isdigit() and not value.isdecimal()


def _environ() -> dict[str, str] | None:
    """The environment rich reads its size from: os.environ without unreadable COLUMNS or LINES (None: as is)."""
    if not any(_unreadable(os.environ.get(name)) for name in ("COLUMNS", "LINES")):
        return None
    return {k: v for k, v in os.environ.items() if not (k in ("COLUMNS", "LINES") and _unreadable(v))}


def _width(stream: Any) -> int | None:
    # A fixed width keeps output stable in tests and pipes; COLUMNS still wins when set.
    if os.environ.get("COLUMNS"):
        return None
    try:
        return None if stream.isatty() else 120
    except (AttributeError, ValueError):
        return 120


#: Set by the root options -q/--quiet (no progress or notes on stderr; errors still) and -v/--verbose
#: (progress as plain lines even when stderr is not a terminal).
settings = {"quiet": False, "verbose": False}


@functools.cache
def _console(stderr: bool, quiet: bool = False) -> Console:
    from rich.console import Console

    return Console(
        stderr=stderr,
        highlight=False,
        width=_width(sys.stderr if stderr else sys.stdout),
        quiet=quiet,
        _environ=_environ(),
    )


def out() -> Console:
    """Results: tables, verdicts, summaries."""
    return _console(False)


def err() -> Console:
    """Progress, warnings and notes (quiet with -q; errors are printed by the CLI's main, always)."""
    return _console(True, settings["quiet"])


class Plain:
    """What `say` and the audit view need of a console, for a stream that is not a terminal, without loading
    rich: importing rich's console is about 0.25x `python -c "import typer"` of CPU, and a one-file audit in a
    pre-commit hook or CI step has a start-up target of 1.3x (docs/cli.md "Start-up"). There rich would write a
    plain line as it is; a line rich would change (a tab, a control character, an :emoji: code) is handed to
    rich itself, so the text is what rich writes (tests/golden/test_tables.py and the audit's goldens)."""

    color_system = None
    no_color = False
    is_terminal = False

    def __init__(self, stderr: bool, quiet: bool = False) -> None:
        self._stderr, self.quiet = stderr, quiet

    @property
    def file(self) -> Any:
        return sys.stderr if self._stderr else sys.stdout

    def rich(self) -> Console:
        """The rich console this one stands in for, for what only rich can lay out."""
        return _console(self._stderr, self.quiet)

    def print(self, text: str, **options: Any) -> None:
        if self.quiet:
            return
        if _PLAIN_UNSAFE.search(text):
            self.rich().print(text, **options)
            return
        self.file.write(text + "\n")
        self.file.flush()


#: What rich's print changes in a plain line: tabs (expanded), control characters (dropped) and :name: codes.
_PLAIN_UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f]|:\S*?:")


def plain_possible() -> bool:
    """True when rich would write plain text on both streams: neither is a terminal, nothing forces colour."""
    if "FORCE_COLOR" in os.environ or "TTY_COMPATIBLE" in os.environ:
        return False
    try:
        return not sys.stdout.isatty() and not sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def width_of(stream: Any) -> int | None:
    """The width rich gives a console on `stream` that is not a terminal: 120, or COLUMNS when set to a number;
    None where rich would decide otherwise (COLUMNS set to something else)."""
    columns = os.environ.get("COLUMNS")
    if not columns:
        return _width(stream)
    return int(columns) if columns.isdecimal() else None


def results() -> Console | Plain:
    """out(), or its Plain stand-in when neither stream is a terminal (plain_possible)."""
    return Plain(False) if plain_possible() else out()


def notes() -> Console | Plain:
    """err(), or its Plain stand-in when neither stream is a terminal (plain_possible); quiet with -q."""
    return Plain(True, settings["quiet"]) if plain_possible() else err()


def say(console: Console | Plain, text: str) -> None:
    """One plain line: no markup, no highlighting, no wrapping (messages quote user input)."""
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def note(text: str) -> None:
    """One plain line on stderr, without loading rich (progress and status notes); nothing with -q."""
    if settings["quiet"]:
        return
    sys.stderr.write(text + "\n")
    sys.stderr.flush()


def print_json(data: Any) -> None:
    """Canonical JSON on stdout: sorted keys, two-space indent, trailing newline."""
    sys.stdout.write(json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


class Progress:
    """The one progress display: a spinner, the current step and the elapsed time on a terminal's stderr,
    gone before the result is printed. Off when stderr is not a terminal (plain lines with -v) and with -q."""

    def __init__(self, title: str) -> None:
        import time

        self._clock = time.monotonic
        self._start = self._clock()
        self._step = "starting"
        self._title = title
        self._err = err()
        self._live: Any = None
        if self._err.is_terminal and not settings["quiet"]:
            from rich.live import Live
            from rich.spinner import Spinner

            self._spinner = Spinner("dots")
            self._live = Live(self, console=self._err, refresh_per_second=4, transient=True)

    def __rich__(self) -> Any:
        """Drawn again at every refresh, so the elapsed time runs between steps."""
        self._spinner.update(text=f"{self._title}: {self._step} ({self.elapsed:.0f} s)")
        return self._spinner

    def __enter__(self) -> Progress:
        if self._live:
            self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live:
            self._live.__exit__(*exc)

    def step(self, text: str) -> None:
        self._step = text
        if self._live:
            self._live.refresh()
        elif settings["verbose"] and not settings["quiet"]:
            say(self._err, f"{self._title}: {text}")

    @property
    def elapsed(self) -> float:
        return self._clock() - self._start


@contextlib.contextmanager
def progress(title: str) -> Iterator[Callable[[str], None]]:
    """A Progress for a command: yields the callback api functions take as progress=."""
    with Progress(title) as shown:
        yield shown.step


@contextlib.contextmanager
def progress_feed() -> Iterator[Callable[[ProgressEvent], None]]:
    """The callback library functions take as progress= when they report events (envpin.image.buildlog):
    one Progress per operation they start, gone when it ends and, at the latest, when the command's call
    returns or fails."""
    shown: dict[str, Progress] = {}

    def close(title: str) -> None:
        display = shown.pop(title, None)
        if display is not None:
            display.__exit__(None, None, None)

    def on(event: ProgressEvent) -> None:
        if event.done:
            close(event.title)
            return
        if event.title not in shown:
            for other in list(shown):
                close(other)  # one display at a time: a new operation replaces the last one's
            shown[event.title] = Progress(event.title).__enter__()
        if event.step is not None:
            shown[event.title].step(event.step)

    try:
        yield on
    finally:
        for title in list(shown):
            close(title)
