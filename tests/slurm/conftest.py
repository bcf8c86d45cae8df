"""Cluster tier: a real Slurm cluster (scripts/slurm.sh up: slurm-wlm 22.05 and munge in containers, this
host as the login node). Every test under tests/slurm is marked ``slurm``; without the cluster the tests
skip with the reason, and under CI=true that skip fails (tests/conftest.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO

HERE = Path(__file__).resolve().parent
RUN_DIR = Path(os.environ.get("ENVPIN_TEST_RUN_DIR", "/run/envpin-test"))
CONF = Path(os.environ.get("ENVPIN_SLURM_CONF", str(RUN_DIR / "slurm" / "conf" / "slurm.conf")))
SLURM_SH = REPO / "scripts" / "slurm.sh"
#: The nodes' interpreter with TensorFlow (scripts/slurm.sh installs tensorflow-cpu into IN_TF_VENV).
NODE_TF_PYTHON = "/opt/envpin-tf/bin/python"


@dataclass(frozen=True)
class Cluster:
    """The test cluster as its login node sees it: SLURM_CONF, the node names, a way into each node."""

    conf: Path
    nodes: tuple[str, ...]

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def run(self, *cmd: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """A Slurm client command against the cluster, from /tmp (a folder every node has)."""
        return subprocess.run(
            list(cmd), env={**os.environ, **self.env}, capture_output=True, text=True, timeout=timeout, cwd="/tmp"
        )

    def states(self) -> dict[str, str]:
        proc = self.run("sinfo", "-h", "-N", "-o", "%N %T", timeout=15)
        return dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)

    def wait_idle(self, timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        while True:
            states = self.states()
            if states and set(states.values()) == {"idle"}:
                return
            if time.monotonic() > deadline:
                pytest.fail(f"the cluster's nodes are not all idle after {timeout:.0f} s: {states}")
            time.sleep(1)

    def node_exec(self, node: str, *cmd: str) -> None:
        """Run a command inside a node's container (the nodes are containers named after their hosts)."""
        subprocess.run([docker(), "exec", node, *cmd], check=True, capture_output=True, timeout=60)

    def node_has(self, node: str, path: str) -> bool:
        """Whether `path` exists inside a node's container."""
        proc = subprocess.run([docker(), "exec", node, "test", "-e", path], capture_output=True, timeout=60)
        return proc.returncode == 0

    def node_env(self, node: str, *pairs: str) -> None:
        """Set (none given: clear) environment variables for every task on `node`, as a site's TaskProlog
        would (scripts/slurm.sh node-env)."""
        subprocess.run(["bash", str(SLURM_SH), "node-env", node, *pairs], check=True, capture_output=True, timeout=60)


def docker() -> str:
    return shutil.which("docker", path="/usr/bin") or shutil.which("docker") or "docker"


def _unavailable() -> str | None:
    for tool in ("sinfo", "srun", "salloc", "sbatch"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH (bash scripts/slurm.sh up installs slurm-client)"
    if not CONF.is_file():
        return f"no cluster configuration at {CONF} (bash scripts/slurm.sh up)"
    if shutil.which("docker") is None:
        return "docker is not on PATH (the cluster's nodes are containers)"
    return None


@pytest.fixture(scope="session")
def slurm_cluster() -> Cluster:
    why = _unavailable()
    if why:
        pytest.skip(why)
    probe = Cluster(CONF, ())
    try:
        states = probe.states()
    except subprocess.TimeoutExpired:
        states = {}
    if not states:
        pytest.skip(f"slurmctld does not answer sinfo with SLURM_CONF={CONF} (bash scripts/slurm.sh up)")
    probe.wait_idle()
    return Cluster(CONF, tuple(sorted(states)))


@pytest.fixture
def cluster(slurm_cluster: Cluster) -> Iterator[Cluster]:
    """The cluster, with every node idle before and after the test (a test that drains a node resumes it)."""
    slurm_cluster.wait_idle()
    yield slurm_cluster
    slurm_cluster.wait_idle()
