"""The engine tiers' fixtures (tests/docker, tests/podman): a real Docker engine, the loopback registry, and
the stand-in NGC images.

Bring the services up with ``sudo bash scripts/services.sh all`` (see docs/engine.md). When a service is
missing the fixtures skip with a reason that says what did not answer and which command fixes it (in CI, the
root conftest turns those skips into failures). Each tier's conftest.py imports the fixtures it uses.
"""

from __future__ import annotations

import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent

REGISTRY = "127.0.0.1:5000"
STAND_IN_REPO = "nvidia/tensorflow"
#: tag -> what scripts/services.sh builds it from
STAND_IN_TAGS = {
    "20.02-tf2-py3": "Debian bookworm, Python 3.11",
    "21.06-tf2-py3": "Debian bullseye, Python 3.9",
}
#: The stand-ins for Docker Hub's stock TensorFlow GPU images (envpin --stock), tag -> what they are built from.
STOCK_REPO = "tensorflow/tensorflow"
STOCK_TAGS = {"2.20.0-gpu": "Debian bookworm, Python 3.11"}
MANIFEST_ACCEPT = ", ".join(
    [
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.oci.image.index.v1+json",
    ]
)
FIX_SERVICES = "run `sudo bash scripts/services.sh all` (docs/engine.md)"

# Never send loopback registry traffic through an HTTP(S)_PROXY from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def registry_request(
    path: str, *, method: str = "GET", accept: str | None = None, timeout: float = 10
) -> tuple[int, dict[str, str], bytes]:
    """Plain HTTP call to the local registry: (status, headers, body). Raises URLError/HTTPError."""
    headers = {"Accept": accept} if accept else {}
    req = urllib.request.Request(f"http://{REGISTRY}{path}", method=method, headers=headers)
    with _OPENER.open(req, timeout=timeout) as resp:
        return resp.status, dict(resp.headers.items()), resp.read()


def push_with_env(client: Any, base: str, repository: str, tag: str, env: dict[str, str], label: str) -> str:
    """Build an image FROM `base` that declares `env`, push it to the local registry as REPOSITORY:TAG (a
    repository the test owns, never the shared stand-ins), and return its reference."""
    import io
    import json

    lines = [f"FROM {base}", f"LABEL org.envpin.test={label}"]
    lines += [f"ENV {name}={json.dumps(value)}" for name, value in sorted(env.items())]
    ref = f"{REGISTRY}/{repository}:{tag}"
    client.images.build(fileobj=io.BytesIO("\n".join(lines).encode()), tag=ref, rm=True, pull=False)
    for event in client.images.push(f"{REGISTRY}/{repository}", tag=tag, stream=True, decode=True):
        assert "error" not in event, event
    return ref


def payload_tar(member: str) -> bytes:
    """A tar holding envpin.pyz (the payload images carry) as `member`, for put_archive into a container."""
    import io
    import tarfile

    from envpin.environment.payload import payload

    data = payload()
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo(member)
        info.size, info.mode = len(data), 0o644
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _engine_socket_error(host: str) -> str | None:
    """Why nothing accepts connections at `host`, or None.

    Checked with a plain socket first: when the connect fails, the docker SDK leaks its socket, and the
    resulting ResourceWarning is an error under this suite's filterwarnings.
    """
    try:
        if host.startswith("unix://"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(5)
                sock.connect(host[len("unix://") :])
        elif host.startswith(("tcp://", "http://", "https://")):
            url = urllib.parse.urlsplit(host.replace("tcp://", "http://", 1))
            with socket.create_connection((url.hostname, url.port or 2375), timeout=5):
                pass
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """docker SDK client for the engine behind DOCKER_HOST (default unix:///var/run/docker.sock)."""
    try:
        import docker
    except ImportError as exc:
        pytest.skip(f"docker SDK not importable ({exc}); `pip install docker`")
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    error = _engine_socket_error(host)
    if error:
        pytest.skip(f"Docker engine not answering at {host}: {error}; {FIX_SERVICES}")
    try:
        client = docker.from_env(version="auto")
        client.ping()
    except Exception as exc:  # any failure here means "no engine"
        pytest.skip(f"Docker engine not answering at {host}: {type(exc).__name__}: {exc}; {FIX_SERVICES}")
    try:
        yield client
    finally:
        client.close()


@pytest.fixture(scope="session")
def docker_engine(docker_client: Any) -> Iterator[Any]:
    """envpin's Docker engine (envpin.image.docker.DockerEngine) for the same engine: image facts over its API,
    containers through `docker_client`."""
    from envpin.image.docker import DockerEngine

    engine = DockerEngine(docker_client)
    try:
        yield engine
    finally:
        engine.api.close()


@pytest.fixture(scope="session")
def local_registry() -> str:
    """'127.0.0.1:5000' once its /v2/ endpoint answers (CNCF distribution, no auth, plain HTTP)."""
    try:
        status, headers, _ = registry_request("/v2/", timeout=5)
    except (urllib.error.URLError, OSError) as exc:
        pytest.skip(f"local registry not answering at http://{REGISTRY}/v2/: {exc}; {FIX_SERVICES}")
    api = {k.lower(): v for k, v in headers.items()}.get("docker-distribution-api-version", "")
    if status != 200 or not api.startswith("registry/2"):
        pytest.skip(
            f"http://{REGISTRY}/v2/ answered {status} without a registry/2.0 API header "
            f"(something else on port 5000?); {FIX_SERVICES}"
        )
    return REGISTRY


def _stand_in(registry: str, tag: str, repo: str = STAND_IN_REPO) -> str:
    ref = f"{registry}/{repo}:{tag}"
    try:
        registry_request(f"/v2/{repo}/manifests/{tag}", method="HEAD", accept=MANIFEST_ACCEPT)
    except urllib.error.HTTPError as exc:
        made_from = {**STAND_IN_TAGS, **STOCK_TAGS}[tag]
        pytest.skip(
            f"stand-in image {ref} ({made_from}) is not in the local registry "
            f"(HTTP {exc.code}); run `sudo bash scripts/services.sh base-images`"
        )
    except (urllib.error.URLError, OSError) as exc:
        pytest.skip(f"could not ask the local registry for {ref}: {exc}; {FIX_SERVICES}")
    return ref


@pytest.fixture(scope="session")
def stand_in_image(local_registry: str) -> str:
    """Ref of the bookworm stand-in for nvcr.io/nvidia/tensorflow:20.02-tf2-py3 in the local registry."""
    return _stand_in(local_registry, "20.02-tf2-py3")


@pytest.fixture(scope="session")
def stock_stand_in_image(local_registry: str) -> str:
    """Ref of the bookworm stand-in for docker.io/tensorflow/tensorflow:2.20.0-gpu (no TensorFlow, no CUDA)."""
    return _stand_in(local_registry, "2.20.0-gpu", STOCK_REPO)


@pytest.fixture(scope="session")
def stand_in_image_bullseye(local_registry: str) -> str:
    """Ref of the bullseye (Python 3.9) stand-in for nvcr.io/nvidia/tensorflow:21.06-tf2-py3."""
    return _stand_in(local_registry, "21.06-tf2-py3")
