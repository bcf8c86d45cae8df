"""`envpin study` with one run per Slurm task: the command is prefixed with srun, which exports the run's
ENVPIN_SEED to the node and brings its metrics line back. The test cluster has no shared storage, so the hook
folder is not on the nodes: the seed and the metrics line are all that travel (docs/runs.md says so)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONF = Path(os.environ.get("ENVPIN_SLURM_CONF", "/run/envpin-test/slurm/conf/slurm.conf"))


def _cluster_error() -> str | None:
    if shutil.which("srun") is None:
        return "srun is not installed (scripts/slurm.sh up)"
    if not CONF.is_file():
        return f"no test cluster: {CONF} is missing (bash scripts/slurm.sh up)"
    proc = subprocess.run(
        ["sinfo", "-h", "-o", "%T"],
        env={**os.environ, "SLURM_CONF": str(CONF)},
        capture_output=True,
        text=True,
        timeout=30,
    )
    return None if proc.returncode == 0 and proc.stdout.strip() else f"sinfo: {proc.stderr.strip()[-200:]}"


_ERROR = _cluster_error()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(_ERROR is not None, reason=f"Slurm test cluster unavailable: {_ERROR}"),
]

SCRIPT = (
    "import json, os, random, socket; random.seed(int(os.environ['ENVPIN_SEED'])); "
    "print(json.dumps({'envpin_metrics': {'score': random.random()}}))"
)


def test_study_one_run_per_slurm_task() -> None:
    envpin = str(Path(sys.executable).with_name("envpin"))
    proc = subprocess.run(
        [
            envpin,
            "study",
            "-n",
            "3",
            "-j",
            "3",
            "--format",
            "json",
            "--",
            "srun",
            "-N1",
            "-n1",
            "python3",
            "-c",
            SCRIPT,
        ],
        env={**os.environ, "SLURM_CONF": str(CONF)},
        capture_output=True,
        text=True,
        timeout=600,
        cwd="/tmp",
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert [r["seed"] for r in data["runs"]] == [42, 42, 42, 43, 44, 45]
    [metric] = data["metrics"]
    assert metric["fixed"]["std"] == 0.0 and metric["varied"]["std"] > 0
    import random

    random.seed(43)
    assert data["runs"][3]["metrics"] == {"score": random.random()}  # the seed reached the node


# With --slurm envpin starts srun itself and the hook travels on srun's standard input. TensorFlow is not on
# the test cluster's nodes (nor NumPy), so the script installs the stand-in of tests/pythons/test_runs_pythons.py
# in a folder of the node and imports it: the hook must see that import, seed Python's random and the
# stand-in from ENVPIN_SEED (the script never seeds), apply the recipe from the shipped envpin.pyz, and its
# record must come back through srun.
NODE_SCRIPT = """
import json, os, random, sys, tempfile
site = tempfile.mkdtemp()
os.mkdir(os.path.join(site, "tensorflow"))
with open(os.path.join(site, "tensorflow", "__init__.py"), "w") as fh:
    fh.write(FAKE_TF)
sys.path.insert(0, site)
import tensorflow
import envpin
print(json.dumps({"envpin_metrics": {"score": random.random()}, "calls": tensorflow.calls,
                  "hook": sys.modules["sitecustomize"].__file__, "envpin": envpin.__file__,
                  "hashseed": os.environ.get("PYTHONHASHSEED"), "node": os.environ.get("SLURMD_NODENAME")}))
"""


def _envpin(*args: str) -> subprocess.CompletedProcess[str]:
    envpin = str(Path(sys.executable).with_name("envpin"))
    return subprocess.run(
        [envpin, *args],
        env={**os.environ, "SLURM_CONF": str(CONF)},
        capture_output=True,
        text=True,
        timeout=600,
        cwd="/tmp",
    )


def test_study_with_slurm_ships_the_hook_to_the_nodes(tmp_path: Path) -> None:
    from tests.pythons.test_runs_pythons import FAKE_TF

    script = f"FAKE_TF = {FAKE_TF!r}\n{NODE_SCRIPT}"
    proc = _envpin(
        "study",
        "-n",
        "2",
        "-j",
        "3",
        "--recipe",
        "both",
        "--slurm",
        "--keep",
        str(tmp_path / "k"),
        "--format",
        "json",
        "--",
        "python3",
        "-c",
        script,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["tf_version"] == "2.9.1"  # from the hook's records, sent back by the nodes
    import random

    nodes = set()
    for i, run in enumerate(data["runs"]):
        lines = (tmp_path / "k" / f"run-{i:03d}" / "stdout.log").read_text().splitlines()
        out = json.loads(next(line for line in lines if line.startswith('{"envpin_metrics"')))
        assert out["hook"].startswith("/tmp/envpin-run-") and out["hook"].endswith("/hook/sitecustomize.py")
        assert out["envpin"].startswith(out["hook"].rpartition("/")[0] + "/envpin.pyz/")
        random.seed(run["seed"])
        assert run["metrics"] == {"score": random.random()}  # the hook seeded random on the node
        if run["recipe"]:
            assert ["enable_op_determinism"] in out["calls"] and out["hashseed"] == "0"
            assert ["keras.utils.set_random_seed", run["seed"]] in out["calls"]
        else:
            assert out["calls"] == [["tf.random.set_seed", run["seed"]]] and out["hashseed"] is None
        nodes.add(out["node"])
    assert nodes <= {"envpin-slurm-n1", "envpin-slurm-n2", "envpin-slurm-n3"} and nodes
    assert not list(tmp_path.glob("k/run-*/hook-*.json"))  # the records came through srun, not a shared folder


def test_slurm_options_are_checked() -> None:
    proc = _envpin("study", "--slurm", "--", "srun", "python3", "-c", "pass")
    assert proc.returncode == 2 and proc.stderr.startswith("error: with --slurm envpin starts srun itself")
    proc = _envpin("cost", "--partition", "debug", "--", "python3", "-c", "pass")
    assert proc.returncode == 2 and "need --slurm" in proc.stderr
