"""The one progress display (envpin.views.console.Progress) off a terminal: done/total, elapsed and the time
left, as plain lines on stderr, a line whenever a unit of work ends and otherwise throttled; the event it
shows (envpin.record.ProgressEvent). A clock the test moves stands in for the passing of time."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from envpin.record import ProgressEvent
from envpin.views import console


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def fresh_consoles() -> Iterator[None]:
    """Consoles made on this test's captured streams (stderr is not a terminal), as in a fresh process."""
    console._console.cache_clear()
    yield
    console._console.cache_clear()


def _read(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.splitlines()


def test_the_line_says_done_total_elapsed_and_the_time_left() -> None:
    assert console.progress_line("study", None, 2, 6, "runs", 10.0) == "study: 2/6 runs; 10 s elapsed, about 20 s left"
    assert console.progress_line("bisect", "comparing", 2, 3, "steps", 130) == (
        "bisect: 2/3 steps; comparing; 2 min 10 s elapsed, about 1 min 5 s left"
    )
    # nothing done yet, or all of it: no estimate; no total: the step and the time only
    assert console.progress_line("cost", None, 0, 4, "runs", 3.2) == "cost: 0/4 runs; 3 s elapsed"
    assert console.progress_line("cost", None, 4, 4, "runs", 7200) == "cost: 4/4 runs; 2 h elapsed"
    assert console.progress_line("lock", "checking", None, None, "", 0.4) == "lock: checking; 0 s elapsed"
    assert [console.duration(s) for s in (59.4, 60, 3599, 3660, -1)] == [
        "59 s",
        "1 min",
        "59 min 59 s",
        "1 h 1 min",
        "0 s",
    ]


def test_an_event_has_both_counts_or_neither_and_done_within_total() -> None:
    with pytest.raises(ValueError, match="both completed and total"):
        ProgressEvent("x", completed=1)
    with pytest.raises(ValueError, match=r"not within 0\.\.2"):
        ProgressEvent("x", completed=3, total=2)


def test_plain_lines_when_a_unit_ends_otherwise_throttled(capsys: pytest.CaptureFixture[str]) -> None:
    clock = Clock()
    shown = console.Progress("study", clock=clock)  # not entered: no ticking thread; tick() is called here
    shown.update("checking the command")  # a change within THROTTLE_S of the start: held back
    assert _read(capsys) == []
    shown.update(ProgressEvent("runs", completed=0, total=4, unit="runs"))  # the total becomes known: a line
    clock.now += 3
    shown.update(ProgressEvent("runs", completed=1, total=4, unit="runs"))  # a run ended: a line at once
    assert _read(capsys) == ["study: 0/4 runs; 0 s elapsed", "study: 1/4 runs; 3 s elapsed, about 9 s left"]
    shown.update(ProgressEvent("runs", "a step", completed=1, total=4, unit="runs"))  # no unit ended: held back
    clock.now += 1
    shown.tick()
    assert _read(capsys) == []
    clock.now += console.THROTTLE_S
    shown.tick()  # the change held back, once THROTTLE_S have passed since the last line
    assert _read(capsys) == ["study: 1/4 runs; a step; 9 s elapsed, about 27 s left"]
    clock.now += console.HEARTBEAT_S - 1
    shown.tick()
    assert _read(capsys) == []
    clock.now += 1
    shown.tick()  # nothing changed for HEARTBEAT_S: the line again, so a log shows the work goes on
    assert _read(capsys) == ["study: 1/4 runs; a step; 39 s elapsed, about 1 min 57 s left"]
    shown.update(ProgressEvent("runs", done=True))  # the operation ended: the display says nothing more
    clock.now += console.HEARTBEAT_S
    shown.tick()
    shown.update(ProgressEvent("runs", completed=2, total=4, unit="runs"))
    assert _read(capsys) == []


def test_verbose_shows_every_change_and_quiet_none(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = Clock()
    monkeypatch.setitem(console.settings, "verbose", True)
    shown = console.Progress("lock", clock=clock)
    shown.update("resolving")
    shown.update("checking")
    assert _read(capsys) == ["lock: resolving; 0 s elapsed", "lock: checking; 0 s elapsed"]
    monkeypatch.setitem(console.settings, "verbose", False)
    monkeypatch.setitem(console.settings, "quiet", True)
    with console.progress("cost") as update:
        update(ProgressEvent("runs", completed=1, total=2, unit="runs"))
    assert _read(capsys) == []


def test_the_self_tests_parts_are_counted_as_each_ends() -> None:
    """envpin.probe's self-test counts its parts (futures of its children) in order whichever ends first;
    the host side turns each count into a ProgressEvent of the self-test."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from envpin.api.selftest import _parts_reported
    from envpin.probe.selftest.run import _count_parts

    events: list[ProgressEvent] = []
    release = threading.Event()
    with ThreadPoolExecutor(max_workers=2) as pool:
        slow, fast = pool.submit(release.wait, 60), pool.submit(lambda: None)
        fast.result()
        _count_parts([(slow, "the op battery"), (fast, "seed hygiene")], _parts_reported(events.append))
        release.set()
    assert [(e.completed, e.total, e.step) for e in events] == [
        (0, 2, "TensorFlow children running"),
        (1, 2, "seed hygiene finished"),  # already over when counting began
        (2, 2, "the op battery finished"),
    ]
    assert {(e.title, e.unit) for e in events} == {("determinism self-test", "parts")}


def test_work_that_runs_past_the_throttle_without_news_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    clock = Clock()
    shown = console.Progress("probing img", clock=clock)
    shown.tick()
    clock.now += console.THROTTLE_S
    shown.tick()
    assert _read(capsys) == ["probing img: starting; 5 s elapsed"]
