"""The CLI's shape: thin commands (one api call, one view), lazy imports, results on stdout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.test_cli_shape import HEAVY


def test_importing_the_cli_loads_nothing_heavy() -> None:
    code = (
        "import json, sys; import envpin.cli; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({HEAVY!r}))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == []


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("catalog", "--tf", "2.1"), "20.02-tf2-py3"),
        (("recipe", "--ngc", "21.06-tf2-py3"), "TF_DETERMINISTIC_OPS"),
        (("catalog", "show", "20.02-tf2-py3"), "tf_version"),
    ],
)
def test_results_go_to_stdout_so_pipes_work(tmp_path: Path, args: tuple[str, ...], needle: str) -> None:
    """`envpin catalog > file`: the table lands in the file, nothing on the terminal."""
    target = tmp_path / "out.txt"
    with open(target, "w") as fh:
        proc = subprocess.run(
            [sys.executable, "-m", "envpin", *args],
            stdout=fh,
            stderr=subprocess.PIPE,
            text=True,
            cwd=tmp_path,
            timeout=60,
        )
    assert proc.returncode == 0 and proc.stderr == ""
    assert needle in target.read_text()
