"""Smoke tests of the engine tier's services themselves (scripts/services.sh): engine, registry, compose.

If one of these fails, the other tests under tests/docker cannot be trusted either.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.engines import MANIFEST_ACCEPT, STAND_IN_REPO, registry_request

PY_VERSION_CMD = ["python3", "-c", "import ssl,sys;print(sys.version)"]


def _run(docker_client: Any, image: str, command: list[str], **kwargs: Any) -> str:
    out = docker_client.containers.run(image, command, remove=True, stdout=True, stderr=True, **kwargs)
    return out.decode().strip()


def test_python_runs_in_stand_in_image(docker_client: Any, stand_in_image: str) -> None:
    out = _run(docker_client, stand_in_image, PY_VERSION_CMD)
    assert out.startswith("3.11."), out


def test_python_runs_in_bullseye_stand_in(docker_client: Any, stand_in_image_bullseye: str) -> None:
    out = _run(docker_client, stand_in_image_bullseye, PY_VERSION_CMD)
    assert out.startswith("3.9."), out


def test_stand_in_is_ngc_like_and_pip_works(docker_client: Any, stand_in_image: str) -> None:
    image = docker_client.images.get(stand_in_image)
    env = dict(item.split("=", 1) for item in image.attrs["Config"]["Env"])
    assert env["TENSORFLOW_VERSION"] == "2.1.0"
    assert env["NVIDIA_TENSORFLOW_VERSION"] == "20.02-tf2"
    assert env["CUDA_VERSION"] == "10.2.89"
    assert env["NVIDIA_REQUIRE_CUDA"].startswith("cuda>=10.2 brand=tesla,")
    assert env["PIP_BREAK_SYSTEM_PACKAGES"] == "1"
    assert image.labels["com.nvidia.tensorflow.version"] == "2.1.0"
    # pip runs as a module, sees the Debian system site, and TLS uses the CA bundle copied from the host.
    out = _run(
        docker_client,
        stand_in_image,
        [
            "python3",
            "-c",
            "import ssl, subprocess, sys; "
            "subprocess.run([sys.executable, '-m', 'pip', '--version'], check=True); "
            "print(ssl.get_default_verify_paths().openssl_cafile)",
        ],
    )
    assert "pip " in out and "python 3.11" in out, out
    assert out.splitlines()[-1] == "/usr/lib/ssl/cert.pem", out  # -> /etc/ssl/certs/ca-certificates.crt


def test_registry_lists_pushed_repository(local_registry: str, stand_in_image: str) -> None:
    _, _, body = registry_request("/v2/_catalog")
    assert STAND_IN_REPO in json.loads(body)["repositories"]
    _, _, body = registry_request(f"/v2/{STAND_IN_REPO}/tags/list")
    tags = json.loads(body)["tags"]
    assert stand_in_image.rsplit(":", 1)[1] in tags, tags


def test_manifest_digest_resolves(local_registry: str, stand_in_image: str) -> None:
    tag = stand_in_image.rsplit(":", 1)[1]
    status, headers, body = registry_request(f"/v2/{STAND_IN_REPO}/manifests/{tag}", accept=MANIFEST_ACCEPT)
    headers = {k.lower(): v for k, v in headers.items()}
    digest = headers["docker-content-digest"]
    assert status == 200
    assert digest == "sha256:" + hashlib.sha256(body).hexdigest()
    manifest = json.loads(body)
    assert manifest["schemaVersion"] == 2
    assert headers["content-type"] == manifest["mediaType"]
    # The digest is a stable address: fetching by digest returns the same bytes.
    status, _, by_digest = registry_request(f"/v2/{STAND_IN_REPO}/manifests/{digest}", accept=MANIFEST_ACCEPT)
    assert status == 200 and by_digest == body
    # ... and the config blob it names is there.
    status, _, config = registry_request(f"/v2/{STAND_IN_REPO}/blobs/{manifest['config']['digest']}")
    assert status == 200
    assert "TENSORFLOW_VERSION=2.1.0" in json.loads(config)["config"]["Env"]


def test_engine_resolves_same_digest(docker_client: Any, stand_in_image: str) -> None:
    tag = stand_in_image.rsplit(":", 1)[1]
    _, headers, _ = registry_request(f"/v2/{STAND_IN_REPO}/manifests/{tag}", method="HEAD", accept=MANIFEST_ACCEPT)
    digest = {k.lower(): v for k, v in headers.items()}["docker-content-digest"]
    # dockerd asks the registry itself (distribution inspect): proves it may talk plain HTTP to 127.0.0.1:5000.
    assert docker_client.images.get_registry_data(stand_in_image).id == digest


def _docker_cli() -> str:
    cli = shutil.which("docker")
    if cli is None:
        pytest.skip("no `docker` CLI on PATH; run `sudo bash scripts/services.sh install`")
    return cli


def test_docker_compose_version() -> None:
    proc = subprocess.run([_docker_cli(), "compose", "version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, (
        f"`docker compose version` failed ({proc.stderr.strip()}); run `sudo bash scripts/services.sh install`"
    )
    assert proc.stdout.startswith("Docker Compose version v2."), proc.stdout


def test_docker_compose_runs_a_service(docker_client: Any, stand_in_image: str, tmp_path: Path) -> None:
    (tmp_path / "compose.yaml").write_text(
        "services:\n"
        "  py:\n"
        f"    image: {stand_in_image}\n"
        '    command: ["python3", "-c", "import os; print(\'compose-ok\', os.environ[\'TENSORFLOW_VERSION\'])"]\n'
    )
    project = f"envpin-smoke-{uuid.uuid4().hex[:8]}"
    base = [_docker_cli(), "compose", "-p", project, "-f", str(tmp_path / "compose.yaml")]
    try:
        proc = subprocess.run([*base, "run", "--rm", "py"], capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip().splitlines()[-1] == "compose-ok 2.1.0", proc.stdout
    finally:
        subprocess.run([*base, "down", "--remove-orphans"], capture_output=True, timeout=120)


def test_both_engines_open_by_name_and_read_the_same_image(
    docker_client: Any, stand_in_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """envpin.image.engine over the real engines: the stand-in's config digest and layers are the same
    whichever engine reads them (both read the image config the registry serves)."""
    from envpin.image.engine import resolve_engine

    chosen = resolve_engine("docker")
    try:
        assert chosen.fallback is None and chosen.engine.name == "docker" and not chosen.engine.bit_identical
        assert chosen.engine.exists(stand_in_image) and not chosen.engine.exists("envpin-no-such/image:1")
        by_docker = chosen.engine.inspect(stand_in_image)
    finally:
        chosen.engine.close()
    assert by_docker.id.startswith("sha256:") and by_docker.layers and by_docker.steps == ()
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed; run `sudo bash scripts/services.sh install`")
    config = tmp_path / "docker"  # podman 4.3 wants a config.json wherever DOCKER_CONFIG points
    config.mkdir()
    (config / "config.json").write_text("{}\n")
    monkeypatch.setenv("DOCKER_CONFIG", str(config))
    podman = resolve_engine("podman").engine
    assert podman.name == "podman" and podman.bit_identical
    if not podman.exists(stand_in_image):
        subprocess.run(["podman", "pull", "-q", stand_in_image], capture_output=True, check=True, timeout=300)
    by_podman = podman.inspect(stand_in_image)
    assert (by_podman.id, by_podman.layers) == (by_docker.id, by_docker.layers)
    assert len(by_podman.steps) == len(by_podman.layers)
