"""The Docker engine: its HTTP API read with the standard library, and the Python SDK for what runs.

Docker 20.10's classic builder stamps the build time into every layer and the config, so each machine
gets its own image ID (bit_identical False); envpin keeps that ID machine-local (envpin.image.buildstate).

Reading an image's ID and layers (`inspect`, `exists`) and the question whether the engine answers (`open`)
are one GET request each to the engine's API where DOCKER_HOST points (the SDK's rules: unix://, default
/var/run/docker.sock, podman's socket too; tcp:// with DOCKER_TLS_VERIFY and DOCKER_CERT_PATH), through
`EngineAPI`. The SDK, whose import and connection cost more CPU than envpin's whole start-up, is opened only
for what builds or runs containers (`DockerEngine.client`): `envpin lock` with its image's facts kept never
imports it (docs/lock.md, "Speed of envpin lock").
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from envpin.errors import EngineError, shown
from envpin.image.buildlog import BuildLog
from envpin.image.model import BuildContext, BuildOutcome, ImageFacts
from envpin.record import ProgressCallback

if TYPE_CHECKING:
    from docker import DockerClient

_STEP = re.compile(r"^Step (\d+)/(\d+) : (.*)$")
#: Where the engine listens when DOCKER_HOST is not set (the SDK's and the CLI's default).
DEFAULT_HOST = "unix:///var/run/docker.sock"
START_HINT = "start the engine (`bash scripts/services.sh start` or `sudo dockerd &`), or set DOCKER_HOST"
GROUP_HINT = "your user cannot open the Docker socket: add it to the 'docker' group or use sudo"
#: The most of an API answer read (an image's inspect is a few KiB; a long history some hundred).
_ANSWER_LIMIT = 16 << 20


def docker_client() -> DockerClient:
    """A client that answered a ping (the SDK is imported only now), every failure an actionable message."""
    try:
        import docker
        from docker.errors import DockerException
    except ImportError as exc:  # pragma: no cover - docker is a declared dependency
        raise EngineError("the docker Python SDK is not installed", hint="pip install docker") from exc
    hint = START_HINT
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
            hint = GROUP_HINT
        raise EngineError(f"the Docker engine is not reachable: {detail}", hint=hint) from exc


def _unix_socket_error() -> str | None:
    """Why the engine's Unix socket refuses a connection, or None (also for TCP hosts, left to the SDK).

    Checked with a plain socket first: when the SDK's connection fails it leaks the socket."""
    host = os.environ.get("DOCKER_HOST") or DEFAULT_HOST
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


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over the engine's Unix socket."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self.socket_path)
        except BaseException:
            sock.close()
            raise
        self.sock = sock


class EngineAPI:
    """GET requests to the engine's HTTP API where DOCKER_HOST points, as the SDK reads it
    (docker.utils.kwargs_from_env, parse_host): unix:// (default /var/run/docker.sock), tcp:// and http(s)://
    with a port; TLS when DOCKER_TLS_VERIFY is set (non-empty: verified against DOCKER_CERT_PATH/ca.pem) or
    DOCKER_CERT_PATH is, with the client certificate from DOCKER_CERT_PATH (default ~/.docker). One kept-alive
    connection, opened on the first request; paths are unversioned, so any API version the engine speaks
    answers. ssh:// is refused with how to forward the socket (the SDK needs paramiko for it, not a
    dependency of envpin)."""

    def __init__(self, environ: Mapping[str, str] | None = None, timeout: float = 120) -> None:
        env = os.environ if environ is None else environ
        self.host = env.get("DOCKER_HOST") or DEFAULT_HOST
        self.timeout = timeout
        self._env = env
        self._conn: http.client.HTTPConnection | None = None

    def _connection(self) -> http.client.HTTPConnection:
        host = self.host
        scheme, _, rest = host.partition("://")
        if scheme in ("unix", "http+unix"):
            return _UnixConnection(rest or "/var/run/docker.sock", self.timeout)
        if scheme not in ("tcp", "http", "https"):
            raise EngineError(
                f"DOCKER_HOST {shown(host)!r} is not an address envpin reaches the engine at (unix:// or tcp://)",
                hint="for a remote engine forward its socket (`ssh -NL /tmp/docker.sock:/var/run/docker.sock HOST`) "
                "and set DOCKER_HOST=unix:///tmp/docker.sock",
            )
        url = urlsplit(f"tcp://{rest}")
        try:
            port = url.port
        except ValueError:
            port = None
        if not url.hostname or not port:
            raise EngineError(
                f"DOCKER_HOST {shown(host)!r} names no host and port", hint="set DOCKER_HOST=tcp://HOST:PORT"
            )
        cert_path = self._env.get("DOCKER_CERT_PATH") or None
        verify = self._env.get("DOCKER_TLS_VERIFY")
        verified = verify is not None and verify != ""
        if scheme == "http" or (scheme == "tcp" and not (cert_path or verified)):
            return http.client.HTTPConnection(url.hostname, port, timeout=self.timeout)
        import ssl

        if not (cert_path or verified):  # https:// without the TLS variables: the system's CAs, no client certificate
            return http.client.HTTPSConnection(
                url.hostname, port, timeout=self.timeout, context=ssl.create_default_context()
            )
        certs = Path(cert_path or Path.home() / ".docker")
        context = ssl.create_default_context(cafile=str(certs / "ca.pem") if verified else None)
        if not verified:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        try:
            if verified and not (certs / "ca.pem").is_file():
                raise FileNotFoundError(certs / "ca.pem")
            context.load_cert_chain(str(certs / "cert.pem"), str(certs / "key.pem"))
        except (OSError, ssl.SSLError) as exc:
            raise EngineError(
                f"cannot read the TLS certificates for {shown(host)} in {certs}: {exc}",
                hint="DOCKER_CERT_PATH names the folder with ca.pem, cert.pem and key.pem",
            ) from exc
        return http.client.HTTPSConnection(url.hostname, port, timeout=self.timeout, context=context)

    def get(self, path: str) -> tuple[int, bytes]:
        """The status and body of GET `path`; EngineError (with how to fix it) when the engine does not answer."""
        for attempt in (1, 2):  # a kept-alive connection the engine closed meanwhile is opened again, once
            fresh = self._conn is None
            if self._conn is None:
                self._conn = self._connection()
            try:
                self._conn.request("GET", path, headers={"Host": "docker"})
                answer = self._conn.getresponse()
                body = answer.read(_ANSWER_LIMIT + 1)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as exc:
                self.close()
                if fresh or attempt == 2:
                    raise self._unreachable(exc) from exc
                continue
            except (OSError, http.client.HTTPException) as exc:
                self.close()
                raise self._unreachable(exc) from exc
            if len(body) > _ANSWER_LIMIT:
                self.close()
                raise EngineError(f"the Docker engine's answer to GET {path} is over {_ANSWER_LIMIT >> 20} MiB")
            if answer.will_close:
                self.close()
            return answer.status, body
        raise AssertionError("unreachable")  # pragma: no cover

    def _unreachable(self, exc: BaseException) -> EngineError:
        where = self.host[len("unix://") :] if self.host.startswith("unix://") else self.host
        if isinstance(exc, PermissionError):
            return EngineError(
                f"the Docker engine is not reachable: cannot connect to {where}: permission denied", hint=GROUP_HINT
            )
        detail = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
        return EngineError(f"the Docker engine is not reachable: cannot connect to {where}: {detail}", hint=START_HINT)

    def json(self, path: str) -> tuple[int, Any]:
        """GET `path` as JSON (None for an empty or non-JSON body: an error's message is in it where it is JSON)."""
        status, body = self.get(path)
        try:
            return status, json.loads(body) if body else None
        except ValueError:
            return status, None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


class DockerEngine:
    """envpin.image.engine.Engine for the Docker engine: image facts over its API (`EngineAPI`), builds and
    containers through the SDK client, opened on first use (`client`)."""

    name = "docker"
    bit_identical = False

    def __init__(self, client: DockerClient | None = None, api: EngineAPI | None = None) -> None:
        self._client = client
        self.api = api or EngineAPI()

    @classmethod
    def open(cls) -> DockerEngine:
        """Connect now (one GET /_ping): an unreachable engine is an EngineError naming how to start it.

        What only reads an image (`envpin lock`) constructs the engine instead: its first request says the same."""
        engine = cls()
        status, _ = engine.api.get("/_ping")
        if status != 200:
            engine.close()
            raise EngineError(
                f"the Docker engine at {engine.api.host} answered its ping with HTTP {status}", hint=START_HINT
            )
        return engine

    @property
    def client(self) -> DockerClient:
        """The SDK client (imported and connected on first use): what builds and runs containers."""
        if self._client is None:
            self._client = docker_client()
        return self._client

    def close(self) -> None:
        self.api.close()
        if self._client is not None:
            self._client.close()

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
            image_id = self.inspect(tag).id
        if not image_id:  # the SDK's Image.id is optional; a built image always has one
            raise EngineError(f"the build of {tag} left no image ID", hint=f"full log: {log_path}")
        return log.outcome(image_id, tag)

    def _image(self, image: str, absent: tuple[int, ...] = (404,)) -> dict[str, Any] | None:
        """GET /images/IMAGE/json: the engine's inspect of `image` (ID, tag or digest reference), None when
        the engine answers one of the `absent` statuses (404: it does not hold it)."""
        status, data = self.api.json(f"/images/{quote(image, safe='/:@')}/json")
        if status in absent:
            return None
        if status != 200 or not isinstance(data, dict) or not isinstance(data.get("Id"), str):
            said = data.get("message") if isinstance(data, dict) else None
            raise EngineError(
                f"cannot inspect image {image}: the engine answered HTTP {status}" + (f": {said}" if said else ""),
                hint="`docker image inspect` shows what the engine says",
            )
        return data

    def exists(self, image: str) -> bool:
        """Whether the engine holds `image`; an EngineError when the engine does not answer (no image is not
        the same as no engine). A name that is no reference (HTTP 400) names nothing the engine holds."""
        return self._image(image, absent=(404, 400)) is not None

    def inspect(self, image: str) -> ImageFacts:
        """ID and layers; Docker's inspect does not say which step made which layer, so no steps."""
        attrs = self._image(image)
        if attrs is None:
            raise EngineError(
                f"cannot inspect image {image}: no such image", hint="`docker image ls` shows what is there"
            )
        rootfs = attrs.get("RootFS")
        layers = rootfs.get("Layers") if isinstance(rootfs, dict) else None
        return ImageFacts(attrs["Id"], tuple(str(x) for x in layers or ()))
