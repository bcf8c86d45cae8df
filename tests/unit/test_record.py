"""envpin.record: one value idiom on the host side, dataclasses with slots that derive from Value."""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pickle

import pytest

from envpin.audit.check import Finding
from envpin.audit.rule import Rule
from envpin.knowledge.catalog import Entry, Fact
from envpin.record import Value
from tests.conftest import REPO
from tests.unit.test_layers import STDLIB_ONLY, module_name


def _host_modules() -> list[str]:
    """Every module of the host side (the standard-library core that runs in images has no dataclasses)."""
    names = [module_name(p) for p in sorted((REPO / "envpin").rglob("*.py"))]
    return [
        n for n in names if not any(n == s or n.startswith(s + ".") for s in STDLIB_ONLY) and n != "envpin.__main__"
    ]


def _value_classes() -> list[type]:
    found = []
    for name in _host_modules():
        module = importlib.import_module(name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == name and dataclasses.is_dataclass(cls):
                found.append(cls)
    return found


def test_every_dataclass_is_a_value_with_slots() -> None:
    classes = _value_classes()
    assert len(classes) > 60
    wrong = [
        f"{c.__module__}.{c.__qualname__}" for c in classes if not issubclass(c, Value) or "__slots__" not in c.__dict__
    ]
    assert wrong == []


def test_no_value_class_is_written_by_hand() -> None:
    """A value class declares its fields once, as a dataclass: no __slots__ tuple beside a hand-written __init__."""
    offenders = []
    for path in sorted((REPO / "envpin").rglob("*.py")):
        if module_name(path).startswith(tuple(STDLIB_ONLY)):
            continue
        text = path.read_text(encoding="utf-8")
        if "_fields = (" in text or "object.__setattr__" in text:
            offenders.append(str(path.relative_to(REPO)))
    assert offenders == []


def test_replace_makes_a_changed_copy_and_runs_the_checks_again() -> None:
    f = Finding("pip-unpinned", "warning", "Dockerfile", 3, "m", "f")
    g = f.replace(line=4)
    assert (g.line, f.line, g.rule) == (4, 3, "pip-unpinned") and g != f
    with pytest.raises(TypeError):
        f.replace(nope=1)
    rule = Rule(id="a-b", severity="info", title="t", finds="f", why="w", bad="b", good="g", autofix="a", references=())
    with pytest.raises(ValueError, match="severity"):
        rule.replace(severity="fatal")


def test_frozen_values_refuse_changes_hash_and_pickle() -> None:
    f = Finding("pip-unpinned", "warning", "Dockerfile", 3, "m", "f")
    with pytest.raises(dataclasses.FrozenInstanceError):
        f.line = 5  # type: ignore[misc]
    assert hash(f) == hash(f.replace()) and pickle.loads(pickle.dumps(f)) == f


def test_entry_repr_leaves_out_the_provenance_tables() -> None:
    entry = Entry(
        "20.02",
        "tf2-py3",
        "20.02-tf2-py3",
        "nvcr.io/nvidia/tensorflow:20.02-tf2-py3",
        {"tensorflow": Fact("2.1.0", "s")},
        {"s": {"url": "https://example.com"}},
    )
    text = repr(entry)
    assert text.startswith("Entry(release='20.02', flavor='tf2-py3'") and "https://example.com" not in text
