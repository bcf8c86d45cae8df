"""envpin.record: the value classes the audit and catalog modules use instead of dataclasses."""

from __future__ import annotations

import pytest

from envpin.record import Frozen, Record, _set


class Point(Frozen):
    __slots__ = _fields = ("x", "y")

    def __init__(self, x: int, y: int = 0) -> None:
        if x < 0:
            raise ValueError("x must not be negative")
        _set(self, "x", x)
        _set(self, "y", y)


class Box(Record):
    __slots__ = ("cache", "items", "label")
    _fields = ("items", "label")

    def __init__(self, items: list[int] | None = None, label: str = "") -> None:
        self.items = [] if items is None else items
        self.label = label
        self.cache = None  # not a field: no part in equality or repr


class OtherPoint(Frozen):
    __slots__ = _fields = ("x", "y")

    def __init__(self, x: int, y: int = 0) -> None:
        _set(self, "x", x)
        _set(self, "y", y)


def test_equality_is_by_class_and_fields() -> None:
    assert Point(1, 2) == Point(1, 2)
    assert Point(1, 2) != Point(2, 1)
    assert Point(1, 2) != OtherPoint(1, 2)  # another class with the same fields is another value
    assert Point(1, 2) != (1, 2)


def test_frozen_records_are_hashable_and_read_only() -> None:
    assert len({Point(1, 2), Point(1, 2), Point(3)}) == 2
    p = Point(1)
    with pytest.raises(AttributeError, match="read-only"):
        p.x = 5  # type: ignore[misc]
    with pytest.raises(AttributeError, match="read-only"):
        del p.y
    assert p.x == 1 and p.y == 0


def test_mutable_records_are_not_hashable_and_ignore_non_fields() -> None:
    a, b = Box([1], "a"), Box([1], "a")
    b.cache = "computed"
    assert a == b
    a.items.append(2)
    assert a != b
    with pytest.raises(TypeError):
        hash(a)


def test_repr_shows_the_fields_in_order() -> None:
    assert repr(Point(1, 2)) == "Point(x=1, y=2)"
    assert repr(Box([1], "a")) == "Box(items=[1], label='a')"


def test_frozen_records_copy_and_pickle_through_init() -> None:
    import copy
    import pickle

    p = Point(1, 2)
    assert copy.copy(p) == p and copy.deepcopy(p) == p and pickle.loads(pickle.dumps(p)) == p
    b = Box([1], "a")
    c = copy.deepcopy(b)
    assert c == b and c.items is not b.items


def test_replace_goes_through_init() -> None:
    p = Point(1, 2)
    assert p.replace(y=5) == Point(1, 5) and p == Point(1, 2)
    with pytest.raises(ValueError, match="negative"):
        p.replace(x=-1)
    with pytest.raises(TypeError, match="no field 'z'"):
        p.replace(z=1)
