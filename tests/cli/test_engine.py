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
