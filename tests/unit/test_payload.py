"""envpin.pyz holds the standard-library part only (its bytes and what runs from it: tests/cli/test_payload.py)."""

from __future__ import annotations

from envpin.environment import payload


def test_members_are_the_stdlib_part_only() -> None:
    names = set(payload.members())
    assert {"__main__.py", "envpin/__init__.py", "envpin/data/recipes.json", "envpin/probe/__main__.py"} <= names
    assert "envpin/portable/versions.py" in names
    assert {"envpin/keras.py", "envpin/probe/track.py", "envpin/probe/trackers.py"} <= names
    assert all(
        n == "__main__.py"
        or n.startswith(("envpin/probe/", "envpin/portable/", "envpin/__init__.py", "envpin/keras.py", "envpin/data/"))
        for n in names
    )
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
