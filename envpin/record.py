"""The one value-class idiom of envpin's host side: a dataclass (frozen unless it accumulates results, with
slots) that derives from `Value`, so every value class has `.replace()`.

    @dataclass(frozen=True, slots=True)
    class Point(Value):
        x: int
        y: int = 0

    Point(1).replace(y=2)  # Point(x=1, y=2), made by __init__, so __post_init__ checks run again

Fields are declared once, as annotations, and type checkers see them. The standard-library core that runs in
images (envpin.portable, envpin.probe) keeps `typing.NamedTuple` records: Python 3.6 has no dataclasses.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

_V = TypeVar("_V", bound="Value")


class Value:
    """Base of every value class: `replace` as dataclasses.replace, as a method (no import at the call site)."""

    __slots__ = ()

    def replace(self: _V, **changes: Any) -> _V:
        """A copy with `changes` applied; unknown names are a TypeError, as for the constructor."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]
