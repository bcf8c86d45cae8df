"""Value classes without the dataclasses module, for the modules every `envpin audit` and `envpin catalog` loads.

A dataclass is defined at import time: the decorator writes the source of `__init__`, `__repr__`, `__eq__` and
(frozen) `__setattr__`, and compiles each one, about 0.4 ms a class; importing `dataclasses` also imports
`inspect` and `typing`. On the modules a one-file audit loads that was 20 ms of a 75 ms process (benchmarks/
bench_cli.py). A Record subclass writes its `__init__` out (compiled once into the module's bytecode, as fast to
call as the dataclass's) and lists its fields in `_fields`; equality, hashing, `repr` and `replace` come from here.

    class Point(Frozen):
        __slots__ = _fields = ("x", "y")

        def __init__(self, x: int, y: int = 0) -> None:
            _set(self, "x", x)
            _set(self, "y", y)

Every name in `_fields` must be a parameter of `__init__` (`replace` builds the copy through it, so its checks
run again); attributes left out of `_fields` take no part in equality or `repr` (dataclasses' compare=False).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from typing import Any, Self

#: What a Frozen subclass's __init__ sets its fields with (its own __setattr__ refuses).
_set = object.__setattr__


class Record:
    """A mutable value: equal to another of its own class with equal fields, and (as a dataclass with eq) not
    hashable."""

    __slots__ = ()
    #: The fields, in order: compared, hashed (Frozen), shown by repr, and what `replace` copies.
    _fields: tuple[str, ...] = ()

    def _values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in self._fields])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._fields)
        return f"{type(self).__name__}({shown})"

    def replace(self, **changes: Any) -> Self:
        """A copy with `changes` applied (dataclasses.replace), made by `__init__` so its checks run on it."""
        unknown = set(changes) - set(self._fields)
        if unknown:
            raise TypeError(f"{type(self).__name__} has no field {sorted(unknown)[0]!r}")
        return type(self)(**{**{name: getattr(self, name) for name in self._fields}, **changes})


class Frozen(Record):
    """A Record that cannot change after `__init__` (which sets its fields with `_set`): safe to share, and
    hashable when its fields are."""

    __slots__ = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only: make a changed copy with .replace()")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __hash__(self) -> int:
        return hash(self._values())

    def __reduce__(self) -> tuple[Any, ...]:
        """copy, deepcopy and pickle rebuild it through `__init__` (the default would set its fields one by one,
        which a Frozen refuses)."""
        return (_rebuild, (type(self), dict(zip(self._fields, self._values(), strict=True))))


def _rebuild(cls: type[Frozen], values: dict[str, Any]) -> Frozen:
    return cls(**values)
