"""The one value-class idiom of envpin's host side: a dataclass (frozen unless it accumulates results, with
slots) that derives from `Value`, so every value class has `.replace()`.

    @dataclass(frozen=True, slots=True)
    class Point(Value):
        x: int
        y: int = 0

    Point(1).replace(y=2)  # Point(x=1, y=2), made by __init__, so __post_init__ checks run again

Fields are declared once, as annotations, and type checkers see them. The standard-library core that runs in
images (envpin.portable, envpin.probe) keeps `typing.NamedTuple` records: Python 3.6 has no dataclasses.

`ProgressEvent` is the one record the library hands to a caller's `progress=` callback: it never draws
progress itself (the CLI's display is envpin.views.console.Progress).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, TypeVar

_V = TypeVar("_V", bound="Value")


class Value:
    """Base of every value class: `replace` as dataclasses.replace, as a method (no import at the call site)."""

    __slots__ = ()

    def replace(self: _V, **changes: Any) -> _V:
        """A copy with `changes` applied; unknown names are a TypeError, as for the constructor."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]


@dataclasses.dataclass(frozen=True, slots=True)
class ProgressEvent(Value):
    """One moment of a long operation, for the caller to show. With a known total the caller can say how far
    it is and estimate the time left; `completed` changing is a unit of work that ended."""

    #: The operation, e.g. "building envpin/20.02-tf2:0b63722adfbe"; one display per title.
    title: str
    #: What it does now ("COPY ..."); None when it has only begun.
    step: str | None = None
    #: The operation ended, well or not: its display goes.
    done: bool = False
    #: Units of work finished so far, of `total` (both None: an operation without a known total).
    completed: int | None = None
    total: int | None = None
    #: What the units are, plural, as "3/10 runs" says them ("runs", "steps", "parts", "nodes").
    unit: str = ""

    def __post_init__(self) -> None:
        if (self.completed is None) != (self.total is None):
            raise ValueError("a progress event gives both completed and total, or neither")
        if self.completed is not None and self.total is not None and not 0 <= self.completed <= self.total:
            raise ValueError(f"completed {self.completed} is not within 0..{self.total}")


#: What library functions take as `progress=` when they report events.
ProgressCallback = Callable[[ProgressEvent], None]
