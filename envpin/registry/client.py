"""A small Docker Registry HTTP API v2 client: tags to digests, manifests and config blobs.

Only manifests and config blobs are read, never layers, so resolving or syncing costs kilobytes. Auth
is docker's: the challenge (401 + WWW-Authenticate) picks Basic or a bearer token, with the login that
`docker login` stored (envpin.registry.logins) or anonymously, as nvcr.io and Docker Hub allow for public images.
"""

from __future__ import annotations

import hashlib
import json
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envpin.errors import RegistryError, shown
from envpin.portable import imageref
from envpin.portable.imageref import ImageRef
from envpin.registry import logins as dockerauth
from envpin.registry.logins import Credentials

MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)
_INDEX_TYPES = ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")
TIMEOUT = 20


def parse_ref(ref: str) -> ImageRef:
    """A reference the registry can be asked about (tag or digest required), as a RegistryError if not."""
    try:
        return imageref.parse(ref, need_version=True)
    except imageref.RefError as exc:
        raise RegistryError(exc.message, hint=exc.hint) from None


@dataclass
class Manifest:
    digest: str
    media_type: str
    body: dict[str, Any]


class RegistryClient:
    """Access to registries as docker has it: the login `docker login` stored (dockerauth), Basic or bearer
    token auth as the registry's challenge asks, HTTPS verified against the system CAs plus `ca_file`.

    Loopback registries (127.0.0.0/8, localhost, [::1]) are what docker treats as insecure by default: HTTPS
    is tried first and plain HTTP only when the port answers HTTP, never after a certificate error."""

    def __init__(self, ca_file: str | None = None, credentials: Callable[[str], Credentials | None] | None = None,
                 ) -> None:
        self._auth: dict[tuple[str, str], str] = {}  # (api host, repository) -> Authorization header
        self._schemes: dict[str, str] = {}
        self._credentials = credentials or dockerauth.lookup
        self._ssl = ssl.create_default_context()
        if ca_file:
            self._ssl.load_verify_locations(cafile=ca_file)  # added to the system CAs, not instead of them

    def _open(self, url: str, headers: dict[str, str], method: str = "GET",
              data: bytes | None = None) -> tuple[bytes, dict[str, str]]:
        req = urllib.request.Request(url, headers=headers, method=method, data=data)
        with urllib.request.urlopen(req, timeout=TIMEOUT, context=self._ssl) as resp:
            return resp.read(), {k.lower(): v for k, v in resp.headers.items()}

    def _url(self, ref: ImageRef, path: str) -> str:
        """The API URL; for a loopback host the first request finds out whether it speaks TLS."""
        host = ref.api_host
        scheme = self._schemes.get(host)
        if scheme is None:
            scheme = "https"
            if imageref.is_loopback(host) and not _speaks_tls(host):
                scheme = "http"
            self._schemes[host] = scheme
        return f"{scheme}://{host}/v2/{ref.repository}/{path}"

    def _get(self, ref: ImageRef, path: str, accept: str) -> tuple[bytes, dict[str, str]]:
        url = self._url(ref, path)
        headers = {"Accept": accept, "User-Agent": "envpin"}
        scope = (ref.api_host, ref.repository)
        if scope in self._auth:
            headers["Authorization"] = self._auth[scope]
        try:
            return self._open(url, headers)
        except urllib.error.HTTPError as exc:
            exc.close()  # the error response holds an open socket
            if exc.code == 401 and "Authorization" not in headers:
                creds = self._credentials(ref.registry)
                self._auth[scope] = headers["Authorization"] = self._authorize(
                    ref, exc.headers.get("WWW-Authenticate", ""), creds)
                try:
                    return self._open(url, headers)
                except urllib.error.HTTPError as exc2:
                    exc2.close()
                    if exc2.code == 401 and creds is not None:
                        raise self._refused(ref, creds) from None
                    raise self._http_error(ref, exc2) from exc2
                except (urllib.error.URLError, OSError) as exc2:
                    raise self._unreachable(ref, exc2) from exc2
            raise self._http_error(ref, exc) from exc
        except (urllib.error.URLError, OSError) as exc:
            raise self._unreachable(ref, exc) from exc

    def _authorize(self, ref: ImageRef, challenge: str, creds: Credentials | None) -> str:
        """The Authorization header the challenge asks for: Basic with the stored login, or a bearer token
        from the realm (fetched with the login when there is one, anonymously otherwise)."""
        kind = challenge.split(" ", 1)[0].lower()
        if kind == "basic":
            if creds is None:
                raise RegistryError(f"{ref.api_host} requires a login for {ref.repository}",
                                    hint=f"run `docker login {ref.registry}` and retry")
            return creds.basic()
        if kind != "bearer":
            raise RegistryError(f"{ref.api_host} requires authentication of a kind envpin does not speak "
                                f"({shown(kind)})", hint="use a registry with Basic or bearer-token auth")
        params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
        realm = params.pop("realm", None)
        if not realm or not realm.startswith(("https://", "http://")):
            raise RegistryError(f"{ref.api_host} sent an unusable auth challenge: {shown(challenge)}")
        params.setdefault("scope", f"repository:{ref.repository}:pull")
        try:
            if creds is not None and creds.identity_token:
                # An OAuth2 refresh token (docker's identitytoken) is exchanged with a POST.
                form = {"grant_type": "refresh_token", "refresh_token": creds.secret, "client_id": "envpin",
                        "service": params.get("service", ""), "scope": params["scope"]}
                body, _ = self._open(realm, {"User-Agent": "envpin",
                                             "Content-Type": "application/x-www-form-urlencoded"},
                                     "POST", urllib.parse.urlencode(form).encode())
            else:
                url = realm + ("&" if "?" in realm else "?") + urllib.parse.urlencode(params)
                headers = {"User-Agent": "envpin"}
                if creds is not None:
                    headers["Authorization"] = creds.basic()
                    url += "&" + urllib.parse.urlencode({"account": creds.username})
                body, _ = self._open(url, headers)
        except urllib.error.HTTPError as exc:
            exc.close()
            if creds is not None and exc.code in (400, 401, 403):
                raise self._refused(ref, creds) from None
            if creds is not None:
                raise RegistryError(f"{ref.api_host}'s token endpoint answered HTTP {exc.code} for {ref.repository}",
                                    hint="check the registry's auth service") from exc
            raise RegistryError(
                f"{ref.api_host} refused an anonymous token for {ref.repository} (HTTP {exc.code})",
                hint=f"run `docker login {ref.registry}` and retry",
            ) from exc
        except (urllib.error.URLError, OSError) as exc:
            raise self._unreachable(ref, exc) from exc
        try:
            data = json.loads(body)
            token = data.get("token") or data.get("access_token")
        except (ValueError, AttributeError):
            token = None
        if not token or not isinstance(token, str):
            raise RegistryError(f"{ref.api_host}'s token endpoint returned no token")
        return f"Bearer {token}"

    @staticmethod
    def _refused(ref: ImageRef, creds: Credentials) -> RegistryError:
        who = "the stored token" if creds.identity_token else f"user '{shown(creds.username)}'"
        return RegistryError(f"{ref.api_host} refused the login of {who} (from {creds.origin}) "
                             f"for {ref.repository}",
                             hint=f"check the user name and password with `docker login {ref.registry}`, "
                                  "then retry")

    @staticmethod
    def _http_error(ref: ImageRef, exc: urllib.error.HTTPError) -> RegistryError:
        if exc.code in (401, 403):
            return RegistryError(
                f"{ref.api_host} requires authentication for {ref.repository} (HTTP {exc.code})",
                hint=f"run `docker login {ref.api_host}` and retry",
            )
        if exc.code == 404:
            what = ref.tag or ref.digest
            return RegistryError(
                f"{ref.api_host}/{ref.repository} has no tag or manifest '{what}'",
                hint="check the release with `envpin catalog`, or the mirror's contents",
            )
        return RegistryError(f"{ref.api_host} answered HTTP {exc.code} for {ref}")

    @staticmethod
    def _unreachable(ref: ImageRef, exc: BaseException) -> RegistryError:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, ssl.SSLCertVerificationError):
            return RegistryError(
                f"{ref.api_host}'s TLS certificate is not trusted: {reason.verify_message}",
                hint="give the CA that signed it with --ca-bundle CA.pem (a private registry or an "
                     "intercepting proxy)",
            )
        return RegistryError(
            f"registry {ref.api_host} is unreachable: {reason}",
            hint="check the network or proxy, or build from a reachable mirror with --base-image",
        )

    def manifest(self, ref: ImageRef, reference: str | None = None) -> Manifest:
        reference = reference or ref.digest or ref.tag
        body, headers = self._get(ref, f"manifests/{reference}", MANIFEST_TYPES)
        digest = headers.get("docker-content-digest") or "sha256:" + hashlib.sha256(body).hexdigest()
        data = json.loads(body)
        return Manifest(digest, headers.get("content-type", data.get("mediaType", "")), data)

    def resolve_digest(self, ref: str) -> str:
        """The digest a tag points to now (the index digest for multi-platform images)."""
        return self.manifest(parse_ref(ref)).digest

    def image_config(self, ref: str, platform: str = "linux/amd64") -> tuple[str, dict[str, Any]]:
        """(top-level digest, config JSON) for one platform, reading only manifests and the config blob."""
        parsed = parse_ref(ref)
        top = self.manifest(parsed)
        man = top
        if top.media_type in _INDEX_TYPES or "manifests" in top.body:
            os_, arch = platform.split("/")
            chosen = [
                m
                for m in top.body.get("manifests", [])
                if m.get("platform", {}).get("os") == os_ and m.get("platform", {}).get("architecture") == arch
            ]
            if not chosen:
                raise RegistryError(f"{ref} has no {platform} image")
            man = self.manifest(parsed, chosen[0]["digest"])
        config_digest = man.body.get("config", {}).get("digest")
        if not config_digest:
            raise RegistryError(f"{ref}: manifest has no config blob")
        body, _ = self._get(parsed, f"blobs/{config_digest}", "application/json")
        return top.digest, json.loads(body)


def _speaks_tls(host: str) -> bool:
    """Whether HOST[:PORT] answers a TLS handshake (any certificate); False when it answers plain HTTP or
    cannot be reached, so that the real request says what is wrong."""
    import socket

    name, _, port = host.rpartition(":") if not host.endswith("]") else (host, "", "")
    if not name or not port.isdigit():
        name, port = host, "443"
    name = name.strip("[]")
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # only the protocol is asked here; the request itself verifies
    try:
        with socket.create_connection((name, int(port)), timeout=TIMEOUT) as sock, \
                ctx.wrap_socket(sock, server_hostname=name):
            return True
    except ssl.SSLError:
        return False
    except OSError:
        return True
