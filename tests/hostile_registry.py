"""A deliberately hostile registry on loopback, for the registry client's tests (or an honest one, when told).

http.server in a thread, bound to 127.0.0.1 only. Each path answers what the test says: any status, headers
and body, a body that does not match its digest, a redirect elsewhere, an answer dripped one byte at a time,
or bytes that are not HTTP at all. Every loop is bounded: the server stops by itself after `lifetime`
seconds, a dripped answer ends after its last byte or as soon as the server stops, and a handler waits at
most a few seconds for a client. Every request is recorded (method, path, headers, body), so a test can
assert what a server never saw (an Authorization header, a path with '..').
"""

from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
INDEX = "application/vnd.docker.distribution.manifest.list.v2+json"
CONFIG = "application/vnd.docker.container.image.v1+json"
NOT_FOUND = b'{"errors": [{"code": "MANIFEST_UNKNOWN", "message": "manifest unknown"}]}'


def digest(body: bytes) -> str:
    """What a registry names `body` by."""
    return "sha256:" + hashlib.sha256(body).hexdigest()


@dataclass(frozen=True)
class Seen:
    """One request as the server received it (header names lower-cased)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Answer:
    """What one path answers."""

    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    #: Seconds between bytes; the whole answer (status line and headers included) is dripped.
    drip: float | None = None
    #: With drip: send the status line and headers at once and drip only the body.
    drip_body_only: bool = False
    #: Send no Content-Length: the body ends when the connection closes.
    no_length: bool = False
    #: Send these bytes instead of an HTTP answer.
    raw: bytes | None = None


Route = Answer | Callable[[Seen], Answer]


def redirect(location: str, status: int = 307) -> Answer:
    return Answer(status, headers={"Location": location})


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = False  # server_close() joins the handlers, which are all bounded
    timeout = 0.05  # handle_request() returns after this when no client comes

    def __init__(self, owner: HostileRegistry) -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    server: _Server
    timeout = 5  # seconds a handler waits for a client's request or body

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self._answer()

    def do_HEAD(self) -> None:
        self._answer()

    def _answer(self) -> None:
        owner = self.server.owner
        length = self.headers.get("Content-Length", "0")
        body = self.rfile.read(min(int(length), 1 << 20)) if length.isdigit() else b""
        seen = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
        with owner.lock:
            owner.seen.append(seen)
            route = owner.routes.get(self.path.partition("?")[0])
        if route is None:
            answer = Answer(404, NOT_FOUND, {"Content-Type": "application/json"})
        else:
            answer = route(seen) if callable(route) else route
        self.close_connection = True
        # The client may give up mid-answer (a deadline or a size limit): what the test wants.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            self._send(answer, owner)

    def _send(self, answer: Answer, owner: HostileRegistry) -> None:
        if answer.raw is not None:
            head, body = answer.raw, b""
        else:
            lines = [f"HTTP/1.0 {answer.status} Hostile"]
            lines += [f"{k}: {v}" for k, v in answer.headers.items()]
            if not answer.no_length:
                lines.append(f"Content-Length: {len(answer.body)}")
            head, body = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"), answer.body
        if answer.drip is None:
            self.wfile.write(head + body)
            return
        if answer.drip_body_only:
            self.wfile.write(head)
            self.wfile.flush()
            dripped = body
        else:
            dripped = head + body
        for i in range(len(dripped)):  # bounded by the answer's length, and ends when the server stops
            if owner.stopping.wait(answer.drip):
                return
            self.wfile.write(dripped[i : i + 1])
            self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class HostileRegistry:
    """A loopback registry whose answers the test sets with `routes` (path -> Answer or a function of the
    request). Use as a context manager; it also stops by itself after `lifetime` seconds."""

    def __init__(self, routes: dict[str, Route] | None = None, lifetime: float = 60.0) -> None:
        self.routes: dict[str, Route] = dict(routes or {})
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.lifetime = lifetime
        self._server = _Server(self)
        self._thread = threading.Thread(target=self._run, name="hostile-registry", daemon=True)

    @property
    def host(self) -> str:
        """127.0.0.1:PORT."""
        return f"127.0.0.1:{self._server.server_address[1]}"

    def url(self, path: str) -> str:
        return f"http://{self.host}{path}"

    def requests(self) -> list[Seen]:
        """What was asked so far, TLS probes (not HTTP) left out."""
        with self.lock:
            return list(self.seen)

    def authorizations(self) -> list[str]:
        """Every Authorization header this server received."""
        return [s.headers["authorization"] for s in self.requests() if "authorization" in s.headers]

    def _run(self) -> None:
        end = time.monotonic() + self.lifetime
        while not self.stopping.is_set() and time.monotonic() < end:
            self._server.handle_request()
        self.stopping.set()

    def __enter__(self) -> HostileRegistry:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self._thread.join(timeout=10)
        self._server.server_close()


# -- images as a registry holds them ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Image:
    """One linux/amd64 image: its config blob and manifest, and optionally an index over it."""

    config: bytes
    manifest: bytes
    index: bytes | None = None

    @property
    def top(self) -> bytes:
        """What the tag points to."""
        return self.index if self.index is not None else self.manifest


def make_image(env: dict[str, str] | None = None, *, index: bool = False, other_platforms: int = 0) -> Image:
    """An image whose config declares `env`, with an index (amd64 last, after `other_platforms` arm64
    entries) when asked."""
    config = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "created": "2020-02-20T00:00:00Z",
            "config": {"Env": [f"{k}={v}" for k, v in (env or {}).items()]},
        }
    ).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "config": {"mediaType": CONFIG, "size": len(config), "digest": digest(config)},
            "layers": [],
        }
    ).encode()
    if not index:
        return Image(config, manifest)
    entries = [
        {
            "mediaType": MANIFEST,
            "size": 7,
            "digest": digest(f"arm{i}".encode()),
            "platform": {"architecture": "arm64", "os": "linux"},
        }
        for i in range(other_platforms)
    ]
    entries.append(
        {
            "mediaType": MANIFEST,
            "size": len(manifest),
            "digest": digest(manifest),
            "platform": {"architecture": "amd64", "os": "linux"},
        }
    )
    return Image(config, manifest, json.dumps({"schemaVersion": 2, "mediaType": INDEX, "manifests": entries}).encode())


def image_with_config(config: Any) -> Image:
    """An image whose config blob is `config` as JSON, whatever its shape (a list, Env as a string...): what a
    broken or hostile registry may serve under a correct digest."""
    blob = json.dumps(config).encode()
    manifest = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": MANIFEST,
            "config": {"mediaType": CONFIG, "size": len(blob), "digest": digest(blob)},
            "layers": [],
        }
    ).encode()
    return Image(blob, manifest)


def manifest_answer(body: bytes, media_type: str = MANIFEST, header: str | None = "computed") -> Answer:
    """A manifest answer; `header` is the Docker-Content-Digest to send ('computed': the true one; None: none)."""
    headers = {"Content-Type": media_type}
    if header is not None:
        headers["Docker-Content-Digest"] = digest(body) if header == "computed" else header
    return Answer(200, body, headers)


def image_routes(repository: str, tag: str, image: Image) -> dict[str, Route]:
    """The routes of an honest registry that holds `image` under repository:tag."""
    base = f"/v2/{repository}"
    routes: dict[str, Route] = {
        f"{base}/manifests/{digest(image.manifest)}": manifest_answer(image.manifest),
        f"{base}/blobs/{digest(image.config)}": Answer(200, image.config, {"Content-Type": "application/octet-stream"}),
    }
    if image.index is not None:
        routes[f"{base}/manifests/{tag}"] = manifest_answer(image.index, INDEX)
        routes[f"{base}/manifests/{digest(image.index)}"] = manifest_answer(image.index, INDEX)
    else:
        routes[f"{base}/manifests/{tag}"] = manifest_answer(image.manifest)
    return routes


def running(routes: dict[str, Route] | None = None) -> Iterator[HostileRegistry]:
    """A started registry for a pytest fixture (yield from it)."""
    with HostileRegistry(routes) as reg:
        yield reg
