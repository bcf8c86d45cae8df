"""The README's generated tables match the data (refresh with --update-golden)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import REPO


def test_api_page_example_runs(tmp_path: Path) -> None:
    """docs/api.md's example is real: it runs from an empty folder and prints what the page says."""
    import subprocess
    import sys

    text = (REPO / "docs" / "api.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    shown = text.split("```text\n", 1)[1].split("```", 1)[0]
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    for want, got in zip(shown.splitlines(), proc.stdout.splitlines(), strict=True):
        assert got.startswith(want.split("…")[0]), (want, got)
