"""Building an environment folder through a real Docker engine, with the base pinned by digest."""

from __future__ import annotations

import contextlib
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envpin.environment import lockfile as lockmod
from envpin.errors import EngineError, LockError, RegistryError
from envpin.fsutil import atomic_write

_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")


def docker_client() -> Any:
    """Connect to the engine lazily, translating every failure into an actionable message."""
    try:
        import docker
        from docker.errors import DockerException
    except ImportError as exc:  # pragma: no cover - docker is a declared dependency
        raise EngineError("the docker Python SDK is not installed", hint="pip install docker") from exc
    hint = "start the engine (`bash scripts/services.sh start` or `sudo dockerd &`), or set DOCKER_HOST"
    refused = _unix_socket_error()
    if refused:
        raise EngineError(f"the Docker engine is not reachable: {refused}", hint=hint)
    client = None
    try:
        client = docker.from_env(timeout=120)
        client.ping()
        return client
    except DockerException as exc:
        if client is not None:
            client.close()  # the SDK keeps the failed connection's socket open otherwise
        detail = str(exc).split("\n")[0]
        if "Permission denied" in detail:
            hint = "your user cannot open the Docker socket: add it to the 'docker' group or use sudo"
        raise EngineError(f"the Docker engine is not reachable: {detail}", hint=hint) from exc


ENGINES = ("auto", "docker", "podman")
#: Default for --engine (CI and build hosts that should always use podman).
ENGINE_ENV = "ENVPIN_ENGINE"


def choose_engine(requested: str | None) -> str:
    """'docker' or 'podman'. auto: Docker when its daemon answers, else podman when installed."""
    import os

    from envpin.errors import UsageError, shown

    choice = requested or os.environ.get(ENGINE_ENV) or "auto"
    if choice not in ENGINES:
        raise UsageError(f"unknown engine '{shown(choice)}'", hint="use --engine auto, docker or podman")
    if choice == "podman":
        from envpin.image import podman

        podman.binary()  # before any registry request or write: a missing podman is said first
    if choice != "auto":
        return choice
    try:
        docker_client().close()
        return "docker"
    except EngineError as docker_error:
        from envpin.image import podman

        if podman.available():
            return "podman"
        raise EngineError(
            f"no container engine answers: {docker_error.message}",
            hint="start Docker (`bash scripts/services.sh start`) or install podman (`apt-get install podman`)",
        ) from docker_error


def _unix_socket_error() -> str | None:
    """Why the engine's Unix socket refuses a connection, or None (also for TCP hosts, left to the SDK).

    Checked with a plain socket first: when the SDK's connection fails it leaks the socket."""
    import os
    import socket

    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    if not host.startswith("unix://"):
        return None
    path = host[len("unix://"):]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(path)
    except PermissionError:
        return None  # the SDK's message and the docker-group hint below say it better
    except OSError as exc:
        return f"cannot connect to {path}: {exc.strerror or exc}"
    return None


def previous_lock(out: Path) -> lockmod.Lock | None:
    """The lock already in the folder, if any and intact (a broken one is refused by render)."""
    path = out / lockmod.LOCK_NAME
    if not path.exists():
        return None
    try:
        return lockmod.read(path)
    except LockError:
        return None


def check_base_moved(lock: lockmod.Lock | None, ref: str, digest: str, update: bool) -> None:
    """NGC tags are re-pushed: a lock pins one digest, and a different one now is refused."""
    pinned = lock.base.digest if lock else None
    if pinned and pinned != digest and not update:
        raise RegistryError(
            f"{ref} now points to {digest[:19]}…, but envpin.lock pins {pinned[:19]}…: the tag was re-pushed",
            hint="keep building the pinned image from a mirror, or accept the new base with --update and re-verify",
        )


@dataclass
class BuildOutcome:
    image_id: str
    tag: str
    cached: bool
    seconds: float
    log: Path


def build_image(
    client: Any, context: Path, tag: str, log_path: Path, *, no_cache: bool = False, pull: bool = False
) -> BuildOutcome:
    """Run the classic builder through the SDK, streaming the log to `log_path` (outside the folder)."""
    lines: list[str] = []
    tail: deque[str] = deque(maxlen=20)
    image_id = None
    current = "starting"
    cached_steps = steps = 0
    try:
        from envpin.views.console import Progress

        with Progress(f"building {tag}") as progress:
            stream = client.api.build(
                path=str(context), tag=tag, rm=True, forcerm=True, decode=True, nocache=no_cache, pull=pull
            )
            for chunk in stream:
                if "error" in chunk:
                    message = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                    lines.append(message)
                    tail.append(message.rstrip())
                    save_log(log_path, lines)
                    raise EngineError(
                        f"the build failed at {current}: {message.strip().splitlines()[-1]}\n"
                        + "\n".join(f"  | {t}" for t in tail),
                        hint=f"full log: {log_path}",
                    )
                text = chunk.get("stream") or chunk.get("status") or ""
                if "aux" in chunk and isinstance(chunk["aux"], dict) and "ID" in chunk["aux"]:
                    image_id = chunk["aux"]["ID"]
                if not text:
                    continue
                lines.append(text if text.endswith("\n") else text + "\n")
                for line in text.splitlines():
                    if line.strip():
                        tail.append(line.rstrip())
                    m = _STEP.match(line.strip())
                    if m:
                        steps += 1
                        current = f"step {m.group(1)}/{m.group(2)} ({m.group(3)[:60]})"
                        progress.step(current)
                    elif "Using cache" in line:
                        cached_steps += 1
            seconds = progress.elapsed
    except KeyboardInterrupt:
        save_log(log_path, [*lines, "interrupted\n"])
        raise
    except EngineError:
        raise
    except Exception as exc:  # docker.errors.APIError, BuildError, requests errors
        save_log(log_path, [*lines, f"{exc}\n"])
        raise EngineError(f"the build failed: {str(exc).splitlines()[0]}", hint=f"full log: {log_path}") from exc
    save_log(log_path, lines)
    if image_id is None:
        image_id = client.images.get(tag).id
    from_steps = 1  # FROM is never reported as "Using cache"
    return BuildOutcome(image_id, tag, steps > 0 and cached_steps >= steps - from_steps, seconds, log_path)


def save_log(path: Path, lines: list[str]) -> None:
    with contextlib.suppress(Exception):
        atomic_write(path, "".join(lines).encode())


def image_exists(client: Any, image_id: str) -> bool:
    try:
        return bool(client.images.get(image_id))
    except Exception:
        return False
