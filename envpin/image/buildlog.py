"""A build's log as both engines stream it, and the progress events it gives on the way.

Docker and podman print different step lines ("Step 2/7 : COPY ..." and "STEP 2/7: COPY ..."), but what
envpin does with them is the same: keep every line for the log file (outside the committed folder), keep
the last lines for an error message, and report the current step to whoever shows progress. The library
never draws that progress itself: it calls the caller's callback with a `ProgressEvent`, or nobody.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections import deque
from collections.abc import Iterable
from pathlib import Path

from envpin.errors import EngineError
from envpin.files.write import atomic_write
from envpin.image.model import BuildOutcome
from envpin.record import ProgressCallback, ProgressEvent

#: Log lines an error message quotes.
TAIL = 20


def save_log(path: Path, lines: Iterable[str]) -> None:
    """Write the log in one atomic step; a log that cannot be written never hides the build's own outcome."""
    with contextlib.suppress(Exception):
        atomic_write(path, "".join(lines).encode())


class BuildLog:
    """One build's log while it streams; as a context manager it reports the start and end of the build."""

    def __init__(self, path: Path, title: str, step: re.Pattern[str], progress: ProgressCallback | None = None) -> None:
        self.path = path
        self.title = title
        self.lines: list[str] = []
        self.tail: deque[str] = deque(maxlen=TAIL)
        #: The step running now, as error messages and progress name it.
        self.current = "starting"
        self._step = step
        self._progress = progress
        self._steps = self._cached = 0
        self._started = time.monotonic()

    def __enter__(self) -> BuildLog:
        self._started = time.monotonic()
        self._emit(ProgressEvent(self.title))
        return self

    def __exit__(self, *exc: object) -> None:
        self._emit(ProgressEvent(self.title, done=True))

    def _emit(self, event: ProgressEvent) -> None:
        if self._progress is not None:
            self._progress(event)

    def add(self, text: str) -> None:
        """Engine output (one line or several): kept, and a step line becomes the current step."""
        self.lines.append(text if text.endswith("\n") else text + "\n")
        for line in text.splitlines():
            if line.strip():
                self.tail.append(line.rstrip())
            m = self._step.match(line.strip())
            if m:
                self._steps += 1
                number, total, what = int(m.group(1)), int(m.group(2)), m.group(3)[:60]
                self.current = f"step {number}/{total} ({what})"
                # "STEP 2/7" begins step 2: one of seven is done (an engine's odd count is shown without one)
                counted = 1 <= number <= total
                self._emit(
                    ProgressEvent(
                        self.title,
                        what if counted else self.current,
                        completed=number - 1 if counted else None,
                        total=total if counted else None,
                        unit="steps",
                    )
                )
            elif "Using cache" in line:
                self._cached += 1

    def add_error(self, message: str) -> None:
        """The engine's own error message, kept whole (it is the last thing an error quotes)."""
        self.lines.append(message)
        self.tail.append(message.rstrip())

    def save(self, trailer: str | None = None) -> None:
        """Write what was streamed so far, plus `trailer` (why it stopped) when given."""
        save_log(self.path, [*self.lines, trailer] if trailer else self.lines)

    def failure(self, what: str, last: str) -> EngineError:
        """`what` failed at the current step: the error to raise, quoting the log's tail and naming the file
        (written here, so the hint never points at a missing log)."""
        self.save()
        return EngineError(
            f"{what} at {self.current}: {last}\n" + "\n".join(f"  | {t}" for t in self.tail),
            hint=f"full log: {self.path}",
        )

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def outcome(self, image_id: str, tag: str) -> BuildOutcome:
        """The common outcome; FROM is never reported as cached, so every other step cached is a no-op build."""
        cached = self._steps > 0 and self._cached >= self._steps - 1
        return BuildOutcome(image_id, tag, cached, self.elapsed, self.path, tuple(self.tail))
