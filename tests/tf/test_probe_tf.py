"""The probe where TensorFlow is importable, in an isolated interpreter: --with-tf reads its runtime settings
and keeps the fingerprint, and the default probe runs the self-test."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from envpin.probe import fields
from tests.cli.test_probe_run import probe_json, run_probe


@pytest.mark.slow
def test_with_tf_reads_runtime_and_keeps_fingerprint(tmp_path: Path) -> None:
    try:
        import importlib.util

        found = importlib.util.find_spec("tensorflow") is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        pytest.skip("TensorFlow is not installed in this interpreter")
    plain = probe_json(tmp_path)
    with_tf = probe_json(tmp_path, "--with-tf", env={"TF_CPP_MIN_LOG_LEVEL": "3"}, timeout=600)
    runtime = with_tf["tensorflow"]["runtime"]["value"]
    assert runtime["version"] == plain["tensorflow"]["version"]["value"].split("+")[0]
    assert runtime["git_version"].startswith("v")
    assert runtime["intra_op_threads"] == 0 and runtime["inter_op_threads"] == 0
    assert runtime["tf32"] == "on"  # TensorFlow's default (2.4 and later); no GPU here to use it
    assert plain["fingerprint"] == fields.fingerprint(plain)
    # TF runtime fields are compared by diff but never hashed: the same environment keeps its fingerprint.
    # (TF_CPP_MIN_LOG_LEVEL is a logging variable, outside the fingerprint too.)
    assert with_tf["fingerprint"] == plain["fingerprint"]


@pytest.mark.slow
def test_default_probe_runs_the_self_test_where_tensorflow_is_importable(tmp_path: Path) -> None:
    """What images run by default: the quick battery and the golden hash, judged into the exit status."""
    from envpin.probe.selftest import problems

    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("TensorFlow is not installed in this interpreter")
    res = run_probe("--json", str(tmp_path / "r.json"), "--quick", selftest="", timeout=600)
    assert "running the determinism self-test (quick) (--no-selftest skips it)" in res.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    result = report["selftest"]
    assert result["mode"] == "quick" and result["checks"] and result["golden"]["hash"].startswith("sha256:")
    found = problems(result)
    assert res.returncode == (1 if found else 0), res.stderr
    assert ("self-test FAILED" if found else "self-test passed") in res.stderr
    assert report["probe"]["options"]["value"]["selftest"] == "auto"
