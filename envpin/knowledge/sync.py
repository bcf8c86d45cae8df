"""`envpin catalog sync`: read what each NGC image declares about itself and compare it with the catalog.

NVIDIA's release notes are incomplete and sometimes wrong, but every NGC image states its own versions in its
config (ENV and labels). Reading them costs one or two manifests and one config blob per tag, never a layer, so
refreshing the whole catalog moves a few hundred kilobytes. Image facts are recorded beside the release-notes
values (a flavor's "image" object), never over them: each fact is stored once, with its own provenance.
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

from envpin.errors import RegistryError, UsageError
from envpin.fsutil import atomic_write
from envpin.knowledge import catalog, facts
from envpin.knowledge.catalog import IMAGE_SOURCE, Catalog, Entry
from envpin.knowledge.versions import release_index
from envpin.portable.imageref import is_digest, is_loopback, is_registry_host, is_repository_path
from envpin.portable.versions import components, parse_version
from envpin.registry.client import NotFound, RegistryClient, parse_ref

DEFAULT_REGISTRY = "https://nvcr.io"

#: catalog key <- ENV variables NGC images set, first present wins.
ENV_KEYS: dict[str, tuple[str, ...]] = {
    "tf_version": ("TENSORFLOW_VERSION",),
    "cuda": ("CUDA_VERSION",),
    "cudnn": ("CUDNN_VERSION",),
    "nccl": ("NCCL_VERSION",),
    "cublas": ("CUBLAS_VERSION",),
    "tensorrt": ("TRT_VERSION", "TENSORRT_VERSION"),
    "horovod": ("HOROVOD_VERSION",),
    "python": ("PYTHON_VERSION", "PYVER"),
    # The driver the CUDA toolkit shipped with: what the release notes call "requires driver X or later".
    "driver_min": ("CUDA_DRIVER_VERSION",),
    "build_id": ("NVIDIA_BUILD_ID",),
    "nvidia_tensorflow_version": ("NVIDIA_TENSORFLOW_VERSION",),
}
#: Labels NGC images carry as well; used only when the ENV variable is absent.
LABEL_KEYS: dict[str, str] = {
    "tf_version": "com.nvidia.tensorflow.version",
    "cuda": "com.nvidia.cuda.version",
    "cudnn": "com.nvidia.cudnn.version",
    "nccl": "com.nvidia.nccl.version",
    "build_id": "com.nvidia.build.id",
}
REQUIRE_CUDA_ENV = "NVIDIA_REQUIRE_CUDA"

AGREES = "agrees"
MORE_PRECISE = "more precise"
FILLED = "filled"
DISAGREES = "disagrees"
#: Field statuses that make `catalog sync` exit 1. "filled" and "more precise" add knowledge without
#: contradicting the release notes.
FAILING = frozenset({DISAGREES})


# -- parsing the image config (pure) -----------------------------------------------------------------------------
@dataclass(frozen=True)
class RequireCuda:
    """NVIDIA_REQUIRE_CUDA, as nvidia-container-cli reads it: minimum CUDA and accepted data-center branches."""

    cuda_min: str | None
    branches: tuple[str, ...]
    unparsed: tuple[str, ...] = ()


# ASCII digits only, anchored with \Z; a branch longer than nine digits is not a driver, and is left unparsed.
_CUDA_MIN = re.compile(r"cuda>=([0-9]{1,9}(?:\.[0-9]{1,9})*)\Z")
_DRIVER_GE = re.compile(r"driver>=([0-9]{1,9})(?:\.[0-9.]*)?\Z")


def parse_require_cuda(text: str) -> RequireCuda:
    """'cuda>=11.3 brand=tesla,driver>=418,driver<419 ...' -> RequireCuda('11.3', ('418', ...)).

    Each space-separated clause is an alternative; a clause is comma-separated conditions that must all hold.
    Branch clauses name the older data-center drivers (brand=tesla, or no brand) that run this CUDA through
    forward compatibility; clauses for other brands (geforce, quadro...) are not data-center branches.
    """
    cuda_min: str | None = None
    branches: set[str] = set()
    unparsed: list[str] = []
    for clause in text.split():
        conds = [c.strip() for c in clause.split(",") if c.strip()]
        m = _CUDA_MIN.match(conds[0]) if len(conds) == 1 else None
        if m:
            cuda_min = m.group(1)
            continue
        brands = [c.split("=", 1)[1].lower() for c in conds if c.startswith("brand=")]
        lows = [_DRIVER_GE.match(c) for c in conds if c.startswith("driver>=")]
        lows_ok = [x.group(1) for x in lows if x]
        if not lows_ok or len(lows_ok) != len(lows):
            unparsed.append(clause)
            continue
        if all(b == "tesla" for b in brands):
            branches.update(lows_ok)
    return RequireCuda(cuda_min, tuple(sorted(branches, key=int)), tuple(unparsed))


def parse_env(env: Iterable[str]) -> dict[str, str]:
    """Config ENV entries ('NAME=value') as a dict; later entries win, as they do in a container."""
    out: dict[str, str] = {}
    for item in env:
        name, sep, value = str(item).partition("=")
        if sep and name:
            out[name] = value
    return out


def version_env(env: dict[str, str]) -> dict[str, str]:
    """The version variables among an image's ENV, as declared (what envpin.lock records under [base.declared])."""
    names = {name for names in ENV_KEYS.values() for name in names} | {REQUIRE_CUDA_ENV}
    return {name: env[name].strip() for name in sorted(names) if env.get(name, "").strip()}


def declared_from_config(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """(declared values by catalog key, where each came from) for one image config JSON."""
    cfg = config.get("config") or {}
    env = parse_env(cfg.get("Env") or [])
    labels = cfg.get("Labels") or {}
    declared: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for key, names in ENV_KEYS.items():
        for name in names:
            if env.get(name, "").strip():
                declared[key], origin[key] = env[name].strip(), f"ENV {name}"
                break
        else:
            label = LABEL_KEYS.get(key)
            if label and str(labels.get(label, "")).strip():
                declared[key], origin[key] = str(labels[label]).strip(), f"LABEL {label}"
    if env.get(REQUIRE_CUDA_ENV, "").strip():
        req = parse_require_cuda(env[REQUIRE_CUDA_ENV])
        if req.cuda_min:
            declared["cuda_min"], origin["cuda_min"] = req.cuda_min, f"ENV {REQUIRE_CUDA_ENV}"
        if req.branches:
            declared["driver_compat"], origin["driver_compat"] = list(req.branches), f"ENV {REQUIRE_CUDA_ENV}"
    return declared, origin


# -- comparing (pure) ---------------------------------------------------------------------------------------------
def compare_version(catalog_value: str | None, image_value: str) -> str:
    """How a version the image declares relates to the release-notes value.

    Lenient by components: '2.1' (notes) vs '2.1.0' (image) is "more precise"; '10.2.89' vs '10.2' agrees
    (the image says less, not something else); '2.1' vs '2.10' disagrees.
    """
    if catalog_value is None:
        return FILLED
    c, i = components(catalog_value), components(image_value)
    if c == i or c[: len(i)] == i:
        return AGREES
    if i[: len(c)] == c:
        return MORE_PRECISE
    return DISAGREES


def driver_branch(version: str) -> str | None:
    """'418.xx', '384.111+', '440.30' -> '418', '384', '440'."""
    parsed = parse_version(version)
    return str(parsed[0]) if parsed else None


def compare_branches(catalog_value: list[str] | None, driver_min: str | None, image_value: list[str]) -> str:
    """Compare data-center driver branches as sets of branch numbers.

    The notes list the driver_min branch itself next to the forward-compatible older ones (e.g. '440.30' when
    440.33 is required); NVIDIA_REQUIRE_CUDA does not, because 'cuda>=X' already admits it. So only branches
    below driver_min's branch are compared.
    """
    if catalog_value is None:
        return FILLED
    floor = driver_branch(driver_min) if driver_min else None

    def below(values: Iterable[str]) -> set[int]:
        nums = {int(b) for b in (driver_branch(v) for v in values) if b is not None}
        return {n for n in nums if floor is None or n < int(floor)}

    return AGREES if below(catalog_value) == below(image_value) else DISAGREES


def compare_ngc_version(tag: str, image_value: str) -> str:
    """NVIDIA_TENSORFLOW_VERSION ('20.03-tf2', or '19.01' before the tf1/tf2 split) must name this tag."""
    v = image_value.strip()
    return AGREES if tag == v or tag.startswith(v + "-") else DISAGREES


@dataclass(frozen=True)
class Comparison:
    """One declared value next to what the catalog holds for it."""

    field: str
    catalog: Any
    image: Any
    status: str
    origin: str

    def to_json(self) -> dict[str, Any]:
        return {"catalog": self.catalog, "image": self.image, "status": self.status, "from": self.origin}


def compare(
    entry: Entry, declared: dict[str, Any], origin: dict[str, str], digest: str, repository: str
) -> list[Comparison]:
    """Every declared value against the catalog's release-notes value (and a recorded digest, if any)."""
    out: list[Comparison] = []
    for key in sorted(declared):
        value = declared[key]
        src = origin.get(key, "image config")
        if key == "build_id":
            continue  # the release notes have no build ids: recorded, nothing to compare
        if key == "nvidia_tensorflow_version":
            out.append(Comparison(key, entry.tag, value, compare_ngc_version(entry.tag, value), src))
        elif key == "cuda_min":
            cuda = entry.written_value("cuda")
            out.append(Comparison(key, cuda, value, compare_version(cuda, value), src))
        elif key == "driver_compat":
            driver_min = entry.written_value("driver_min") or declared.get("driver_min")
            status = compare_branches(entry.written_value("driver_compat"), driver_min, value)
            out.append(Comparison(key, entry.written_value("driver_compat"), value, status, src))
        else:
            noted = entry.written_value(key)
            out.append(Comparison(key, noted, value, compare_version(noted, value), src))
    recorded = entry.verified or {}
    if recorded.get("digest") and recorded.get("registry") == repository:
        # The tag was verified before from this same repository: a new digest means the tag was re-pushed.
        status = AGREES if recorded["digest"] == digest else DISAGREES
        out.append(Comparison("digest", recorded["digest"], digest, status, "manifest"))
    return out


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
            raise UsageError(f"--registry '{registry}': scheme {scheme}:// is not supported", hint="use https://HOST")
    host, _, path = text.partition("/")
    if not is_registry_host(host):
        raise UsageError(
            f"--registry '{registry}' does not start with a registry host",
            hint="give HOST[:PORT][/PREFIX] with a dot or a port in HOST, e.g. nvcr.io or 127.0.0.1:5000/mirror",
        )
    if path and not is_repository_path(path):
        raise UsageError(
            f"--registry '{registry}': '{path}' is not a repository path",
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
            f"--registry '{registry}': plain HTTP is used only for loopback registries",
            hint=f"use https://{host}",
        )
    if scheme == "https" and plain:
        raise UsageError(
            f"--registry '{registry}': loopback registries are reached over plain HTTP",
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
        raise UsageError(f"CA bundle {ca_bundle} does not exist", hint="give a PEM file with --ca-bundle")
    try:
        return RegistryClient(ca_file=str(ca_bundle))
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"CA bundle {ca_bundle} cannot be used: {exc}", hint="give a PEM file") from exc


@dataclass
class TagResult:
    """What one tag's image declares, how it compares, or why it could not be read."""

    entry: Entry
    ref: str
    image: dict[str, Any] | None = None
    comparisons: tuple[Comparison, ...] = ()
    missing: str | None = None

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
        return out


@dataclass
class SyncResult:
    repository: str
    catalog: str
    tags: list[TagResult]
    written: Path | None = None
    #: The image-facts cache updated with what was read (None with save=False).
    cache: Path | None = None
    #: Known values per kind of evidence ("unknown" for nulls) over the whole catalog, before and after the
    #: facts read here were merged.
    coverage_before: dict[str, int] = field(default_factory=dict)
    coverage_after: dict[str, int] = field(default_factory=dict)

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
    chosen: dict[str, Entry] = {}
    for text in releases:
        for item in (x for x in text.split(",") if x.strip()):
            chosen.update((e.tag, e) for e in cat.select(item.strip()))
    return sorted(chosen.values(), key=lambda e: (release_index(e.release), e.flavor))


@dataclass(frozen=True)
class ImageRead:
    """One image config as read from a registry: the digest the reference resolved to, the config's ENV, and
    the catalog's "image" object for it."""

    ref: str
    digest: str
    env: dict[str, str]
    image: dict[str, Any]
    origin: dict[str, str]

    @property
    def declared(self) -> dict[str, Any]:
        return self.image["declared"]


def read_image(client: RegistryClient, ref: str) -> ImageRead:
    """Manifest(s) and config blob of `ref` (never a layer), each verified against its digest by the client.
    Registry errors, unverifiable content included, raise RegistryError: nothing unverified is returned, so
    nothing unverified reaches a Dockerfile, a lock or the image-facts cache."""
    repository = parse_ref(ref).name
    digest, config = client.image_config(ref)
    if not is_digest(digest) or not isinstance(config, dict):  # the client's promise, kept at the cache's door
        raise RegistryError(f"{ref}: the registry client returned an unverified digest or config",
                            hint="report this as a bug in envpin")
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
    return TagResult(entry, ref, got.image, tuple(compare(entry, got.declared, got.origin, got.digest, repository)))


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
            hint="check --registry: the tags must be at HOST[/PREFIX]/nvidia/tensorflow:TAG",
        )
    data = updated_catalog(cat, results)
    after = Catalog(data, f"the refreshed catalog for {write or 'the image-facts cache'}")
    result = SyncResult(repository, cat.origin, results, coverage_before=coverage_by_kind(cat),
                        coverage_after=coverage_by_kind(after))
    if write is not None:
        atomic_write(write, dump_catalog(data))
        result.written = write
    if save and read_images(results):
        result.cache = facts.save(cat.repository, read_images(results))
    return result
