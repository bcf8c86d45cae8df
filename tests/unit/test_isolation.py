"""Tests never see the user's cache, state or config: every user folder points into the test root. That a
garbage cache in a user's real home changes no test result: tests/cli/test_isolation.py."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import ISOLATED, USER_FOLDERS, USER_SWITCHES


def test_user_folders_point_into_the_test_root() -> None:
    """Set before collection: the autouse fixture narrows them further per test, never back to the user."""
    from envpin.knowledge import facts

    assert all(
        name not in os.environ or not os.environ[name].startswith(str(Path.home() / ".cache")) for name in USER_FOLDERS
    )
    assert (
        not str(facts.cache_path()).startswith(str(Path.home()) + os.sep)
        or str(ISOLATED) in str(facts.cache_path())
        or "pytest-of-" in str(facts.cache_path())
    )
    assert not any(name in os.environ for name in USER_SWITCHES)
