"""Registry authentication: a real registry (CNCF distribution) that demands a bearer token."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

from envpin.errors import RegistryError
from envpin.registry import RegistryClient
from tests.conftest import run_envpin

pytestmark = pytest.mark.docker


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def token_registry(tmp_path: Path):  # type: ignore[no-untyped-def]
    """distribution's 'silly' auth: every anonymous request gets 401 + a Bearer challenge whose token
    realm (here: a path on the registry itself) hands out no token, as a private registry would."""
    exe = shutil.which("docker-registry")
    if exe is None:
        pytest.skip("docker-registry is not installed (bash scripts/services.sh install)")
    port = _free_port()
    config = tmp_path / "registry.yml"
    config.write_text(
        "version: 0.1\n"
        "log: {level: error}\n"
        "storage: {inmemory: {}}\n"
        f"http: {{addr: '127.0.0.1:{port}', secret: envpin-test}}\n"
        f"auth: {{silly: {{realm: 'http://127.0.0.1:{port}/token', service: envpin-test}}}}\n"
    )
    proc = subprocess.Popen([exe, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(50):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_bearer_challenge_without_token_says_docker_login(token_registry: str) -> None:
    with pytest.raises(RegistryError) as info:
        RegistryClient().resolve_digest(f"{token_registry}/nvidia/tensorflow:20.02-tf2-py3")
    assert "refused an anonymous token" in info.value.message
    assert info.value.hint == f"run `docker login {token_registry}` and retry"


def test_cli_auth_error_is_one_line(token_registry: str, tmp_path: Path) -> None:
    ref = f"{token_registry}/nvidia/tensorflow:20.02-tf2-py3"
    res = run_envpin("build", "--ngc", "20.02-tf2-py3", "--base-image", ref, "--out", str(tmp_path / "e"))
    assert res.code == 2 and "docker login" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "e").exists()
