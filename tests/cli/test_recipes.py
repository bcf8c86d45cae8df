"""The runtime helper (envpin.enable_determinism, `python -m envpin.probe.runtime --check`) in an isolated
interpreter with the standard library alone (-I -S: no site-packages, so no TensorFlow), as in an image
without it. With real TensorFlow: tests/tf/test_recipes.py; the recipe table itself: tests/unit/test_recipes.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import REPO


def _run_runtime(code: str, env: dict[str, str], site: bool = False) -> subprocess.CompletedProcess[str]:
    # -I -S: the standard library alone (no site-packages, so no TensorFlow) unless site=True.
    return subprocess.run(
        [
            sys.executable,
            "-I",
            *([] if site else ["-S"]),
            "-c",
            f"import sys; sys.path.insert(0, {str(REPO)!r}); {code}",
        ],
        env={"PATH": os.environ.get("PATH", ""), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_runtime_without_tensorflow_seeds_python_and_says_so() -> None:
    code = "import envpin, random, json; r = envpin.enable_determinism(seed=7); print(json.dumps([r, random.random()]))"
    proc = _run_runtime(code, {"PYTHONHASHSEED": "0"})
    assert proc.returncode == 0, proc.stderr
    report, value = json.loads(proc.stdout)
    import random

    random.seed(7)
    assert value == random.random()
    assert report["recipe"] is None and "TensorFlow is not installed" in report["warnings"][0]


def test_runtime_check_passes_without_tensorflow() -> None:
    proc = _run_runtime("import envpin.probe.runtime as r; raise SystemExit(r.main(['--check']))", {})
    assert proc.returncode == 0 and "TensorFlow not found" in proc.stdout


def test_runtime_finds_tf_version_from_metadata(tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "tensorflow-2.5.3.dist-info").mkdir()
    code = (
        f"sys.path.insert(0, {str(tmp_path)!r}); import envpin.probe.runtime as r, json;"
        " print(json.dumps([r.installed_tf_version(), r.current_recipe()['id']]))"
    )
    proc = _run_runtime(code, {"NVIDIA_TENSORFLOW_VERSION": "21.06-tf2"})
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == ["2.5.3", "ngc-tf2.5-2.7"]
    proc = _run_runtime(code.replace("json.dumps([", "json.dumps(["), {})
    assert json.loads(proc.stdout)[1] == "stock-2.5-2.7"
