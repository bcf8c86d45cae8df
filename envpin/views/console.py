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

    from envpin.record import ProgressEvent

    #: What console.progress yields: a step's text, or an event with done/total.
    Update = Callable[[str | ProgressEvent], None]


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


def stdout_is_terminal() -> bool:
    """Whether a person reads stdout (a terminal), not a pipe or a file: what a command with a JSON result
    chooses its default output by."""
    try:
        return bool(sys.stdout.isatty())
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


def print_json(data: Any, ascii_only: bool = False) -> None:
    """Canonical JSON on stdout: sorted keys, two-space indent, trailing newline; `ascii_only` for what holds
    probe reports' text (undecodable bytes arrive as lone surrogates, which only a \\u escape can carry)."""
    sys.stdout.write(json.dumps(data, sort_keys=True, indent=2, ensure_ascii=ascii_only) + "\n")
    sys.stdout.flush()


#: Plain progress lines (stderr not a terminal): one whenever a unit of work ends; otherwise a change is shown
#: at most once every THROTTLE_S (a command over within that time prints none), and while nothing changes
#: the line is repeated every HEARTBEAT_S, so a CI log shows that a long run is still running.
THROTTLE_S = 5.0
HEARTBEAT_S = 30.0
_TICK_S = 1.0


def duration(seconds: float) -> str:
    """Seconds as a person reads them in a progress line: "42 s", "3 min 5 s", "1 h 2 min"."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def progress_line(
    title: str, step: str | None, completed: int | None, total: int | None, unit: str, elapsed: float
) -> str:
    """The one progress text, live on a terminal or a plain line: "study: 3/10 runs; 1 min 2 s elapsed, about
    2 min 25 s left". The estimate assumes the units left take as long as those done took on average."""
    parts = []
    if completed is not None and total is not None:
        parts.append(f"{completed}/{total}" + (f" {unit}" if unit else ""))
    if step:
        parts.append(step)
    timing = f"{duration(elapsed)} elapsed"
    left = elapsed * (total - completed) / completed if completed and total is not None else 0.0
    if left >= 0.5:  # some done, some left, and a second or more of it
        timing += f", about {duration(left)} left"
    return f"{title}: {'; '.join([*parts, timing])}"


class Progress:
    """The one progress display: the title, how far the work is when it has a known total (done/total), the
    current step, the elapsed time and an estimate of the time left. On a terminal's stderr a live line (a
    spinner), gone before the result is printed; otherwise plain lines on stderr, throttled (THROTTLE_S,
    HEARTBEAT_S; with -v every change); nothing with -q. Updates may come from several threads (runs made
    `jobs` at a time)."""

    def __init__(self, title: str, clock: Callable[[], float] | None = None) -> None:
        import threading
        import time

        self._clock = clock or time.monotonic
        self._start = self._clock()
        self._title = title
        self._step: str | None = "starting"
        self._completed: int | None = None
        self._total: int | None = None
        self._unit = ""
        self._lock = threading.Lock()
        #: Where the lines go: rich's console on a terminal, else its Plain stand-in (no rich loaded; notes()).
        self._err: Any = None
        self._live: Any = None
        self._ticker: Any = None
        self._stop = threading.Event()
        #: When the last plain line was written (the start counts: a first line waits THROTTLE_S) and whether
        #: a change since then is not shown yet (the start is one: work still "starting" after THROTTLE_S says so).
        self._shown_at = self._start
        self._pending = True
        self._closed = settings["quiet"]
        if self._closed:
            return
        self._err = notes()
        if self._err.is_terminal:
            from rich.live import Live
            from rich.spinner import Spinner

            self._spinner = Spinner("dots")
            self._live = Live(self, console=self._err, refresh_per_second=4, transient=True)
        else:
            self._ticker = threading.Thread(target=self._tick_until_stopped, name="envpin-progress", daemon=True)

    def __rich__(self) -> Any:
        """Drawn again at every refresh, so the elapsed time runs between steps."""
        from rich.text import Text

        self._spinner.update(text=Text(self.text()))
        return self._spinner

    def __enter__(self) -> Progress:
        if self._live:
            self._live.__enter__()
        if self._ticker is not None:
            self._ticker.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """The display goes (the operation ended): no more lines; the live line is cleared."""
        with self._lock:
            if self._closed and self._live is None and self._ticker is None:
                return
            self._closed = True
        self._stop.set()
        if self._ticker is not None and self._ticker.is_alive():
            self._ticker.join()
        self._ticker = None
        if self._live:
            live, self._live = self._live, None
            live.__exit__(None, None, None)

    def text(self) -> str:
        """What the display says now."""
        return progress_line(self._title, self._step, self._completed, self._total, self._unit, self.elapsed)

    def step(self, text: str) -> None:
        """A new current step, without a count."""
        self.update(text)

    def update(self, news: str | ProgressEvent) -> None:
        """A step (text), or an event: its step, and done/total when it has them (its title is the display's
        own here; progress_feed opens one display per title); an event with done=True ends the display."""
        if isinstance(news, str):
            changes: dict[str, Any] = {"_step": news}
        elif news.done:
            self.close()
            return
        else:
            changes = {"_step": news.step}
            if news.total is not None:
                changes.update(_completed=news.completed, _total=news.total, _unit=news.unit)
        with self._lock:
            if self._closed:
                return
            ended = "_total" in changes and (changes["_completed"], changes["_total"]) != (
                self._completed,
                self._total,
            )
            for name, value in changes.items():
                setattr(self, name, value)
            if self._live:
                self._live.refresh()
                return
            now = self._clock()
            if ended or settings["verbose"] or now - self._shown_at >= THROTTLE_S:
                self._write(now)
            else:
                self._pending = True

    def tick(self) -> None:
        """Plain lines between updates: a change held back by the throttle once THROTTLE_S have passed, and the
        line again after HEARTBEAT_S without one."""
        with self._lock:
            if self._closed or self._live:
                return
            now = self._clock()
            waited = now - self._shown_at
            if (self._pending and waited >= THROTTLE_S) or waited >= HEARTBEAT_S:
                self._write(now)

    def _tick_until_stopped(self) -> None:
        while not self._stop.wait(_TICK_S):
            self.tick()

    def _write(self, now: float) -> None:
        """One plain line (the caller holds the lock)."""
        self._shown_at, self._pending = now, False
        say(
            self._err,
            progress_line(self._title, self._step, self._completed, self._total, self._unit, now - self._start),
        )

    @property
    def elapsed(self) -> float:
        return self._clock() - self._start


@contextlib.contextmanager
def progress(title: str) -> Iterator[Update]:
    """A Progress for a command: yields the callback api functions take as progress= (a step's text, or an
    event with done/total; the display keeps the command's title)."""
    with Progress(title) as shown:
        yield shown.update


@contextlib.contextmanager
def progress_feed() -> Iterator[Callable[[ProgressEvent], None]]:
    """The callback library functions take as progress= when they report events that name their operation
    (envpin.image.buildlog): one Progress per operation they start, gone when it ends and, at the latest,
    when the command's call returns or fails."""
    shown: dict[str, Progress] = {}

    def close(title: str) -> None:
        display = shown.pop(title, None)
        if display is not None:
            display.close()

    def on(event: ProgressEvent) -> None:
        if event.done:
            close(event.title)
            return
        if event.title not in shown:
            for other in list(shown):
                close(other)  # one display at a time: a new operation replaces the last one's
            shown[event.title] = Progress(event.title).__enter__()
        if event.step is not None or event.total is not None:
            shown[event.title].update(event)

    try:
        yield on
    finally:
        for title in list(shown):
            close(title)
