"""A small Docker Registry HTTP API v2 client: tags to digests, manifests and config blobs.

Only manifests and config blobs are read, never layers, so resolving or syncing costs kilobytes. Auth
follows the anonymous bearer-token flow nvcr.io and Docker Hub use (401 + WWW-Authenticate -> token).
"""

from __future__ import annotations

import hashlib
import json
import re
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from envpin.errors import RegistryError
from envpin.probe import imageref
from envpin.probe.imageref import ImageRef

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
    """Anonymous (or token) access to one registry; keeps the bearer token per repository scope."""

    def __init__(self, ca_file: str | None = None) -> None:
        self._tokens: dict[str, str] = {}
        self._ssl = ssl.create_default_context(cafile=ca_file) if ca_file else ssl.create_default_context()

    def _open(self, url: str, headers: dict[str, str], method: str = "GET") -> tuple[bytes, dict[str, str]]:
        req = urllib.request.Request(url, headers=headers, method=method)
        with urllib.request.urlopen(req, timeout=TIMEOUT, context=self._ssl) as resp:
            return resp.read(), {k.lower(): v for k, v in resp.headers.items()}

    def _get(self, ref: ImageRef, path: str, accept: str) -> tuple[bytes, dict[str, str]]:
        url = f"{ref.base_url}/{path}"
        headers = {"Accept": accept, "User-Agent": "envpin"}
        scope = ref.repository
        if scope in self._tokens:
            headers["Authorization"] = f"Bearer {self._tokens[scope]}"
        try:
            return self._open(url, headers)
        except urllib.error.HTTPError as exc:
            exc.close()  # the error response holds an open socket
            if exc.code == 401 and "Authorization" not in headers:
                self._tokens[scope] = self._token(ref, exc.headers.get("WWW-Authenticate", ""))
                headers["Authorization"] = f"Bearer {self._tokens[scope]}"
                try:
                    return self._open(url, headers)
                except urllib.error.HTTPError as exc2:
                    exc2.close()
                    raise self._http_error(ref, exc2) from exc2
                except (urllib.error.URLError, OSError) as exc2:
                    raise self._unreachable(ref, exc2) from exc2
            raise self._http_error(ref, exc) from exc
        except (urllib.error.URLError, OSError) as exc:
            raise self._unreachable(ref, exc) from exc

    def _token(self, ref: ImageRef, challenge: str) -> str:
        if not challenge.lower().startswith("bearer "):
            raise RegistryError(
                f"{ref.api_host} requires authentication",
                hint=f"run `docker login {ref.api_host}` (NGC: nvcr.io) and retry",
            )
        params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
        realm = params.pop("realm", None)
        if not realm:
            raise RegistryError(f"{ref.api_host} sent an unusable auth challenge: {challenge}")
        params.setdefault("scope", f"repository:{ref.repository}:pull")
        url = realm + ("&" if "?" in realm else "?") + urllib.parse.urlencode(params)
        try:
            body, _ = self._open(url, {"User-Agent": "envpin"})
        except urllib.error.HTTPError as exc:
            exc.close()
            raise RegistryError(
                f"{ref.api_host} refused an anonymous token for {ref.repository} (HTTP {exc.code})",
                hint=f"run `docker login {ref.api_host}` and retry",
            ) from exc
        except (urllib.error.URLError, OSError) as exc:
            raise self._unreachable(ref, exc) from exc
        data = json.loads(body)
        token = data.get("token") or data.get("access_token")
        if not token:
            raise RegistryError(f"{ref.api_host}'s token endpoint returned no token")
        return str(token)

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
