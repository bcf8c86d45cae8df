"""The runtime helper with real TensorFlow, in a fresh interpreter (site-packages on): op determinism is on
and a wrong environment is refused. Without TensorFlow: tests/cli/test_recipes.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

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


def test_runtime_with_real_tensorflow_enables_op_determinism() -> None:
    pytest.importorskip("tensorflow", reason="TensorFlow is not installed in this Python")
    code = (
        "import envpin, json; r = envpin.enable_determinism(seed=3);"
        " from tensorflow.python.framework import config as tfc;"
        " print(json.dumps([r, tfc.is_op_determinism_enabled()]))"
    )
    proc = _run_runtime(code, {"PYTHONHASHSEED": "0", "TF_CPP_MIN_LOG_LEVEL": "3"}, site=True)
    assert proc.returncode == 0, proc.stderr
    report, enabled = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["recipe"] == "stock-2.20-2.21" and enabled is True  # tensorflow-cpu 2.21 with Keras 3.7+
    assert {
        "keras_set_random_seed",
        "enable_op_determinism",
        "keras3_no_auto_xla",
        "env TF_DETERMINISTIC_OPS=1",
    } <= set(report["applied"])
    assert report["warnings"] == []


def test_runtime_check_flags_a_wrong_environment() -> None:
    pytest.importorskip("tensorflow", reason="TensorFlow is not installed in this Python")
    code = "import envpin.probe.runtime as r; raise SystemExit(r.main(['--check']))"
    proc = _run_runtime(code, {"TF_CUDNN_USE_AUTOTUNE": "0"}, site=True)
    assert proc.returncode == 1
    assert "TF_CUDNN_USE_AUTOTUNE must not be set" in proc.stdout and "PYTHONHASHSEED should be 0" in proc.stdout
    typo = _run_runtime(
        code,
        {
            "PYTHONHASHSEED": "0",
            "TF_DETERMINISTIC_OPS": "1",
            "HOROVOD_FUSION_THRESHOLD": "0",
            "TF_USE_CUDNN_AUTOTUNE": "0",
        },
        site=True,
    )
    assert typo.returncode == 1 and "TF_USE_CUDNN_AUTOTUNE has no effect" in typo.stdout, typo.stdout
