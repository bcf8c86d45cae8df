"""`envpin build` end to end: real engine, real registry, stand-in NGC base image."""

from __future__ import annotations

import io
import json
import re
import urllib.request
from pathlib import Path

import pytest

from envpin.environment import lockfile
from envpin.image import buildstate
from tests.conftest import run_envpin


def _digest(registry: str, repo: str, tag: str) -> str:
    req = urllib.request.Request(
        f"http://{registry}/v2/{repo}/manifests/{tag}",
        method="HEAD",
        headers={
            "Accept": "application/vnd.docker.distribution.manifest.v2+json, application/vnd.oci.image.manifest.v1+json"
        },
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return resp.headers["Docker-Content-Digest"]


def _push_variant(docker_client, base: str, target: str, label: str) -> None:  # type: ignore[no-untyped-def]
    """Push an image derived from the stand-in to `target` (a tag the test owns) and return."""
    dockerfile = f"FROM {base}\nLABEL io.envpin.test.variant={label}\n".encode()
    docker_client.images.build(fileobj=io.BytesIO(dockerfile), tag=target, rm=True)
    for line in docker_client.images.push(target, stream=True, decode=True):
        assert "error" not in line, line


@pytest.fixture
def moving_tag(docker_client, local_registry: str, stand_in_image: str):  # type: ignore[no-untyped-def]
    """A tag in a test-only repository, so moving it never disturbs the shared stand-in images."""
    ref = f"{local_registry}/envpin-test/tensorflow:20.02-tf2-py3"
    _push_variant(docker_client, stand_in_image, ref, "first")
    return ref


def test_build_from_mirror_pins_digest_and_is_a_noop_the_second_time(
    docker_client, local_registry: str, stand_in_image: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "env"
    args = ["build", "--ngc", "20.02-tf2-py3", "--base-image", stand_in_image, "--out", str(out)]
    first = run_envpin(*args)
    assert first.code == 0, first.stderr
    lock = lockfile.read(out / "envpin.lock")
    digest = _digest(local_registry, "nvidia/tensorflow", "20.02-tf2-py3")
    assert (lock.base.image, lock.base.digest) == ("nvcr.io/nvidia/tensorflow:20.02-tf2-py3", digest)
    # What the base's config declares is recorded (the stand-in declares NGC 20.02's variables).
    assert lock.base.declared["TENSORFLOW_VERSION"] == "2.1.0" and "NVIDIA_REQUIRE_CUDA" in lock.base.declared
    assert lock.inputs.build_from == stand_in_image
    dockerfile = (out / "Dockerfile").read_text()
    assert f"FROM {stand_in_image}@{digest}\n" in dockerfile
    # The machine-local result is kept outside the committed folder, keyed by the inputs hash.
    record = buildstate.load(lock.inputs_hash)
    assert record is not None and record.tag == first.stdout.strip()
    image = docker_client.images.get(record.image_id)
    assert first.stdout.strip() in image.tags
    labels = image.labels
    assert labels["io.envpin.release"] == "20.02" and labels["io.envpin.recipe"] == "ngc-tf2.0-2.4"
    assert labels["org.opencontainers.image.base.name"] == "nvcr.io/nvidia/tensorflow:20.02-tf2-py3"
    env = dict(e.split("=", 1) for e in image.attrs["Config"]["Env"])
    assert env["TF_DETERMINISTIC_OPS"] == "1" and env["PYTHONHASHSEED"] == "0"
    assert buildstate.log_path(lock.inputs_hash).read_text().count("Step ") >= 5
    assert sorted(p.name for p in out.iterdir()) == [
        ".dockerignore",
        "Dockerfile",
        "envpin.lock",
        "envpin.pyz",
        "plan.json",
        "sbom.cdx.json",  # the CycloneDX SBOM of the image just built (docs/evidence.md)
    ]
    # The probe and helper are importable inside the image with the image's own Python.
    out_text = docker_client.containers.run(
        image.id,
        ["python3", "-c", "import envpin, json; print(json.dumps(envpin.enable_determinism(seed=1)))"],
        remove=True,
    ).decode()
    assert json.loads(out_text.strip().splitlines()[-1])["applied"] == ["seed_python"]

    before = (out / "envpin.lock").read_bytes()
    second = run_envpin(*args)
    assert second.code == 0, second.stderr
    assert "up to date" in second.stderr
    assert (out / "envpin.lock").read_bytes() == before


def test_moved_tag_is_refused_until_update(docker_client, moving_tag: str, stand_in_image: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "env"
    args = ["build", "--ngc", "20.02-tf2-py3", "--base-image", moving_tag, "--out", str(out)]
    assert run_envpin(*args).code == 0
    pinned = lockfile.read(out / "envpin.lock").base.digest
    _push_variant(docker_client, stand_in_image, moving_tag, "second")
    moved = run_envpin(*args)
    assert moved.code == 2 and "the tag was re-pushed" in moved.stderr and "--update" in moved.stderr
    assert lockfile.read(out / "envpin.lock").base.digest == pinned
    updated = run_envpin(*args, "--update")
    assert updated.code == 0, updated.stderr
    assert lockfile.read(out / "envpin.lock").base.digest != pinned


def test_tampered_requirement_hash_fails_naming_the_package(stand_in_image: str, tmp_path: Path) -> None:
    req = tmp_path / "requirements.lock"
    # six 1.16.0 exists on PyPI; this hash is deliberately not one of its files' hashes.
    req.write_text("six==1.16.0 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    out = tmp_path / "env"
    res = run_envpin(
        "build", "--ngc", "20.02-tf2-py3", "--base-image", stand_in_image, "--requirements", str(req), "--out", str(out)
    )
    assert res.code == 2
    assert "the build failed at step" in res.stderr and "six" in res.stderr and "HASH" in res.stderr.upper()
    assert f"full log: {buildstate.log_path(lockfile.read(out / 'envpin.lock').inputs_hash)}" in res.stderr


def test_engine_unreachable(stand_in_image: str, tmp_path: Path) -> None:
    res = run_envpin(
        "build",
        "--ngc",
        "20.02-tf2-py3",
        "--base-image",
        stand_in_image,
        "--out",
        str(tmp_path / "e"),
        "--engine",
        "docker",
        env={"DOCKER_HOST": f"unix://{tmp_path}/no.sock"},
    )
    assert res.code == 2 and "Docker engine is not reachable" in res.stderr and "DOCKER_HOST" in res.stderr
    assert not (tmp_path / "e").exists()


@pytest.mark.podman
def test_auto_engine_falls_back_to_podman_when_docker_does_not_answer(stand_in_image: str, tmp_path: Path) -> None:
    import shutil

    if shutil.which("podman") is None:
        pytest.skip("podman is not installed; run `sudo bash scripts/services.sh install`")
    res = run_envpin(
        "build",
        "--ngc",
        "20.02-tf2-py3",
        "--base-image",
        stand_in_image,
        "--out",
        str(tmp_path / "e"),
        env={"DOCKER_HOST": f"unix://{tmp_path}/no.sock"},
    )
    assert res.code == 0, res.stderr
    assert "built with podman" in res.stderr and "recorded image sha256:" in res.stderr
    # The engine never changes silently: the note names the engine taken and why Docker was not.
    assert "engine auto chose podman, because docker: the Docker engine is not reachable" in res.stderr


@pytest.mark.parametrize(
    "ref, fragment",
    [
        ("127.0.0.1:5999/nvidia/tensorflow:20.02-tf2-py3", "is unreachable"),
        ("127.0.0.1:5000/nvidia/tensorflow:99.99-tf2-py3", "has no tag or manifest"),
    ],
)
def test_registry_errors(local_registry: str, ref: str, fragment: str, tmp_path: Path) -> None:
    res = run_envpin("build", "--ngc", "20.02-tf2-py3", "--base-image", ref, "--out", str(tmp_path / "e"))
    assert res.code == 2 and fragment in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "e").exists()


def test_ctrl_c_during_build_leaves_a_consistent_lock(stand_in_image: str, tmp_path: Path) -> None:
    import signal
    import subprocess
    import sys

    req = tmp_path / "requirements.lock"
    # A real download keeps the build busy long enough to interrupt it mid-step.
    req.write_text(
        "six==1.16.0 \\\n    --hash=sha256:8abb2f1d86890a2dfb989f9a77cfcfd3e47c2a354b01111771326f8aa26e0254\n"
    )
    out = tmp_path / "env"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "envpin",
            "-v",  # stderr is a pipe: -v prints every progress step as a line (not throttled)
            "build",
            "--ngc",
            "20.02-tf2-py3",
            "--base-image",
            stand_in_image,
            "--requirements",
            str(req),
            "--out",
            str(out),
            "--no-cache",
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    install_step = None
    with proc.stderr:
        for line in proc.stderr:
            # Progress lines (-v) read "building TAG: K/M steps; INSTRUCTION...; ..." (K steps done, step K+1
            # running); the pip install is the RUN step right after COPY requirements.lock.
            m = re.search(r": (\d+)/\d+ steps; (\w+)", line)
            if m and "COPY requirements.lock" in line:
                install_step = int(m.group(1)) + 1
            elif m and install_step is not None and int(m.group(1)) == install_step:
                assert m.group(2) == "RUN", line
                proc.send_signal(signal.SIGINT)
                break
        rest = proc.stderr.read()
    assert install_step is not None, rest
    assert proc.wait(timeout=120) == 130, rest
    lock = lockfile.read(out / "envpin.lock")  # parses, self-hash intact
    assert buildstate.load(lock.inputs_hash) is None  # nothing recorded for an interrupted build
    assert not list(out.glob(".*.tmp"))


# --- a build never switches engine for a built lock, and never rewrites a lock without --update ------------------


def _podman_or_skip() -> None:
    import shutil

    if shutil.which("podman") is None:
        pytest.skip("podman is not installed; run `sudo bash scripts/services.sh install`")


def _resign(path: Path, edit) -> None:  # type: ignore[no-untyped-def]
    """Edit a lock and recompute its self-hash, as anyone can."""
    import tomli_w

    from envpin._compat import tomllib

    data = tomllib.loads(path.read_text())
    edit(data)
    data["lock"]["self_hash"] = lockfile.self_hash(data)
    path.write_text(lockfile.HEADER + tomli_w.dumps(data))


@pytest.mark.podman
def test_a_podman_lock_keeps_podman_while_docker_is_up(stand_in_image: str, tmp_path: Path) -> None:
    _podman_or_skip()
    out = tmp_path / "env"
    args = ["build", "--ngc", "20.02-tf2-py3", "--base-image", stand_in_image, "--out", str(out)]
    first = run_envpin(*args, "--engine", "podman")
    assert first.code == 0, first.stderr
    path = out / "envpin.lock"
    before = path.read_bytes()
    image = lockfile.read(path).image
    assert image is not None
    # auto, Docker up: the lock was built with podman, so podman builds it, and says why.
    again = run_envpin(*args)
    assert again.code == 0, again.stderr
    assert f"engine auto chose podman, because {path} records an image built with {image.engine}" in again.stderr
    assert f"reproduced {image.id}" in again.stderr and path.read_bytes() == before
    flagless = run_envpin("build", "--lock", str(path))
    assert flagless.code == 0 and "engine auto chose podman" in flagless.stderr, flagless.stderr


@pytest.mark.podman
def test_a_docker_lock_is_not_switched_to_podman_and_not_rewritten(stand_in_image: str, tmp_path: Path) -> None:
    """Regression: with the Docker socket dead, `build` quietly used podman and wrote [image] into the lock."""
    _podman_or_skip()
    out = tmp_path / "env"
    args = ["build", "--ngc", "20.02-tf2-py3", "--base-image", stand_in_image, "--out", str(out)]
    assert run_envpin(*args).code == 0
    path = out / "envpin.lock"
    before = path.read_bytes()
    dead = {"DOCKER_HOST": f"unix://{tmp_path}/no.sock"}
    for cmd in (args, ["build", "--lock", str(path)]):
        refused = run_envpin(*cmd, env=dead)
        lines = refused.stderr.strip().splitlines()
        assert refused.code == 2 and len(lines) == 2, refused.stderr
        assert lines[0].startswith(f"error: {path} pins its base and records no reproducible image")
        assert "and docker does not answer here: the Docker engine is not reachable" in lines[0]
        assert "auto does not switch engines for a built lock" in lines[0]
        assert lines[1].startswith("hint: ") and lines[1].endswith(
            "or build with another engine on purpose: --engine podman"
        )
        assert path.read_bytes() == before
    # podman on purpose: built and kept on this machine; the lock is left as it is, and the way to record is said.
    chosen = run_envpin(*args, "--engine", "podman", env=dead)
    assert chosen.code == 0, chosen.stderr
    assert "built with podman" in chosen.stderr and "was left as it is" in chosen.stderr
    assert "`envpin build --engine podman --update` records sha256:" in chosen.stderr
    assert path.read_bytes() == before and buildstate.load(lockfile.read(path).inputs_hash, "podman") is not None
    recorded = run_envpin(*args, "--engine", "podman", "--update", env=dead)
    assert recorded.code == 0 and "recorded image sha256:" in recorded.stderr, recorded.stderr
    assert lockfile.read(path).image is not None


def test_a_build_from_the_lock_does_not_rewrite_it_without_update(stand_in_image: str, tmp_path: Path) -> None:
    """A lock `envpin render` wrote pins no digest yet: building from it would rewrite it, so that needs --update."""
    out = tmp_path / "env"
    rendered = run_envpin("render", "--ngc", "20.02-tf2-py3", "--base-image", stand_in_image, "--out", str(out))
    assert rendered.code == 0, rendered.stderr
    path = out / "envpin.lock"
    before = path.read_bytes()
    refused = run_envpin("build", "--lock", str(path))
    lines = refused.stderr.strip().splitlines()
    assert refused.code == 2 and lines[0].startswith(
        f"error: building would rewrite {path}: base.digest: absent -> 'sha256:"
    ), refused.stderr
    assert "a build changes a lock only with --update" in lines[0]
    assert lines[1] == "hint: add --update to let this build rewrite it (then review and commit the lock's diff)"
    assert path.read_bytes() == before and not buildstate.log_path(lockfile.read(path).inputs_hash).exists()
    updated = run_envpin("build", "--lock", str(path), "--update")
    assert updated.code == 0, updated.stderr
    pinned = lockfile.read(path)
    assert pinned.base.digest is not None and pinned.base.declared["TENSORFLOW_VERSION"] == "2.1.0"
    assert pinned.image is None  # Docker's image stays machine-local
    again = path.read_bytes()
    assert run_envpin("build", "--lock", str(path)).code == 0 and path.read_bytes() == again


def test_what_the_base_declares_is_re_derived_when_the_image_is_at_hand(stand_in_image: str, tmp_path: Path) -> None:
    """A re-signed [base.declared] that the image config contradicts: refused by the build (exit 2), naming the
    field; --update records what the image declares."""
    out = tmp_path / "env"
    args = ["build", "--ngc", "20.02-tf2-py3", "--base-image", stand_in_image, "--out", str(out)]
    assert run_envpin(*args).code == 0
    path = out / "envpin.lock"
    _resign(path, lambda d: d["base"]["declared"].__setitem__("CUDA_VERSION", "11.0.221"))
    assert run_envpin("lock", "--check", "--lock", str(path)).code == 0  # offline, nothing contradicts it
    before = path.read_bytes()
    for cmd in (args, ["build", "--lock", str(path)]):
        refused = run_envpin(*cmd)
        lines = refused.stderr.strip().splitlines()
        assert refused.code == 2, refused.stderr
        assert lines[0].startswith(
            f"error: {path} does not match what its base declares: "
            "base.declared.CUDA_VERSION is '11.0.221' in the lock, but the image config at "
            "sha256:"
        ), lines
        assert lines[0].endswith("declares '10.2.89'") and path.read_bytes() == before
    repaired = run_envpin(*args, "--update")
    assert repaired.code == 0, repaired.stderr
    assert lockfile.read(path).base.declared["CUDA_VERSION"] == "10.2.89"
