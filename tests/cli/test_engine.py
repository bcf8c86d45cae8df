"""The engine interface: both engines satisfy it, `auto` is decided in one place and never silently, and the
shared build log reports progress through a callback (the engines themselves: tests/docker)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envpin.errors import EngineError
from envpin.image.engine import ChosenEngine, resolve_engine
from envpin.image.podman import PodmanEngine


def test_auto_with_the_real_docker_down(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The real openers: an unreachable DOCKER_HOST gives podman with the reason, or (no podman) one error."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no.sock")
    monkeypatch.delenv("ENVPIN_ENGINE", raising=False)
    if shutil.which("podman") is None:
        with pytest.raises(EngineError, match=r"^no container engine answers: the Docker engine is not reachable"):
            resolve_engine()
        return
    chosen = resolve_engine()
    assert isinstance(chosen, ChosenEngine) and isinstance(chosen.engine, PodmanEngine)
    assert chosen.fallback is not None and chosen.fallback.startswith(
        f"engine auto chose podman, because docker: the Docker engine is not reachable: cannot connect to {tmp_path}"
    )


def test_lock_without_an_engine_is_one_error_and_a_hint(tmp_path: Path) -> None:
    """`envpin lock` asks the engine for the image's ID first (no ping, no SDK): a DOCKER_HOST socket that is not
    there is an error line naming it and the hint to start the engine, exit 2, nothing written."""
    from tests.conftest import run_envpin

    src = tmp_path / "requirements.in"
    src.write_text("six\n")
    res = run_envpin("lock", str(src), "--ngc", "20.02-tf2-py3", env={"DOCKER_HOST": f"unix://{tmp_path}/no.sock"})
    assert res.code == 2, res.stderr
    assert res.stderr.splitlines()[-2:] == [
        f"error: the Docker engine is not reachable: cannot connect to {tmp_path}/no.sock: No such file or directory",
        "hint: start the engine (`bash scripts/services.sh start` or `sudo dockerd &`), or set DOCKER_HOST",
    ]
    assert "Traceback" not in res.stderr and res.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["requirements.in"]


@pytest.mark.parametrize(
    ("host", "message", "hint"),
    [
        (
            "ssh://build-host",
            "DOCKER_HOST 'ssh://build-host' is not an address envpin reaches the engine at (unix:// or tcp://)",
            "for a remote engine forward its socket",
        ),
        ("tcp://127.0.0.1", "DOCKER_HOST 'tcp://127.0.0.1' names no host and port", "set DOCKER_HOST=tcp://HOST:PORT"),
        ("tcp://127.0.0.1:9", "the Docker engine is not reachable: cannot connect to tcp://127.0.0.1:9: ", "start the"),
    ],
    ids=["ssh", "no-port", "tcp-refused"],
)
def test_docker_hosts_the_engine_api_cannot_reach_are_said(host: str, message: str, hint: str) -> None:
    """The engine's API as the SDK reads DOCKER_HOST: what it cannot reach is an EngineError with a hint (the
    CLI's two lines), at the first request, for the image's ID as for anything else."""
    from envpin.image.docker import DockerEngine, EngineAPI

    engine = DockerEngine(api=EngineAPI({"DOCKER_HOST": host}, timeout=5))
    with pytest.raises(EngineError) as refused:
        engine.exists("127.0.0.1:5000/nvidia/tensorflow:20.02-tf2-py3")
    engine.close()
    assert refused.value.message.startswith(message), refused.value.message
    assert refused.value.hint is not None and refused.value.hint.startswith(hint)
