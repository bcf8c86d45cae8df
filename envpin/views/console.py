"""The two consoles: results on stdout, progress and errors on stderr; created on first use."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


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

    return Console(stderr=stderr, highlight=False, width=_width(sys.stderr if stderr else sys.stdout), quiet=quiet)


def out() -> Console:
    """Results: tables, verdicts, summaries."""
    return _console(False)


def err() -> Console:
    """Progress, warnings and notes (quiet with -q; errors are printed by the CLI's main, always)."""
    return _console(True, settings["quiet"])


def say(console: Console, text: str) -> None:
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


@contextlib.contextmanager
def progress(title: str) -> Iterator[Callable[[str], None] | None]:
    """A callback showing the latest progress message on a terminal's stderr (None when not a TTY);
    the spinner is gone before the result is printed."""
    console = err()
    if settings["quiet"]:
        yield None
        return
    if not console.is_terminal:
        yield (lambda message: say(console, message)) if settings["verbose"] else None
        return
    with console.status(title) as status:
        yield lambda message: status.update(message)
