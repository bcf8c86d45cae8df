"""HTTP for the registry client, with the limits a hostile or broken registry must not get past.

- A total deadline per request (DEADLINE): name lookup, connect, TLS, every redirect hop, headers and body
  together. A watchdog shuts the request's sockets down when it passes, so a server that drips one byte a
  second is cut off on time; a per-read socket timeout alone would let it hold envpin for hours.
- A body limit per request (the caller's: manifests, configs, token answers), checked against
  Content-Length before reading and while reading.
- Redirects are followed here, not by urllib, whose redirect handler sends every header (Authorization
  included) to wherever the Location points. A login goes only to the origin (scheme, host, port) it was
  obtained for; a hop to another origin gets no Authorization. Plain HTTP only to loopback hosts, and never
  after HTTPS. A redirected POST (the OAuth2 token exchange, whose form holds a refresh token) is not followed.

Proxies from the environment (HTTPS_PROXY, HTTP_PROXY, NO_PROXY) are honoured, as urllib does.
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envpin.errors import RegistryError, shown
from envpin.portable.imageref import is_loopback
from envpin.record import Value

#: Seconds one request may take in all (lookup, connect, TLS, redirects, headers, body).
DEADLINE = 60.0
#: Seconds a socket may stay silent; never more than what is left of the deadline.
IDLE_TIMEOUT = 20.0
#: Redirect hops one request may take (Go's and so Docker's limit).
MAX_REDIRECTS = 10
_REDIRECT_CODES = frozenset({301, 302, 303, 307, 308})
_CHUNK = 64 * 1024
LIMITS_HINT = (
    "envpin refuses registry answers above its size limits (docs/registries.md); check that the "
    "registry or a proxy in between is not sending something else"
)

#: (scheme, host, port): what a login is bound to.
Origin = tuple[str, str, int]


def origin(url: str) -> Origin:
    """The origin of an http(s) URL, default ports made explicit: logins are bound to it."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or (443 if scheme == "https" else 80)


def shown_origin(url: str) -> str:
    """SCHEME://HOST[:PORT] of a URL, for messages: a redirect's path and query may carry signed tokens."""
    parts = urllib.parse.urlsplit(url)
    return shown(f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}")


def url_problem(url: str) -> str | None:
    """Why envpin will not send a request to `url`, or None: only http(s) URLs without a user name, and
    plain HTTP only to loopback hosts (Docker's default insecure registries)."""
    if not url.isascii() or any(c <= " " or c == "\x7f" for c in url):
        return f"'{shown(url)}', which is not a valid URL (spaces, control or non-ASCII characters)"
    try:
        parts = urllib.parse.urlsplit(url)
        port_ok = parts.port is None or parts.port > 0
    except ValueError:
        return f"'{shown(url)}', which is not a valid URL"
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname or not port_ok:
        return f"'{shown(url)}', which is not an http(s) URL"
    if "@" in parts.netloc:
        return f"'{shown_origin(url)}', a URL with a user name in it"
    if scheme == "http" and not is_loopback(parts.netloc):
        return f"'{shown_origin(url)}', plain HTTP to a host that is not loopback"
    return None


@dataclass(frozen=True, slots=True)
class Response(Value):
    """One answer after redirects: the status, lower-cased headers, the body (2xx only) and the final URL."""

    status: int
    headers: dict[str, str]
    body: bytes
    url: str


class _Watch:
    """The deadline of one request: a timer that shuts down every socket the request opened when it passes,
    which wakes any read in progress (TLS handshake, status line, headers or body) at once."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self.fired = False
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True

    def __enter__(self) -> _Watch:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        self._timer.join()
        with self._lock:
            for sock in self._socks:
                sock.close()
            self._socks.clear()

    def timeout(self) -> float:
        """A socket timeout: the idle limit, or what is left of the deadline if that is less."""
        return max(0.001, min(IDLE_TIMEOUT, self.end - time.monotonic()))

    def adopt(self, sock: socket.socket) -> None:
        """Watch `sock`. A duplicate descriptor is kept because TLS wrapping detaches the original object;
        shutting down the duplicate shuts down the connection."""
        with self._lock:
            if self.fired:
                sock.shutdown(socket.SHUT_RDWR)
                return
            self._socks.append(sock.dup())

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            for sock in self._socks:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


class _Request(urllib.request.Request):
    """A request that carries its watch to the connection factory."""

    def __init__(self, url: str, watch: _Watch, **kwargs: Any) -> None:
        super().__init__(url, **kwargs)
        self.watch = watch


def _watched(base: type[http.client.HTTPConnection], watch: _Watch) -> Callable[..., http.client.HTTPConnection]:
    """A connection class whose sockets the watch adopts as soon as they are connected."""

    def make(host: str, **kwargs: Any) -> http.client.HTTPConnection:
        conn = base(host, **kwargs)
        create = conn._create_connection  # type: ignore[attr-defined]

        def connect(
            address: tuple[str, int], timeout: float | None = None, source_address: tuple[str, int] | None = None
        ) -> socket.socket:
            sock: socket.socket = create(address, watch.timeout(), source_address)
            watch.adopt(sock)
            return sock

        conn._create_connection = connect  # type: ignore[attr-defined]
        return conn

    return make


class _HTTP(urllib.request.HTTPHandler):
    def http_open(self, req: _Request) -> http.client.HTTPResponse:  # type: ignore[override]
        return self.do_open(_watched(http.client.HTTPConnection, req.watch), req)


class _HTTPS(urllib.request.HTTPSHandler):
    def https_open(self, req: _Request) -> http.client.HTTPResponse:  # type: ignore[override]
        return self.do_open(_watched(http.client.HTTPSConnection, req.watch), req, context=self._context)  # type: ignore[attr-defined]


class Transport:
    """Requests with a deadline, a body limit and envpin's redirect policy (see the module docstring)."""

    def __init__(self, context: ssl.SSLContext, deadline: float = DEADLINE) -> None:
        self.deadline = deadline
        self._context = context
        # No redirect handler and no error processor: every status comes back here, redirects included.
        self._opener = urllib.request.OpenerDirector()
        for handler in (urllib.request.ProxyHandler(), _HTTP(), _HTTPS(context=context)):
            self._opener.add_handler(handler)

    def fetch(
        self,
        url: str,
        headers: dict[str, str],
        *,
        limit: int,
        thing: str,
        auth_origin: Origin | None = None,
        method: str = "GET",
        data: bytes | None = None,
    ) -> Response:
        """One request, redirects followed. The Authorization header goes only to `auth_origin`; the body of a
        2xx answer is read up to `limit` bytes. `thing` says what is asked for, in messages ('the manifest of
        REF'). Unreachable hosts and TLS failures raise OSError (urllib.error.URLError) for the caller."""
        problem = url_problem(url)
        if problem:
            raise RegistryError(
                f"envpin will not ask {problem} for {thing}",
                hint="use an HTTPS registry (plain HTTP is for loopback registries only)",
            )
        with _Watch(self.deadline) as watch:
            try:
                response = self._follow(url, headers, limit, thing, auth_origin, method, data, watch)
            except RegistryError:
                if watch.fired:  # a body cut short by the deadline is late, not short
                    raise self._late(url, thing) from None
                raise
            except (OSError, http.client.HTTPException) as exc:
                if watch.fired:
                    raise self._late(url, thing) from None
                if isinstance(exc, http.client.IncompleteRead):
                    raise RegistryError(
                        f"{shown_origin(url)} cut {thing} short (the connection ended inside the body)",
                        hint="the connection broke or a proxy cut it; retry later",
                    ) from None
                if not isinstance(exc, OSError):
                    raise RegistryError(
                        f"{shown_origin(url)} answered the request for {thing} with something "
                        f"that is not HTTP ({type(exc).__name__})",
                        hint="check that the address is a registry, and any proxy in between",
                    ) from None
                raise
            if watch.fired:  # the answer may have been cut short
                raise self._late(url, thing)
        return response

    def _late(self, url: str, thing: str) -> RegistryError:
        return RegistryError(
            f"{shown_origin(url)} did not deliver {thing} within {self.deadline:g} s "
            "(envpin's deadline for one request)",
            hint="the registry or the network stalls; retry later, or use a closer mirror",
        )

    def _follow(
        self,
        url: str,
        headers: dict[str, str],
        limit: int,
        thing: str,
        auth_origin: Origin | None,
        method: str,
        data: bytes | None,
        watch: _Watch,
    ) -> Response:
        current = url
        for _hop in range(MAX_REDIRECTS + 1):
            same = auth_origin is not None and origin(current) == auth_origin
            send = {k: v for k, v in headers.items() if same or k.lower() != "authorization"}
            req = _Request(current, watch, headers=send, method=method, data=data)
            with self._opener.open(req, timeout=watch.timeout()) as resp:
                status = resp.status
                got = {k.lower(): v for k, v in resp.headers.items()}
                if status in _REDIRECT_CODES:
                    current = self._redirect(current, got.get("location"), method, thing)
                    continue
                body = b""
                if 200 <= status < 300:
                    _check_encoding(got, current, thing)
                    body = _read(resp, limit, current, thing)
            return Response(status, got, body, current)
        raise RegistryError(
            f"{shown_origin(url)} redirected the request for {thing} more than {MAX_REDIRECTS} times",
            hint="the registry's redirects loop; check its configuration",
        )

    @staticmethod
    def _redirect(current: str, location: str | None, method: str, thing: str) -> str:
        """Where a redirect may lead, or a RegistryError saying why envpin does not follow it."""
        source = shown_origin(current)
        hint = "envpin follows GET redirects to HTTPS, or to plain HTTP on loopback hosts; check the registry"
        if method != "GET":
            raise RegistryError(
                f"{source} answered the {method} request for {thing} with a redirect, which "
                "envpin does not follow (the request carries a secret)",
                hint=hint,
            )
        if not location or not location.strip():
            raise RegistryError(f"{source} sent a redirect without a Location for {thing}", hint=hint)
        target = urllib.parse.urljoin(current, location.strip())
        problem = url_problem(target)
        if problem is None and origin(current)[0] == "https" and origin(target)[0] == "http":
            problem = f"'{shown_origin(target)}', plain HTTP after HTTPS"
        if problem:
            raise RegistryError(f"{source} redirected the request for {thing} to {problem}", hint=hint)
        return target

    def speaks_tls(self, host: str) -> bool:
        """Whether HOST[:PORT] answers a TLS handshake (any certificate); False when it answers plain HTTP,
        True when it cannot be reached, so that the real request says what is wrong. Bounded by the deadline."""
        name, _, port = host.rpartition(":") if not host.endswith("]") else (host, "", "")
        if not name or not port.isdigit():
            name, port = host, "443"
        name = name.strip("[]")
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # only the protocol is asked here; the request itself verifies
        with _Watch(self.deadline) as watch:
            try:
                with socket.create_connection((name, int(port)), timeout=watch.timeout()) as sock:
                    watch.adopt(sock)
                    with ctx.wrap_socket(sock, server_hostname=name):
                        return True
            except ssl.SSLError:
                answer = False
            except OSError:
                answer = True
            if watch.fired:
                raise self._late(f"https://{host}", "a TLS handshake")
        return answer


def _check_encoding(headers: dict[str, str], url: str, thing: str) -> None:
    """envpin asks for no compression; a body encoded anyway (gzip, br) would not hash to its digest."""
    encoding = headers.get("content-encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        raise RegistryError(
            f"{shown_origin(url)} sent {thing} encoded as '{shown(encoding, 40)}', which envpin did not ask for",
            hint="check the registry, or a proxy in between that compresses answers",
        )


def _read(resp: http.client.HTTPResponse, limit: int, url: str, thing: str) -> bytes:
    """The body, refused as soon as it is known to exceed `limit` (Content-Length first, then while reading),
    or when it ends before the length its Content-Length declares."""
    declared = (resp.headers.get("Content-Length") or "").strip()
    size = int(declared) if declared.isascii() and declared.isdigit() and len(declared) <= 18 else None
    buf = bytearray()
    while size is None or size <= limit:
        chunk = resp.read(min(_CHUNK, limit + 1 - len(buf)))
        if not chunk:
            if size is not None and len(buf) != size:
                raise RegistryError(
                    f"{shown_origin(url)} cut {thing} short: {len(buf):,} of the {size:,} bytes it announced",
                    hint="the connection broke or a proxy cut it; retry later",
                )
            return bytes(buf)
        buf += chunk
        if len(buf) > limit:
            break
    raise RegistryError(
        f"{shown_origin(url)} sent {thing} larger than {_size(limit)}, the most envpin reads for it", hint=LIMITS_HINT
    )


def _size(n: int) -> str:
    return f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n:,} bytes"
