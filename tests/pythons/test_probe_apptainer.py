"""The probe recognises Apptainer and SingularityCE containers from the signals their documentation names.

Real filesystem trees under a probe root and real environments, read by the real collector (and by the probe
as a separate Python 3.6+ process); nothing of the collector is replaced.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jsonschema
import pytest

from envpin.probe import load_schema
from tests.cli.test_probe_run import _STUB, _old_pythons
from tests.conftest import REPO
from tests.unit.test_probe_apptainer import APPTAINER_ENV, SIF, _root


@pytest.mark.parametrize("python", _old_pythons() or [None])
def test_probe_process_under_old_interpreters_reports_apptainer(tmp_path: Path, python: str | None) -> None:
    """The probe as a separate process (-I -S: standard library only) on the Pythons NGC images ship."""
    if python is None:
        pytest.skip("no python3.6-3.9 interpreter on this machine (PATH or pyenv)")
    root = _root(tmp_path, {".singularity.d/": ""})
    out = tmp_path / "r.json"
    res = subprocess.run(
        [python, "-I", "-S", "-c", _STUB.format(repo=str(REPO)), "--root", str(root), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={"PATH": "/usr/bin:/bin", **APPTAINER_ENV},
    )
    assert res.returncode == 0, res.stderr
    report = json.loads(out.read_text())
    jsonschema.validate(report, load_schema())
    container = report["container"]
    assert container["runtime"]["value"] == "apptainer" and container["image"]["value"] == SIF
    assert "environ:APPTAINER_CONTAINER" in container["evidence"]["value"]
