"""A self-test whose children run out of time, through the real CLI and the in-image probe: exit 2 with one
error and one hint line, the result printed (or the report written) naming what did not finish."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from envpin.probe import tfchild


def _env() -> dict[str, str]:
    # PYTHONHASHSEED set: the hygiene check then has no finding, so nothing but the timeouts is left
    return dict(tfchild.child_env(None, determinism=None), PYTHONHASHSEED="0")


def test_envpin_selftest_that_runs_out_of_time_is_inconclusive() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "envpin", "selftest", "--quick", "--timeout", "2"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    error, hint = proc.stderr.strip().splitlines()[-2:]
    assert error.startswith("error: self-test timed out (inconclusive): battery (determinism on): ")
    assert hint.startswith("hint: raise --timeout")
    assert "timed out (inconclusive): golden training: envpin.probe.golden ran out of time" in proc.stdout
    assert "FAILED" not in proc.stdout + proc.stderr


def test_the_in_image_probe_writes_its_report_and_exits_2(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    cmd = [sys.executable, "-m", "envpin.probe", "--selftest", "--quick", "--timeout", "2", "--json", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    late = report["selftest"]["timed_out"]
    assert {t["what"] for t in late} >= {"battery (determinism on)", "golden training"}
    assert all(t["limit_cpu_s"] == 2.0 and t["limit_wall_s"] == 8.0 for t in late)
    assert report["probe"]["options"]["value"]["timeout"] == 2.0
    assert proc.stderr.strip().splitlines()[-1].startswith("hint: raise --timeout")
