"""The self-test's verdict on a real CPU host: green when the environment is healthy, red when determinism
is really off. Through the real CLI and the real battery (TensorFlow in fresh child processes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from envpin.probe import selftest
from envpin.probe.selftest import run
from tests.conftest import run_envpin


def test_a_healthy_cpu_host_passes_in_repeated_runs(tmp_path: Path) -> None:
    """Weighted Bincount differs between runs on CPU even under determinism (the recipe table lists it for
    the CPU): reported, never the FAILED that once greeted every new user. PYTHONHASHSEED set, as the
    recipe sets it in every image (its absence is a real finding of the hygiene checks)."""
    for i in range(3):
        out = tmp_path / f"report-{i}.json"
        res = run_envpin("probe", "--selftest", "--quick", "--output", str(out), env={"PYTHONHASHSEED": "0"})
        assert res.code == 0, res.stderr
        said = res.stdout + res.stderr
        assert "self-test passed" in said and "FAILED" not in said
        result = json.loads(out.read_text())["selftest"]
        assert run.problems(result) == []
        bincount = next(c for c in result["checks"] if c["name"] == "bincount")
        assert bincount["expected"]["verdict"] == "NONDETERMINISTIC" and "surprise" not in bincount


def test_determinism_really_off_fails() -> None:
    """The same battery with determinism switched off in the child: the unseeded random op now returns
    different numbers in every run instead of raising, and the verdict is a failure."""
    names = ["matmul", "random-op-without-seed", "bincount"]
    off = selftest.run_battery(determinism=False, quick=True, names=names)
    assert "error" not in off, off
    verdicts = {c["name"]: c["verdict"] for c in off["checks"]}
    assert verdicts["random-op-without-seed"] == "NONDETERMINISTIC"
    failed, line = run.verdict(off)
    assert failed and line.startswith("self-test FAILED")
    assert any("random-op-without-seed" in p for p in run.problems(off))


def test_hash_seed_unset_is_a_real_finding(tmp_path: Path) -> None:
    """What the healthy run sets is checked for real: without PYTHONHASHSEED the one problem is that."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "envpin", "probe", "--selftest", "--quick", "--output", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    problems = run.problems(json.loads(out.read_text())["selftest"])
    assert proc.returncode == 1 and len(problems) == 1 and problems[0].startswith("PYTHONHASHSEED"), problems


def test_a_failing_selftest_says_what_failed(tmp_path: Path) -> None:
    """Exit 1 is never the only sign: the last lines name each problem (stdout for text; stderr beside --json's
    "problems"). A script that draws from Python's random module unseeded is a hygiene finding."""
    script = tmp_path / "unseeded.py"
    script.write_text("import random\nprint(random.random())\n")
    args = ("selftest", "--quick", "--hygiene-script", str(script))
    text = run_envpin(*args, env={"PYTHONHASHSEED": "0"})
    assert text.code == 1, text.stderr
    tail = text.stdout.splitlines()
    heading = next(i for i, line in enumerate(tail) if line.startswith("self-test FAILED: "))
    listed = [line[4:] for line in tail[heading + 1 :]]
    assert tail[heading] == f"self-test FAILED: {len(listed)} problem{'' if len(listed) == 1 else 's'}"
    assert listed and all(line.startswith("python-random: ") for line in listed), listed
    as_json = run_envpin(*args, "--json", env={"PYTHONHASHSEED": "0"})
    assert as_json.code == 1
    problems = json.loads(as_json.stdout)["problems"]
    assert [p[:14] for p in problems] == ["python-random:"]
    assert f"self-test FAILED: 1 problem\n  - {problems[0]}\n" in as_json.stderr
