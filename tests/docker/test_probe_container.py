"""The probe inside the NGC stand-in images: copied in the way images carry it (envpin/ on PYTHONPATH), run by
the image's own Python (3.9 on bullseye), and its report read against what the container says by other means."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from envpin.environment.payload import PAYLOAD_NAME
from envpin.probe import collect, fields, load_schema
from tests.engines import payload_tar

REGISTRY = "127.0.0.1:5000"
IMAGES = [
    ("nvidia/tensorflow:21.06-tf2-py3", "3.9", "bullseye"),
    ("nvidia/tensorflow:20.02-tf2-py3", "3.11", "bookworm"),
]
SECRETS = {
    "TF_SERVING_PASSWORD": "correct-horse-battery-staple-42",
    "NCCL_SOCKET_IFNAME": "ghp_" + "Zx9Cv8Bn7Mm6Lk5Jh4Gf3Dd2Ss1Aa0Qq",
}
# What the container says about itself by other means than the probe.
FACTS = (
    "python3 -c 'import platform; print(platform.python_version())'; getconf GNU_LIBC_VERSION; "
    ". /etc/os-release; echo $VERSION_CODENAME; test -f /.dockerenv && echo dockerenv || echo none"
)


@pytest.fixture(scope="module")
def engine(docker_client: Any) -> Any:
    """The shared engine client (tests/engines.py decides whether an engine answers)."""
    return docker_client


def _image(engine: Any, name: str) -> str:
    import docker

    ref = f"{REGISTRY}/{name}"
    try:
        engine.images.get(ref)
    except docker.errors.ImageNotFound:
        try:
            engine.images.pull(ref)
        except docker.errors.APIError as exc:
            pytest.skip(
                f"stand-in image {ref} is not in the local registry ({exc.explanation or exc}); "
                "build it with scripts/services.sh base-images"
            )
    return ref


def _run(engine: Any, image: str, command: list[str], env: dict[str, str], fetch: str | None = None):  # type: ignore[no-untyped-def]
    container = engine.containers.create(image, command=command, environment=env, network_disabled=True)
    hostname = container.attrs["Config"]["Hostname"]
    try:
        container.put_archive("/tmp", payload_tar(PAYLOAD_NAME))
        container.start()
        status = container.wait(timeout=300)
        out = container.logs(stdout=True, stderr=False).decode()
        err = container.logs(stdout=False, stderr=True).decode()
        files: dict[str, bytes] = {}
        if fetch and status["StatusCode"] == 0:
            stream, _ = container.get_archive(fetch)
            with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
                for member in tar.getmembers():
                    if member.isfile():
                        files[Path(member.name).name] = tar.extractfile(member).read()  # type: ignore[union-attr]
        return status["StatusCode"], out, err, files, hostname
    finally:
        container.remove(force=True)


@pytest.mark.parametrize(("name", "python", "codename"), IMAGES)
def test_probe_in_stand_in_image(engine: Any, name: str, python: str, codename: str) -> None:
    image = _image(engine, name)
    env = {"PYTHONPATH": "/tmp/" + PAYLOAD_NAME, **SECRETS}
    code, _, err, files, container_hostname = _run(
        engine, image, ["python3", "-m", "envpin.probe", "--out", "/tmp/reports"], env, fetch="/tmp/reports"
    )
    assert code == 0, err
    assert sorted(n.rsplit(".", 1)[1] for n in files) == ["json", "md"]
    json_name = next(n for n in files if n.endswith(".json"))
    report = json.loads(files[json_name])
    jsonschema.validate(report, load_schema())
    for blob in files.values():
        for secret in SECRETS.values():
            assert secret.encode() not in blob

    code, facts, err, _, _ = _run(engine, image, ["sh", "-c", FACTS], env)
    assert code == 0, err
    py_version, glibc, os_codename, dockerenv = facts.splitlines()[:4]
    assert py_version.startswith(python + ".")
    assert report["python"]["version"]["value"] == py_version
    assert report["os"]["glibc"]["value"] == glibc.split()[-1]
    assert report["os"]["release"]["value"]["version_codename"] == os_codename == codename
    assert report["container"]["in_container"]["value"] is True
    if dockerenv == "dockerenv":
        assert report["container"]["runtime"]["value"] == "docker"
    host = report["host"]
    assert host["hostname"]["value"] == container_hostname
    assert json_name.startswith(container_hostname + "-") and json_name.endswith(f"-{host['pid']['value']}.json")

    config_env = dict(e.split("=", 1) for e in engine.images.get(image).attrs["Config"]["Env"] or [])
    if "NVIDIA_TENSORFLOW_VERSION" in config_env:
        assert report["image"]["ngc_version"]["value"] == config_env["NVIDIA_TENSORFLOW_VERSION"]
    here = collect()
    assert report["cpu"]["isa_level"] == here["cpu"]["isa_level"]  # same CPU, other userland
    assert "unavailable" in report["gpu"]["count"]
    assert report["fingerprint"] == fields.fingerprint(report)
    for redacted in SECRETS:
        assert report["env"][redacted] == {
            "present": True,
            "redacted": True,
            "reason": report["env"][redacted]["reason"],
            "source": f"environ:{redacted}",
        }
