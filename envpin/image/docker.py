"""The Docker engine through its Python SDK: the classic builder, with the base pinned by digest.

Docker 20.10's classic builder stamps the build time into every layer and the config, so each machine
gets its own image ID (bit_identical False); envpin keeps that ID machine-local (envpin.image.buildstate).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envpin.errors import EngineError
from envpin.image.buildlog import BuildLog
from envpin.image.model import BuildContext, BuildOutcome, ImageFacts
from envpin.record import ProgressCallback

if TYPE_CHECKING:
    from docker import DockerClient

_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")


def docker_client() -> DockerClient:
    """A client that answered a ping (the SDK is imported only now), every failure an actionable message."""
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


def _unix_socket_error() -> str | None:
    """Why the engine's Unix socket refuses a connection, or None (also for TCP hosts, left to the SDK).

    Checked with a plain socket first: when the SDK's connection fails it leaks the socket."""
    import os
    import socket

    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    if not host.startswith("unix://"):
        return None
    path = host[len("unix://") :]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            sock.connect(path)
    except PermissionError:
        return None  # the SDK's message and the docker-group hint below say it better
    except OSError as exc:
        return f"cannot connect to {path}: {exc.strerror or exc}"
    return None


class DockerEngine:
    """envpin.image.engine.Engine over one SDK connection (opened by `open`, which pings the daemon)."""

    name = "docker"
    bit_identical = False

    def __init__(self, client: DockerClient) -> None:
        self.client = client

    @classmethod
    def open(cls) -> DockerEngine:
        """Connect now: an unreachable daemon is an EngineError naming DOCKER_HOST and how to start it."""
        return cls(docker_client())

    def close(self) -> None:
        self.client.close()

    def build(
        self,
        context: BuildContext,
        tag: str,
        log_path: Path,
        *,
        no_cache: bool = False,
        pull: bool = False,
        progress: ProgressCallback | None = None,
    ) -> BuildOutcome:
        """Run the classic builder on the written folder through the SDK, streaming the log to `log_path`."""
        image_id: str | None = None
        with BuildLog(log_path, f"building {tag}", _STEP, progress) as log:
            try:
                stream = self.client.api.build(
                    path=str(context.folder), tag=tag, rm=True, forcerm=True, decode=True, nocache=no_cache, pull=pull
                )
                for chunk in stream:
                    if "error" in chunk:
                        message = chunk.get("errorDetail", {}).get("message") or chunk["error"]
                        log.add_error(message)
                        raise log.failure("the build failed", message.strip().splitlines()[-1])
                    if "aux" in chunk and isinstance(chunk["aux"], dict) and "ID" in chunk["aux"]:
                        image_id = chunk["aux"]["ID"]
                    text = chunk.get("stream") or chunk.get("status") or ""
                    if text:
                        log.add(text)
            except KeyboardInterrupt:
                log.save("interrupted\n")
                raise
            except EngineError:
                raise
            except Exception as exc:  # docker.errors.APIError, BuildError, requests errors
                log.save(f"{exc}\n")
                raise EngineError(
                    f"the build failed: {str(exc).splitlines()[0]}", hint=f"full log: {log_path}"
                ) from exc
            log.save()
        if image_id is None:
            image_id = self.client.images.get(tag).id
        if not image_id:  # the SDK's Image.id is optional; a built image always has one
            raise EngineError(f"the build of {tag} left no image ID", hint=f"full log: {log_path}")
        return log.outcome(image_id, tag)

    def exists(self, image: str) -> bool:
        try:
            return bool(self.client.images.get(image))
        except Exception:
            return False

    def inspect(self, image: str) -> ImageFacts:
        """ID and layers; Docker's inspect does not say which step made which layer, so no steps."""
        from docker.errors import DockerException

        try:
            attrs: dict[str, Any] = self.client.images.get(image).attrs
        except DockerException as exc:
            raise EngineError(
                f"cannot inspect image {image}: {exc}", hint="`docker image ls` shows what is there"
            ) from exc
        return ImageFacts(attrs["Id"], tuple(attrs.get("RootFS", {}).get("Layers") or ()))
