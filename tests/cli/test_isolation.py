"""Tests never see the user's cache, state or config, checked where it needs processes of its own: a child
pytest whose HOME holds a garbage image-facts cache and docker config, and envpin outside the tests reading
them. The in-process check of the test root is tests/unit/test_isolation.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, USER_FOLDERS


def test_a_garbage_cache_in_the_real_home_changes_nothing(tmp_path: Path) -> None:
    """The tests that once failed when ~/.cache/envpin/image-facts.json held junk (one of them loads the
    catalog while its module is collected) run in a child pytest whose HOME has such a cache, with none of
    the XDG variables set, as on a user's machine."""
    home = tmp_path / "home"
    cache = home / ".cache" / "envpin"
    cache.mkdir(parents=True)
    (cache / "image-facts.json").write_text('{"schema": 1, "image_repository": "x", "tags": {"bad": 1}}\n')
    (home / ".docker").mkdir()
    (home / ".docker" / "config.json").write_text("{not json\n")
    env = {k: v for k, v in os.environ.items() if k not in USER_FOLDERS and k not in ("CI",)}
    env["HOME"] = str(home)
    tests = ["tests/unit/test_catalog.py", "tests/unit/test_ngc_select.py", "tests/unit/test_audit_rules.py"]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-x", *tests],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout.splitlines()[-1]
    # And envpin itself, outside the tests, really would have read it (and warned, without failing):
    probe = subprocess.run(
        [sys.executable, "-m", "envpin", "catalog", "show", "20.02"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert probe.returncode == 0 and f"ignoring the image-facts cache {cache / 'image-facts.json'}" in probe.stderr
