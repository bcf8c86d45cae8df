"""`envpin probe --image`: the probe inside any image through the engine, GPUs only when the host has them."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_envpin, said
from tests.engines import push_with_env


def test_probe_an_image_without_gpus(stand_in_image: str, tmp_path: Path) -> None:
    res = run_envpin("probe", "--image", stand_in_image, "--out", str(tmp_path / "reports"), cwd=tmp_path)
    assert res.code == 0, res.stderr
    written = sorted((tmp_path / "reports").iterdir())
    assert [p.suffix for p in written] == [".json", ".md"]
    assert [line.split()[-1] for line in res.stdout.splitlines()] == [str(p) for p in written]
    report = json.loads(written[0].read_text())
    assert report["fingerprint"].startswith("sha256:") and report["python"]["version"]["value"].startswith("3.11")
    # This host has no NVIDIA runtime: said, and the container still ran (unlike compose.yaml's GPU request).
    assert "without GPUs: this host has no NVIDIA container runtime" in res.stderr
    # Named after this machine (the container shares its hostname), not after the container's ID.
    assert all(p.name.startswith(socket.gethostname() + "-") for p in written), written
    assert report["host"]["hostname"]["value"] == socket.gethostname()


def test_a_failing_probe_fails_the_command(docker_client: Any, stand_in_image: str, tmp_path: Path) -> None:
    broken = push_with_env(
        docker_client, stand_in_image, "envpin-probe-image-test/broken", "1", {"PATH": "/nonexistent"}, "probe-image"
    )  # no python3 to be found
    res = run_envpin("probe", "--image", broken, "--out", str(tmp_path / "reports"))
    assert res.code == 1 and "the probe failed inside" in res.stderr and "(exit 127)" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and list((tmp_path / "reports").iterdir()) == []


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--gpus", "all"], "--gpus all, but this host has no NVIDIA container runtime"),
        (["--gpus", "some"], "'some' is not one of 'auto', 'all', 'none'"),
        (["-o", "x.json"], "--image writes both reports into --out"),
    ],
)
def test_refusals(stand_in_image: str, tmp_path: Path, args: list[str], fragment: str) -> None:
    res = run_envpin("probe", "--image", stand_in_image, *args, "--out", str(tmp_path / "r"))
    lines = res.stderr.strip().splitlines()
    assert res.code == 2 and lines[0].startswith("error:") and fragment in lines[0], res.stderr
    assert lines[-1].startswith("hint:") and not (tmp_path / "r").exists()


# --- `verify` probes the lock's image, through the engine, as `probe --image` does ----------------------------------


def test_verify_probes_the_lock_s_image_and_says_so(stand_in_image: str, tmp_path: Path) -> None:
    """Regression: plain `verify --lock` probed the host (73 rows of host differences) and `--record` took any
    report. Now: no --report means the image built here from the lock, named in the first line."""
    from envpin.environment import lockfile
    from envpin.image import buildstate

    built = run_envpin("build", "--ngc", "20.02-tf2-py3", "--base-image", stand_in_image, cwd=tmp_path)
    assert built.code == 0, built.stderr
    lock = Path("images/20.02-tf2/envpin.lock")  # found by the one rule: no --lock needed
    record = buildstate.load(lockfile.read(tmp_path / lock).inputs_hash)
    assert record is not None
    first = f"verify: image {record.image_id[:19]}… ({record.tag}) (from {lock}) against the lock's reference"

    none_yet = run_envpin("verify", cwd=tmp_path)
    assert none_yet.code == 2 and f"lock {lock} has no 'expected' table" in none_yet.stderr
    recorded = run_envpin("verify", "--record", cwd=tmp_path)
    assert recorded.code == 0, recorded.stderr
    err = said(recorded.stderr)
    assert err[0] == first and "recorded: expected fingerprint sha256:" in recorded.stderr
    assert lockfile.read(tmp_path / lock).expected is not None

    again = run_envpin("verify", "--json", cwd=tmp_path)
    assert again.code == 0, again.stderr
    assert said(again.stderr)[0] == first
    doc = json.loads(again.stdout)
    assert doc["verdict"] in ("identical", "identical except informational differences"), doc
    assert doc["report"] == f"image {record.image_id}" and doc["compared"] == first

    # The same image probed by hand is a report that does not contradict the lock; the host is one that does.
    probed = run_envpin("probe", "--image", record.tag, "--out", str(tmp_path / "reports"))
    assert probed.code == 0, probed.stderr
    (report,) = (tmp_path / "reports").glob("*.json")
    ok = run_envpin("verify", "--report", str(report), "--record", cwd=tmp_path)
    assert ok.code == 0 and ok.stderr.splitlines()[0] == f"verify: report {report} against the reference of {lock}"
    host = tmp_path / "host.json"
    assert run_envpin("probe", "-o", str(host)).code == 0
    refused = run_envpin("verify", "--report", str(host), "--record", cwd=tmp_path)
    assert refused.code == 2 and "image.envpin_plan is absent" in refused.stderr, refused.stderr
    on_purpose = run_envpin("verify", "--host", cwd=tmp_path)
    assert on_purpose.code in (0, 1) and said(on_purpose.stderr)[0].startswith("verify: this machine (--host")


def test_verify_without_the_image_says_how_to_build_it(docker_client: Any, stand_in_image: str, tmp_path: Path) -> None:
    built = run_envpin(
        "build",
        "--ngc",
        "20.02-tf2-py3",
        "--base-image",
        stand_in_image,
        "--out",
        str(tmp_path / "env"),
        "--name",
        "verify-removed",
    )
    assert built.code == 0, built.stderr
    lock = tmp_path / "env" / "envpin.lock"
    assert run_envpin("verify", "--lock", str(lock), "--record").code == 0
    docker_client.images.remove(built.stdout.strip(), force=True)
    gone = run_envpin("verify", "--lock", str(lock))
    lines = gone.stderr.strip().splitlines()
    assert gone.code == 2 and len(lines) == 2, gone.stderr
    assert lines[0].startswith(f"error: the image built here from {lock} (sha256:")
    assert lines[0].endswith("is no longer in Docker")
    assert lines[1].startswith(f"hint: build it with `envpin build --lock {lock}`")
