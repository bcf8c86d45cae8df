"""envpin.pyz: reproducible bytes, and the probe and runtime helper run from it with nothing else."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from io import BytesIO
from pathlib import Path

from envpin.environment import payload
from tests.conftest import REPO


def _run_from(archive: Path, *args: str, pythonpath: bool = True) -> subprocess.CompletedProcess[str]:
    """Run with the archive alone: no site-packages, no checkout on the path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if pythonpath:
        env["PYTHONPATH"] = str(archive)
    return subprocess.run(
        [sys.executable, "-S", *args], env=env, capture_output=True, text=True, cwd=archive.parent, timeout=120
    )


def test_bytes_depend_only_on_names_and_contents(tmp_path: Path) -> None:
    """Another checkout (other mtimes, another umask) of the same sources gives the same archive."""
    old = os.umask(0o077)
    try:
        copy = tmp_path / "envpin"
        shutil.copytree(REPO / "envpin", copy, ignore=shutil.ignore_patterns("__pycache__"))
    finally:
        os.umask(old)
    for path in copy.rglob("*"):
        os.utime(path, (1_000_000_000, 1_000_000_000))
    code = "import sys; from envpin.environment import payload; sys.stdout.buffer.write(payload.payload())"
    other = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        check=True,
        cwd=tmp_path,
    ).stdout
    assert other == payload.payload()
    with zipfile.ZipFile(BytesIO(other)) as zf:
        infos = zf.infolist()
    assert [i.filename for i in infos] == sorted(i.filename for i in infos)
    assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
    assert {i.external_attr >> 16 for i in infos} == {0o100644}


def test_probe_and_runtime_run_from_the_archive(tmp_path: Path) -> None:
    archive = tmp_path / payload.PAYLOAD_NAME
    archive.write_bytes(payload.payload())
    probe = _run_from(archive, "-m", "envpin.probe", "--json", "-")
    assert probe.returncode == 0, probe.stderr
    report = json.loads(probe.stdout)
    assert report["fingerprint"].startswith("sha256:")
    direct = _run_from(archive, str(archive), "--json", "-", pythonpath=False)
    assert direct.returncode == 0, direct.stderr
    assert json.loads(direct.stdout)["probe_schema"] == report["probe_schema"]
    # Data files are read through the import system, so they are found inside the zip too.
    data = _run_from(
        archive,
        "-c",
        "from envpin.probe import runtime, report; "
        "print(len(runtime.load_table()['recipes']), sorted(report.load_schema())[:1])",
    )
    assert data.returncode == 0, data.stderr
    assert int(data.stdout.split()[0]) > 5
    helper = _run_from(archive, "-c", "import envpin, json; print(json.dumps(envpin.enable_determinism(seed=1)))")
    assert helper.returncode == 0, helper.stderr
    assert "seed_python" in json.loads(helper.stdout.strip().splitlines()[-1])["applied"]
