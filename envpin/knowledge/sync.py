"""`envpin catalog sync`: read what each NGC image declares about itself and compare it with the catalog.

NVIDIA's release notes are incomplete and sometimes wrong, but every NGC image states its own versions in its
config (ENV and labels). Reading them costs one or two manifests and one config blob per tag, never a layer, so
refreshing the whole catalog moves a few hundred kilobytes. Image facts are recorded beside the release-notes
values (a flavor's "image" object), never over them: each fact is stored once, with its own provenance.
Facts read from a mirror are kept under the mirror's name and digest; which of them speak for a catalog tag is
the catalog's rule (envpin.knowledge.trust), which the report and JSON show as `grade`.
What a config declares, and how it compares with the catalog, is envpin.knowledge.imageconfig; this module
is the registry side: which repository, reading each tag, the result, writing the catalog and the cache.
"""

from __future__ import annotations

import copy
import json
import re
import ssl
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envpin.errors import RegistryError, UsageError, param, shown
from envpin.files.write import atomic_write
from envpin.knowledge import catalog, facts
from envpin.knowledge.catalog import Catalog, Entry
from envpin.knowledge.fields import IMAGE_SOURCE
from envpin.knowledge.imageconfig import (
    AGREES,
    DISAGREES,
    FAILING,
    FILLED,
    MORE_PRECISE,
    Comparison,
    compare,
    declared_from_config,
    parse_env,
)
from envpin.knowledge.versions import release_index
from envpin.portable.imageref import is_digest, is_loopback, is_registry_host, is_repository_path
from envpin.record import Value
from envpin.registry.client import NotFound, RegistryClient, parse_ref

DEFAULT_REGISTRY = "https://nvcr.io"


# -- the registry side --------------------------------------------------------------------------------------------
def repository_for(registry: str, upstream: str) -> str:
    """Where the catalog's tags live in `registry`: 'HOST[/PREFIX]' -> 'HOST[/PREFIX]/nvidia/tensorflow'.

    `upstream` is the catalog's repository (nvcr.io/nvidia/tensorflow). Mirrors usually keep NVIDIA's path under
    a project prefix, so a path after the host is that prefix; a path that already ends in nvidia/tensorflow is
    taken as the whole repository. http:// is accepted for loopback registries only (that is all the client
    speaks plain HTTP to); everything else is HTTPS.
    """
    text = registry.strip().rstrip("/")
    scheme = None
    m = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", text)
    if m:
        scheme = m.group(1).lower()
        text = text[m.end() :]
        if scheme not in ("http", "https"):
            raise UsageError(
                f"{param('registry')} '{registry}': scheme {scheme}:// is not supported", hint="use https://HOST"
            )
    host, _, path = text.partition("/")
    if not is_registry_host(host):
        raise UsageError(
            f"{param('registry')} '{registry}' does not start with a registry host",
            hint="give HOST[:PORT][/PREFIX] with a dot or a port in HOST, e.g. nvcr.io or 127.0.0.1:5000/mirror",
        )
    if path and not is_repository_path(path):
        raise UsageError(
            f"{param('registry')} '{registry}': '{path}' is not a repository path",
            hint="repository paths are lower-case letters, digits, '.', '_', '-' and '/'",
        )
    up_path = upstream.split("/", 1)[1]
    if not path:
        repo = up_path
    elif path == up_path or path.endswith("/" + up_path):
        repo = path
    else:
        repo = f"{path}/{up_path}"
    plain = is_loopback(host)
    if scheme == "http" and not plain:
        raise UsageError(
            f"{param('registry')} '{registry}': plain HTTP is used only for loopback registries",
            hint=f"use https://{host}",
        )
    if scheme == "https" and plain:
        raise UsageError(
            f"{param('registry')} '{registry}': loopback registries are reached over plain HTTP",
            hint=f"use http://{text}",
        )
    return f"{host}/{repo}"


def _not_found(exc: RegistryError) -> bool:
    """A 404 from the registry (unknown tag or manifest), as opposed to unreachable, refused or unverifiable."""
    return isinstance(exc, NotFound)


def registry_client(ca_bundle: Path | None) -> RegistryClient:
    """A registry client trusting `ca_bundle` as well (a TLS-intercepting proxy), checked before any request."""
    if ca_bundle is None:
        return RegistryClient()
    if not ca_bundle.is_file():
        raise UsageError(f"CA bundle {ca_bundle} does not exist", hint=f"give a PEM file with {param('ca_bundle')}")
    try:
        return RegistryClient(ca_file=str(ca_bundle))
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"CA bundle {ca_bundle} cannot be used: {exc}", hint="give a PEM file") from exc


@dataclass(slots=True)
class TagResult(Value):
    """What one tag's image declares, how it compares, or why it could not be read."""

    entry: Entry
    ref: str
    image: dict[str, Any] | None = None
    comparisons: tuple[Comparison, ...] = ()
    missing: str | None = None
    #: The grade what was read gets once kept: "image" (outranks the written sources), "mirror" (fills only
    #: unknown values) or None (another config speaks for the tag).
    grade: str | None = None

    @property
    def status(self) -> str:
        if self.missing is not None:
            return "missing"
        return DISAGREES if any(c.status in FAILING for c in self.comparisons) else AGREES

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "tag": self.entry.tag,
            "release": self.entry.release,
            "flavor": self.entry.flavor,
            "ref": self.ref,
            "status": self.status,
        }
        if self.missing is not None:
            out["error"] = self.missing
        else:
            out["image"] = self.image
            out["fields"] = {c.field: c.to_json() for c in self.comparisons}
            out["grade"] = self.grade
        return out


@dataclass(slots=True)
class SyncResult(Value):
    repository: str
    catalog: str
    tags: list[TagResult]
    written: Path | None = None
    #: The image-facts cache updated with what was read (None with save=False).
    cache: Path | None = None
    #: Known values per kind of evidence ("unknown" for nulls) over the whole catalog as every command sees
    #: it, before and after the facts read here are kept in the cache (with --no-save: would be kept).
    coverage_before: dict[str, int] = field(default_factory=dict)
    coverage_after: dict[str, int] = field(default_factory=dict)
    #: The catalog's own repository (nvcr.io/nvidia/tensorflow): what another one declares is graded "mirror".
    upstream: str = ""

    @property
    def mirror(self) -> bool:
        """Read from another repository than the catalog's: its facts apply only where envpin.knowledge.trust
        lets them (a recorded digest), else they fill unknown values only."""
        return bool(self.upstream) and self.repository != self.upstream

    def counts(self) -> dict[str, int]:
        """Tags read/missing and field statuses over all tags (for the summary line and the JSON)."""
        out = {"tags": len(self.tags), "read": 0, "missing": 0, AGREES: 0, MORE_PRECISE: 0, FILLED: 0, DISAGREES: 0}
        for t in self.tags:
            out["missing" if t.missing is not None else "read"] += 1
            for c in t.comparisons:
                out[c.status] += 1
        return out

    @property
    def exit_code(self) -> int:
        return 1 if any(t.status == DISAGREES for t in self.tags) else 0

    def to_json(self) -> dict[str, Any]:
        return {
            "repository": self.repository,
            "upstream": self.upstream,
            "catalog": self.catalog,
            "summary": self.counts(),
            "tags": [t.to_json() for t in self.tags],
            "written": str(self.written) if self.written else None,
            "cache": str(self.cache) if self.cache else None,
            "coverage": {"before": self.coverage_before, "after": self.coverage_after},
            "exit_code": self.exit_code,
        }


def select_entries(cat: Catalog, releases: Sequence[str]) -> list[Entry]:
    """All catalog tags, or those of the given releases/tags ('20.03', '20.03-tf2-py3'), in catalog order."""
    if not releases:
        return cat.entries()
    from envpin.knowledge.stock import names_stock_tag
    from envpin.portable.versions import SpecError, parse_ngc_spec

    chosen: dict[str, Entry] = {}
    for text in releases:
        for item in (x.strip() for x in text.split(",") if x.strip()):
            if names_stock_tag(item):
                raise UsageError(
                    f"{param('releases')} {shown(item)} is a stock TensorFlow GPU image; catalog sync reads NGC "
                    "tags from nvcr.io/nvidia/tensorflow or a mirror of it",
                    hint=f"envpin catalog show {shown(item)} gives its sources; `{param('image', command='probe')} "
                    "IMAGE` reads what the image itself holds",
                )
            try:
                parse_ngc_spec(item)
            except SpecError as exc:  # its shape hint speaks of the `ngc` parameter: this one is `releases`
                shape = exc.message.endswith("is not an NGC TensorFlow release")
                given = param("releases")
                raise UsageError(
                    exc.message,
                    hint=f"give YY.MM or a tag, e.g. {given} 20.02 or {given} 20.02-tf2-py3" if shape else exc.hint,
                ) from None
            # No notices: sync compares every value itself, and what it reads may replace what they are about.
            chosen.update((e.tag, e) for e in cat.select(item, notify=False))
    return sorted(chosen.values(), key=lambda e: (release_index(e.release), e.flavor))


@dataclass(frozen=True, slots=True)
class ImageRead(Value):
    """One image config as read from a registry: the digest the reference resolved to, the config's ENV, and
    the catalog's "image" object for it."""

    ref: str
    digest: str
    env: dict[str, str]
    image: dict[str, Any]
    origin: dict[str, str]

    @property
    def declared(self) -> dict[str, Any]:
        declared: dict[str, Any] = self.image["declared"]
        return declared


def read_image(client: RegistryClient, ref: str) -> ImageRead:
    """Manifest(s) and config blob of `ref` (never a layer), each verified against its digest by the client.
    Registry errors, unverifiable content included, raise RegistryError: nothing unverified is returned, so
    nothing unverified reaches a Dockerfile, a lock or the image-facts cache."""
    repository = parse_ref(ref).name
    digest, config = client.image_config(ref)
    if not is_digest(digest) or not isinstance(config, dict):  # the client's promise, kept at the cache's door
        raise RegistryError(
            f"{ref}: the registry client returned an unverified digest or config", hint="report this as a bug in envpin"
        )
    declared, origin = declared_from_config(config)
    created = config.get("created")
    image = {
        "digest": digest,
        "created": created if isinstance(created, str) and created else None,
        "registry": repository,
        "declared": declared,
        "source": IMAGE_SOURCE,
    }
    env = parse_env((config.get("config") or {}).get("Env") or [])
    return ImageRead(ref, digest, env, image, origin)


def read_tag(client: RegistryClient, entry: Entry, repository: str) -> TagResult:
    """One catalog tag from `repository`; a 404 is a result ("missing"), other registry errors raise."""
    ref = f"{repository}:{entry.tag}"
    try:
        got = read_image(client, ref)
    except RegistryError as exc:
        if _not_found(exc):
            return TagResult(entry, ref, missing=exc.message)
        raise
    comparisons = compare(entry, got.declared, got.origin, got.digest, repository)
    recorded = entry.recorded_digest(repository)
    if recorded and not any(c.field == "digest" for c in comparisons):
        # Read from this repository before (kept in the cache): a new digest means the tag was re-pushed there.
        status = AGREES if recorded == got.digest else DISAGREES
        comparisons.append(Comparison("digest", recorded, got.digest, status, "manifest"))
    return TagResult(entry, ref, got.image, tuple(comparisons))


def updated_catalog(cat: Catalog, results: Iterable[TagResult]) -> dict[str, Any]:
    """The catalog data with each read tag's "image" object replaced; release-notes values are untouched."""
    return catalog.with_images(cat.data, read_images(results))


def read_images(results: Iterable[TagResult]) -> dict[str, dict[str, Any]]:
    """Image objects by tag, for the tags that were read."""
    return {r.entry.tag: copy.deepcopy(r.image) for r in results if r.image is not None}


def coverage_by_kind(cat: Catalog) -> dict[str, int]:
    """Known values per kind of evidence over the whole catalog; "unknown" counts the nulls."""
    out: dict[str, int] = {}
    for (_, kind), n in sorted(catalog.coverage(cat.entries()).items(), key=lambda x: str(x[0][1])):
        out[kind or "unknown"] = out.get(kind or "unknown", 0) + n
    return out


def dump_catalog(data: dict[str, Any]) -> bytes:
    """The canonical form of the shipped catalog.json, so a refreshed file diffs cleanly against it."""
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def sync_catalog(
    registry: str = DEFAULT_REGISTRY,
    releases: Sequence[str] = (),
    write: Path | None = None,
    ca_bundle: Path | None = None,
    progress: Callable[[str], None] | None = None,
    save: bool = True,
) -> SyncResult:
    """Read each selected tag's config from `registry`, compare with the catalog, record what was read in the
    user's image-facts cache (unless save=False), and optionally write a refreshed copy of the catalog.

    Tags the registry does not hold are reported and skipped; an unreachable registry or refused access stops
    the run (RegistryError), as does a registry that holds none of the selected tags (almost always a wrong
    repository prefix).
    """
    cat = catalog.load()
    repository = repository_for(registry, cat.repository)
    entries = select_entries(cat, releases)
    client = registry_client(ca_bundle)
    results: list[TagResult] = []
    for i, entry in enumerate(entries, 1):
        if progress:
            progress(f"[{i}/{len(entries)}] {repository}:{entry.tag}")
        results.append(read_tag(client, entry, repository))
    if results and all(r.missing is not None for r in results):
        raise RegistryError(
            f"{repository} holds none of the {len(results)} selected tags (first: {results[0].missing})",
            hint=f"check {param('registry')}: the tags must be at HOST[/PREFIX]/nvidia/tensorflow:TAG",
        )
    images = read_images(results)
    # As every command sees the catalog once what was read here is kept (the cache's rule, not --write's).
    kept = {**cat.cached, **{(image["registry"], tag): image for tag, image in images.items()}}
    after = Catalog(cat.data, f"{cat.origin} + what {repository} declares", kept)
    graded = {e.tag: e for e in after.entries()}
    for r in results:
        if r.image is not None:
            r.grade = next(
                (u.grade for u in graded[r.entry.tag].images if u.cached and u.image["registry"] == repository), None
            )
    result = SyncResult(
        repository,
        cat.origin,
        results,
        coverage_before=coverage_by_kind(cat),
        coverage_after=coverage_by_kind(after),
        upstream=cat.repository,
    )
    if write is not None:
        # The catalog file in use plus what was read here (never the rest of this user's cache).
        data = updated_catalog(cat, results)
        catalog.validate(data, f"the refreshed catalog for {write}")
        atomic_write(write, dump_catalog(data), make_parents=False)
        result.written = write
    if save and images:
        result.cache = facts.save(cat.repository, images)
    return result
