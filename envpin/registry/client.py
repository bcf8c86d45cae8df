"""A small Docker Registry HTTP API v2 client: tags to digests, manifests and config blobs.

Only manifests and config blobs are read, never layers, so resolving or syncing costs kilobytes. Auth
is docker's: the challenge (401 + WWW-Authenticate) picks Basic or a bearer token, with the login that
`docker login` stored (envpin.registry.logins) or anonymously, as nvcr.io and Docker Hub allow for public images.

Nothing unverified leaves this module: every manifest, index and config blob is hashed and compared with
the digest it was asked by or is returned under (envpin.registry.digests), and every request runs under
a deadline, a size limit and a redirect policy that keeps logins at their origin (envpin.registry.transport).
"""

from __future__ import annotations

import re
import ssl
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from envpin.errors import RegistryError, param, shown
from envpin.files.read import parse_json
from envpin.portable import imageref
from envpin.portable.imageref import ImageRef
from envpin.record import Value
from envpin.registry import digests, logins, transport
from envpin.registry.logins import Credentials
from envpin.registry.transport import Response, Transport, shown_origin

MANIFEST_TYPES = ", ".join(
    [
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    ]
)
_INDEX_TYPES = ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")
_TOKEN = re.compile(r"[\x21-\x7e]+\Z")
_BROKEN_HINT = "the registry, or a proxy in between, sent something that is not what was asked for; check it"


@dataclass(frozen=True, slots=True)
class Limits(Value):
    """How much one registry answer may hold; beyond these envpin refuses with an error (docs/registries.md)."""

    #: A manifest or image index: distribution's own limit for a manifest it accepts.
    manifest_bytes: int = 4 << 20
    #: An image config blob: NGC's are tens of kilobytes; the largest real ones (long histories) under 1 MiB.
    config_bytes: int = 8 << 20
    #: The entries of an image index: real multi-platform indexes (attestations included) list a few dozen.
    index_entries: int = 1024
    #: A token service's answer (a JWT of a few kilobytes).
    token_bytes: int = 1 << 20


class NotFound(RegistryError):
    """HTTP 404: the registry does not hold the tag or manifest (`catalog sync` reports it and goes on)."""


class Unreachable(RegistryError):
    """No answer from the registry (network, proxy, DNS): a command that can do without it says how."""


def parse_ref(ref: str) -> ImageRef:
    """A reference the registry can be asked about (tag or digest required), as a RegistryError if not."""
    try:
        return imageref.parse(ref, need_version=True)
    except imageref.RefError as exc:
        raise RegistryError(exc.message, hint=exc.hint) from None


@dataclass(slots=True)
class Manifest(Value):
    """A manifest or image index as read and verified: `digest` is what its content hashes to."""

    digest: str
    media_type: str
    body: dict[str, Any]
    #: Its length in bytes, for the size its parent descriptor declares.
    size: int = 0


class RegistryClient:
    """Access to registries as docker has it: the login `docker login` stored (dockerauth), Basic or bearer
    token auth as the registry's challenge asks, HTTPS verified against the system CAs plus `ca_file`.

    Loopback registries (127.0.0.0/8, localhost, [::1]) are what docker treats as insecure by default: HTTPS
    is tried first and plain HTTP only when the port answers HTTP, never after a certificate error.

    `deadline` bounds each request in seconds (all of it, not each read); `limits` bounds what is read."""

    def __init__(
        self,
        ca_file: str | None = None,
        credentials: Callable[[str], Credentials | None] | None = None,
        *,
        deadline: float = transport.DEADLINE,
        limits: Limits | None = None,
    ) -> None:
        self._auth: dict[tuple[str, str], str] = {}  # (api host, repository) -> Authorization header
        self._schemes: dict[str, str] = {}
        self._credentials = credentials or logins.lookup
        self._ssl = ssl.create_default_context()
        if ca_file:
            self._ssl.load_verify_locations(cafile=ca_file)  # added to the system CAs, not instead of them
        self.limits = limits or Limits()
        self._http = Transport(self._ssl, deadline)

    def _url(self, ref: ImageRef, path: str) -> str:
        """The API URL; for a loopback host the first request finds out whether it speaks TLS."""
        host = ref.api_host
        scheme = self._schemes.get(host)
        if scheme is None:
            scheme = "https"
            if imageref.is_loopback(host) and not self._http.speaks_tls(host):
                scheme = "http"
            self._schemes[host] = scheme
        return f"{scheme}://{host}/v2/{ref.repository}/{path}"

    def _fetch(
        self,
        ref: ImageRef,
        url: str,
        headers: dict[str, str],
        *,
        limit: int,
        thing: str,
        auth_origin: transport.Origin | None = None,
        method: str = "GET",
        data: bytes | None = None,
    ) -> Response:
        try:
            return self._http.fetch(
                url, headers, limit=limit, thing=thing, auth_origin=auth_origin, method=method, data=data
            )
        except OSError as exc:
            raise self._unreachable(ref, exc) from exc

    def _get(self, ref: ImageRef, path: str, accept: str, limit: int, thing: str) -> Response:
        """A 2xx answer for PATH under the repository, authenticating once when the registry asks to.
        The login is bound to the registry's own origin: redirects elsewhere never carry it."""
        url = self._url(ref, path)
        home = transport.origin(url)
        headers = {"Accept": accept, "User-Agent": "envpin"}
        scope = (ref.api_host, ref.repository)
        if scope in self._auth:
            headers["Authorization"] = self._auth[scope]
        resp = self._fetch(ref, url, headers, limit=limit, thing=thing, auth_origin=home)
        if resp.status == 401 and "Authorization" not in headers:
            if transport.origin(resp.url) != home:
                raise RegistryError(
                    f"{ref.api_host} redirected the request for {thing} to "
                    f"{shown_origin(resp.url)}, which asks for a login",
                    hint=f"envpin sends the login for {ref.registry} to {ref.api_host} only; "
                    "check the registry's redirects",
                )
            creds = self._credentials(ref.registry)
            self._auth[scope] = headers["Authorization"] = self._authorize(
                ref, resp.headers.get("www-authenticate", ""), creds
            )
            resp = self._fetch(ref, url, headers, limit=limit, thing=thing, auth_origin=home)
            if resp.status == 401 and creds is not None:
                raise self._refused(ref, creds)
        if not 200 <= resp.status < 300:
            raise self._http_error(ref, resp.status)
        return resp

    def _authorize(self, ref: ImageRef, challenge: str, creds: Credentials | None) -> str:
        """The Authorization header the challenge asks for: Basic with the stored login, or a bearer token
        from the realm (fetched with the login when there is one, anonymously otherwise). As docker does, the
        login goes to the realm, which may be another host (auth.docker.io); unlike docker, only over HTTPS
        (plain HTTP to loopback hosts), and never along a redirect to another origin."""
        kind = challenge.split(" ", 1)[0].lower()
        if kind == "basic":
            if creds is None:
                raise RegistryError(
                    f"{ref.api_host} requires a login for {ref.repository}",
                    hint=f"run `docker login {ref.registry}` and retry",
                )
            return creds.basic()
        if kind != "bearer":
            raise RegistryError(
                f"{ref.api_host} requires authentication of a kind envpin does not speak ({shown(kind)})",
                hint="use a registry with Basic or bearer-token auth",
            )
        params = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
        realm = params.pop("realm", None)
        if not realm or not realm.startswith(("https://", "http://")):
            raise RegistryError(
                f"{ref.api_host} sent an unusable auth challenge: {shown(challenge)}",
                hint="check the registry's auth configuration",
            )
        problem = transport.url_problem(realm)
        if problem:
            raise RegistryError(
                f"{ref.api_host}'s auth challenge names the token service {problem}",
                hint="envpin asks for tokens over HTTPS only (plain HTTP on loopback hosts); "
                "check the registry's auth configuration",
            )
        params.setdefault("scope", f"repository:{ref.repository}:pull")
        thing = f"a token for {ref.repository}"
        limit = self.limits.token_bytes
        if creds is not None and creds.identity_token:
            # An OAuth2 refresh token (docker's identitytoken) is exchanged with a POST.
            form = {
                "grant_type": "refresh_token",
                "refresh_token": creds.secret,
                "client_id": "envpin",
                "service": params.get("service", ""),
                "scope": params["scope"],
            }
            resp = self._fetch(
                ref,
                realm,
                {"User-Agent": "envpin", "Content-Type": "application/x-www-form-urlencoded"},
                limit=limit,
                thing=thing,
                method="POST",
                data=urllib.parse.urlencode(form).encode(),
            )
        else:
            url = realm + ("&" if "?" in realm else "?") + urllib.parse.urlencode(params)
            headers = {"User-Agent": "envpin"}
            if creds is not None:
                headers["Authorization"] = creds.basic()
                url += "&" + urllib.parse.urlencode({"account": creds.username})
            resp = self._fetch(ref, url, headers, limit=limit, thing=thing, auth_origin=transport.origin(url))
        if not 200 <= resp.status < 300:
            raise self._token_refused(ref, creds, resp.status)
        try:
            data = parse_json(resp.body.decode("utf-8"), "the token answer", RegistryError)
            token = data.get("token") or data.get("access_token")
        except (RegistryError, UnicodeDecodeError, AttributeError):
            token = None
        if not token or not isinstance(token, str):
            raise RegistryError(
                f"{ref.api_host}'s token endpoint returned no token", hint="check the registry's auth service"
            )
        if not _TOKEN.match(token):  # it becomes a header: no spaces, line breaks or non-ASCII
            raise RegistryError(
                f"{ref.api_host}'s token endpoint returned a token that cannot be sent (not printable ASCII)",
                hint="check the registry's auth service",
            )
        return f"Bearer {token}"

    @staticmethod
    def _token_refused(ref: ImageRef, creds: Credentials | None, code: int) -> RegistryError:
        if creds is not None and code in (400, 401, 403):
            return RegistryClient._refused(ref, creds)
        if creds is not None:
            return RegistryError(
                f"{ref.api_host}'s token endpoint answered HTTP {code} for {ref.repository}",
                hint="check the registry's auth service",
            )
        return RegistryError(
            f"{ref.api_host} refused an anonymous token for {ref.repository} (HTTP {code})",
            hint=f"run `docker login {ref.registry}` and retry",
        )

    @staticmethod
    def _refused(ref: ImageRef, creds: Credentials) -> RegistryError:
        who = "the stored token" if creds.identity_token else f"user '{shown(creds.username)}'"
        return RegistryError(
            f"{ref.api_host} refused the login of {who} (from {creds.origin}) for {ref.repository}",
            hint=f"check the user name and password with `docker login {ref.registry}`, then retry",
        )

    @staticmethod
    def _http_error(ref: ImageRef, code: int) -> RegistryError:
        if code in (401, 403):
            return RegistryError(
                f"{ref.api_host} requires authentication for {ref.repository} (HTTP {code})",
                hint=f"run `docker login {ref.api_host}` and retry",
            )
        if code == 404:
            what = ref.tag or ref.digest
            return NotFound(
                f"{ref.api_host}/{ref.repository} has no tag or manifest '{what}'",
                hint="check the release with `envpin catalog`, or the mirror's contents",
            )
        return RegistryError(
            f"{ref.api_host} answered HTTP {code} for {ref}", hint="check the registry, or retry later"
        )

    @staticmethod
    def _unreachable(ref: ImageRef, exc: BaseException) -> RegistryError:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, ssl.SSLCertVerificationError):
            return RegistryError(
                f"{ref.api_host}'s TLS certificate is not trusted: {reason.verify_message}",
                hint=f"give the CA that signed it with {param('ca_bundle')} CA.pem (a private registry or an "
                "intercepting proxy)",
            )
        return Unreachable(
            f"registry {ref.api_host} is unreachable: {shown(reason, 200)}",
            hint=f"check the network or proxy, or build from a reachable mirror with {param('base_image')}",
        )

    @staticmethod
    def _json(body: bytes, what: str, where: str) -> dict[str, Any]:
        """A verified body as a JSON object (depth- and number-limited like all JSON envpin reads)."""
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            raise RegistryError(f"{where}: the {what} is not UTF-8 JSON", hint=_BROKEN_HINT) from None
        data = parse_json(text, f"{where}: the {what}", RegistryError, hint=_BROKEN_HINT)
        if not isinstance(data, dict):
            raise RegistryError(f"{where}: the {what} is not a JSON object", hint=_BROKEN_HINT)
        return data

    def manifest(self, ref: ImageRef, reference: str | None = None) -> Manifest:
        """The manifest or index for `reference` (default: the ref's digest, else its tag), verified: asked by
        digest, the content must hash to that digest; asked by tag, the digest returned is the content's hash,
        and a Docker-Content-Digest header that says otherwise is an error."""
        reference = reference or ref.digest or ref.tag or ""
        by_digest = ":" in reference  # a tag never holds ':'
        where = f"{ref.name}@{reference}" if by_digest else f"{ref.name}:{reference}"
        if by_digest:
            digests.require(reference, "the digest asked for", where)  # before it becomes part of a URL
        resp = self._get(
            ref, f"manifests/{reference}", MANIFEST_TYPES, self.limits.manifest_bytes, f"the manifest of {where}"
        )
        body = resp.body
        digest = (
            digests.verify(body, reference, "the manifest", "the digest it was asked by", where) if by_digest else None
        )
        header = resp.headers.get("docker-content-digest")
        if header is not None:
            header = digests.require(header.strip(), "the Docker-Content-Digest header", where)
            digests.verify(body, header, "the manifest", "the registry's Docker-Content-Digest header", where)
        if digest is None:
            digest = header or digests.compute(body)
        data = self._json(body, "manifest", where)
        media_type = resp.headers.get("content-type", "").split(";", 1)[0].strip()
        return Manifest(digest, media_type or str(data.get("mediaType", "")), data, len(body))

    def resolve_digest(self, ref: str) -> str:
        """The digest a tag points to now (the index digest for multi-platform images), verified."""
        return self.manifest(parse_ref(ref)).digest

    def image_config(self, ref: str, platform: str = "linux/amd64") -> tuple[str, dict[str, Any]]:
        """(top-level digest, config JSON) for one platform, reading only manifests and the config blob; each
        is checked against the digest that names it before anything is returned."""
        parsed = parse_ref(ref)
        where = parsed.canonical
        top = self.manifest(parsed)
        man = top
        if top.media_type in _INDEX_TYPES or "manifests" in top.body:
            man = self._platform_manifest(parsed, top, platform, where)
        config = man.body.get("config")
        if not isinstance(config, dict) or not config.get("digest"):
            raise RegistryError(
                f"{where}: manifest has no config blob",
                hint="envpin reads Docker v2 and OCI image manifests; check the reference",
            )
        config_digest = digests.require(config.get("digest"), "the manifest's config descriptor", where)
        resp = self._get(
            parsed,
            f"blobs/{config_digest}",
            "application/json",
            self.limits.config_bytes,
            f"the image config of {where}",
        )
        digests.verify(resp.body, config_digest, "the image config", "the digest its manifest names", where)
        digests.check_size(config.get("size"), len(resp.body), "the image config", where)
        return top.digest, _config_shape(self._json(resp.body, "image config", where), where)

    def _platform_manifest(self, ref: ImageRef, index: Manifest, platform: str, where: str) -> Manifest:
        """The verified manifest an image index lists for `platform` ('os/architecture')."""
        entries = index.body.get("manifests")
        if not isinstance(entries, list):
            raise RegistryError(f"{where}: the image index has no list of manifests", hint=_BROKEN_HINT)
        if len(entries) > self.limits.index_entries:
            raise RegistryError(
                f"{where}: the image index lists {len(entries):,} manifests, more than the "
                f"{self.limits.index_entries:,} envpin reads",
                hint=transport.LIMITS_HINT,
            )
        os_, _, arch = platform.partition("/")
        chosen = [
            m
            for m in entries
            if isinstance(m, dict)
            and isinstance(m.get("platform"), dict)
            and m["platform"].get("os") == os_
            and m["platform"].get("architecture") == arch
        ]
        if not chosen:
            raise RegistryError(
                f"{where} has no {platform} image", hint="envpin reads the linux/amd64 image of a multi-platform tag"
            )
        child = digests.require(chosen[0].get("digest"), f"the image index's entry for {platform}", where)
        man = self.manifest(ref, child)
        digests.check_size(chosen[0].get("size"), man.size, "the manifest", f"{ref.name}@{child}")
        return man


def _config_shape(data: dict[str, Any], where: str) -> dict[str, Any]:
    """An image config whose fields envpin reads have the types the OCI image spec gives them (config an
    object, Env a list of strings, Labels an object of strings, created a string); anything else is one
    RegistryError here, so nothing past the registry layer meets a list where an object belongs."""

    def bad(field: str, want: str) -> RegistryError:
        return RegistryError(f"{where}: the image config's {field} is not {want}", hint=_BROKEN_HINT)

    created = data.get("created")
    if created is not None and not isinstance(created, str):
        raise bad("'created'", "a string")
    cfg = data.get("config")
    if cfg is None:
        return data
    if not isinstance(cfg, dict):
        raise bad("'config'", "an object")
    env = cfg.get("Env")
    if env is not None and (not isinstance(env, list) or not all(isinstance(e, str) for e in env)):
        raise bad("'config.Env'", "a list of strings")
    labels = cfg.get("Labels")
    if labels is not None and (not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values())):
        raise bad("'config.Labels'", "an object of strings")
    return data
