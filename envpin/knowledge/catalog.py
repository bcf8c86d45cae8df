"""The NGC TensorFlow catalog: one schema-checked JSON table with per-field provenance.

Every fact is stored once: a field lives either at release level (shared by all flavors of that month)
or at flavor level, never both. Unknown facts are ``null`` with a reason; nothing is inferred.

Each source records its kind of evidence (its grade), so every value carries it: ``notes`` (NVIDIA's TensorFlow
release notes for that month), ``nvidia`` (another NVIDIA-owned source about the TensorFlow image:
NVIDIA/tensorflow branches and releases, framework-reproducibility's version table), ``sibling`` (NVIDIA's
notes for another framework container of the same month, which shares the CUDA/cuDNN/NCCL/driver base;
base-stack fields only), ``image`` (declared by the image config, read by ``envpin catalog sync``) and
``user``. Below every NVIDIA-written source rank the weak grades (WEAK_KINDS): ``mirror`` (declared by the
config of a copy in another registry whose digest the catalog does not record for the tag; it only fills
values nothing else gives, see envpin.knowledge.trust), ``nv-version`` (NVIDIA's own
build stamp of that container seen in a third-party file: ``X.Y.Z+nvYY.M`` from the container's pip, or the
container's start-up banner; TensorFlow version only), ``third-party`` (someone else's statement about the
tag) and ``jetson`` (NVIDIA's Jetson wheel ``X.Y.Z+nvYY.MM`` of the same monthly release stream, which is not
the container; TensorFlow version only). ``usage`` sources (public Dockerfiles that use a tag) show only that
a tag was published and back no value. docs/catalog-sources.md records how the weak-grade values were found.

A field may list ``also`` (further sources giving the same value) and ``conflicts`` (sources giving another
value, each ``{"value", "source"}``). A conflicting source is always weaker than the value's own source;
where sources of the same grade disagree, the value stays ``null`` and ``conflicts`` lists every candidate.

Image facts (a flavor's ``image`` object in the file, and the user's image-facts cache, envpin.knowledge.facts)
are keyed by the repository and digest they were read from; which of them speak for a catalog tag, and where
they contradict a written value, is envpin.knowledge.trust. Each contradiction is a one-line notice the entry
carries, posted (envpin.knowledge.notices) when a command selects the entry.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from envpin.errors import CatalogError, UsageError, param
from envpin.knowledge import notices, schema, trust
from envpin.knowledge.fields import FIELDS, IMAGE_SOURCE
from envpin.knowledge.trust import IMAGE_KIND, MIRROR_KIND, ImageUse
from envpin.knowledge.versions import release_index
from envpin.portable import ngc
from envpin.portable.versions import NGCSpec, SpecError, TFSpec, parse_ngc_spec
from envpin.record import Value

TYPE_CHECKING = False  # typing's, without importing typing (annotations are strings here)
if TYPE_CHECKING:
    from typing import Any

#: Grades below every NVIDIA-written source: a value resting on one of them is shown with a notice.
WEAK_KINDS = frozenset({MIRROR_KIND, "nv-version", "third-party", "jetson"})
#: One line per grade, for views and docs.
KIND_TEXT = {
    "image": "declared by the image config itself (envpin catalog sync)",
    "user": "given by the user",
    "notes": "NVIDIA's TensorFlow release notes for that month",
    "nvidia": "another NVIDIA source about the TensorFlow image",
    "sibling": "NVIDIA's notes for another framework container of the same month (base stack only)",
    "mirror": "declared by the image config of a copy in another registry, whose digest the catalog does not "
    "record for the tag (fills unknown values only)",
    "nv-version": "NVIDIA's build stamp of that container (X.Y.Z+nvYY.M or its start-up banner) in a third-party file",
    "third-party": "a third party's statement about the tag",
    "jetson": "NVIDIA's Jetson wheel of the same monthly release stream, not the container",
}
#: Environment variable naming a catalog file to use instead of the shipped one (e.g. written by catalog sync).
CATALOG_ENV = "ENVPIN_CATALOG"


@dataclass(frozen=True, slots=True)
class Fact(Value):
    """One catalog value with where it came from, or why it is unknown."""

    value: Any
    source: str | None = None
    reason: str | None = None
    kind: str | None = None
    #: Further sources giving the same value (ids into the catalog's sources).
    also: tuple[str, ...] = ()
    #: (value, source id) of each source giving another value: weaker ones, or every candidate of a null.
    conflicts: tuple[tuple[Any, str], ...] = ()
    #: For a value an image config declared (kinds image and mirror): REPOSITORY@DIGEST it was read from.
    read_from: str | None = None

    @property
    def known(self) -> bool:
        return self.value is not None

    @property
    def weak(self) -> bool:
        """The value rests on a grade below every NVIDIA-written source (WEAK_KINDS)."""
        return self.known and self.kind in WEAK_KINDS


@dataclass(frozen=True, slots=True)
class Entry(Value):
    """One published image tag (release + flavor) with all fields resolved."""

    release: str
    flavor: str
    tag: str
    image: str
    facts: dict[str, Fact]
    #: The provenance tables each entry shares with the catalog (left out of repr, as the fields below).
    sources: dict[str, dict[str, str]] = field(repr=False)
    verified: dict[str, Any] | None = None
    #: Every field as the written sources give it, before any image-declared value (what sync compares with).
    written: dict[str, Fact] = field(default_factory=dict, repr=False)
    #: When this user's image-facts cache supplied a value: the facts the catalog file alone gives.
    portable: dict[str, Fact] | None = field(default=None, repr=False)
    #: Every image config read for this tag, with what the catalog does with it (catalog show lists them).
    images: tuple[ImageUse, ...] = field(default=(), repr=False)
    #: One line per image-declared value that contradicts a written one (tag, field, both values, both
    #: sources); posted to envpin.knowledge.notices when a command selects this entry.
    notices: tuple[str, ...] = field(default=(), repr=False)
    #: "ngc" (the catalog file), or "stock" for a Docker Hub tensorflow/tensorflow:X.Y.Z-gpu image
    #: (envpin.knowledge.stock: release is then the TensorFlow version and flavor "gpu").
    distribution: str = "ngc"
    #: Sources (ids) that show the tag was published without backing a value (stock images: public files that
    #: build FROM it); shown by catalog show and --json.
    published: tuple[str, ...] = ()
    #: A digest a written source states for the tag (stock images: the base digest a public Dockerfile pins),
    #: with its source and grade; render pins it when the build pulls from the tag's own repository.
    stated_digest: Fact | None = field(default=None, repr=False)

    @property
    def cached(self) -> bool:
        """Some value comes from this user's image-facts cache (envpin.knowledge.facts), not the catalog file."""
        return self.portable is not None

    @property
    def outranked(self) -> dict[str, Fact]:
        """Written values that an image-declared value outranks and contradicts, by field."""
        return {
            name: w
            for name, w in self.written.items()
            if self.facts[name].kind == IMAGE_KIND and w.known and w.value != self.facts[name].value
        }

    def value(self, name: str) -> Any:
        return self.facts[name].value

    def written_value(self, name: str) -> Any:
        """The value the written sources give, ignoring what an image declared (sync compares with this)."""
        return (self.written.get(name) or self.facts[name]).value

    def portable_value(self, name: str) -> Any:
        """The value every machine with the same catalog file resolves: facts only this user's image-facts
        cache holds are left out, so a plan (and its lock) never depends on one person's cache."""
        return (self.portable or self.facts)[name].value

    @property
    def tf_version(self) -> str | None:
        value = self.facts["tf_version"].value
        return value if isinstance(value, str) else None

    def source_url(self, name: str) -> str | None:
        """Where the value came from: a written source's URL, or REPOSITORY@DIGEST for an image-declared one."""
        fact = self.facts[name]
        if fact.read_from:
            return fact.read_from
        return self.sources[fact.source]["url"] if fact.source else None

    def recorded_digest(self, repository: str) -> str | None:
        """The digest last read for this tag from `repository` (cache before catalog file), or None."""
        found = [u for u in self.images if u.image["registry"] == repository]
        found.sort(key=lambda u: not u.cached)
        return found[0].image["digest"] if found else None

    def weak(self, names: Iterable[str] | None = None) -> dict[str, Fact]:
        """Known values (of `names`, default every field) that rest on a grade below NVIDIA's own text."""
        return {n: self.facts[n] for n in (FIELDS if names is None else names) if self.facts[n].weak}

    def _cited(self, sid: str) -> dict[str, Any]:
        src = self.sources[sid]
        return {"source": src["url"], "kind": src["kind"], "title": src["title"]}

    def to_json(self) -> dict[str, Any]:
        """Flat object for `envpin catalog --json`: values first, provenance alongside."""
        out: dict[str, Any] = {
            "release": self.release,
            "tag": self.tag,
            "flavor": self.flavor,
            "image": self.image,
            "digest": (self.verified or {}).get("digest") or (self.stated_digest.value if self.stated_digest else None),
        }
        if self.distribution != "ngc":
            out["distribution"] = self.distribution
        if self.published:
            out["published"] = [self._cited(sid) for sid in self.published]
        provenance: dict[str, Any] = {}
        for name in FIELDS:
            fact = self.facts[name]
            out[name] = fact.value
            prov: dict[str, Any] = {"source": self.source_url(name), "kind": fact.kind}
            if fact.reason:
                prov["reason"] = fact.reason
            if fact.also:
                prov["also"] = [self._cited(sid) for sid in fact.also]
            if fact.conflicts:
                prov["conflicts"] = [{"value": v, **self._cited(sid)} for v, sid in fact.conflicts]
            provenance[name] = prov
        if self.stated_digest is not None and not (self.verified or {}).get("digest"):
            stated = self.stated_digest.source
            provenance["digest"] = {
                "source": self.sources[stated]["url"] if stated is not None else None,
                "kind": self.stated_digest.kind,
            }
        for name, fact in self.outranked.items():
            provenance[name]["outranks"] = {
                "value": fact.value,
                "kind": fact.kind,
                "source": self.sources[fact.source]["url"] if fact.source else None,
            }
        out["provenance"] = provenance
        if self.verified:
            out["verified_from_image"] = self.verified
        if self.images:
            out["image_configs"] = [u.to_json() for u in self.images]
        return out


class Catalog:
    """The loaded, validated catalog with the look-ups the CLI needs."""

    def __init__(
        self,
        data: dict[str, Any],
        origin: str,
        cached: Mapping[tuple[str, str], dict[str, Any]] | None = None,
        notices: Iterable[str] = (),
        checked: bool = False,
    ) -> None:
        if not checked:  # checked: this very data was validated, or is the shipped file as recorded (schema)
            validate(data, origin)
        self.data = data
        self.origin = origin
        #: Image objects from the user's image-facts cache by (repository read from, tag); `data` stays the
        #: file's own, so a catalog written from it (catalog sync --write) never carries one user's cache.
        self.cached: dict[tuple[str, str], dict[str, Any]] = dict(cached or {})
        #: Lines about the catalog as loaded (a damaged image-facts cache), posted by load() (knowledge.notices).
        self.notices: tuple[str, ...] = tuple(notices)
        self.sources: dict[str, dict[str, str]] = data["sources"]
        self.missing: dict[str, dict[str, Any]] = data["missing_months"]
        self.repository: str = data["image_repository"]
        self._by_release: dict[str, list[Entry]] = {}  # built on first use: one tag's command builds one release

    @functools.cached_property
    def _entries(self) -> list[Entry]:
        return [e for release in self.releases() for e in self._release(release)]

    @functools.cached_property
    def _selector(self) -> ngc.Selector:
        return ngc.Selector(self._entries, self.missing)

    def _release(self, release: str) -> list[Entry]:
        if release not in self._by_release:
            self._by_release[release] = list(self._build_entries([release]))
        return self._by_release[release]

    # -- construction -------------------------------------------------------------------------------
    def _build_entries(self, releases: list[str]) -> Iterator[Entry]:
        by_tag: dict[str, list[dict[str, Any]]] = {}
        for (_, tag), image in sorted(self.cached.items()):
            by_tag.setdefault(tag, []).append(image)
        for release in releases:
            rel = self.data["releases"][release]
            shared = {name: self._written(raw) for name, raw in rel["fields"].items()}  # one Fact for every flavor
            for flavor in sorted(rel["flavors"]):
                fl = rel["flavors"][flavor]
                own_fields = fl["fields"]
                written = {name: shared.get(name) or self._written(own_fields[name]) for name in FIELDS}
                tag, recorded, cached = fl["tag"], fl.get("image"), by_tag.get(fl["tag"], [])
                uses = trust.images_for(self.repository, tag, recorded, cached) if recorded or cached else []
                facts = _resolve(written, uses) if uses else dict(written)
                # The facts every machine with this catalog file resolves: what only this cache gives is left
                # out (Entry.portable_value), so a plan never depends on one person's cache.
                own = _resolve(written, trust.images_for(self.repository, tag, recorded, [])) if cached else facts
                yield Entry(
                    release=release,
                    flavor=flavor,
                    tag=tag,
                    image=f"{self.repository}:{tag}",
                    facts=facts,
                    sources=self.sources,
                    verified=next((u.image for u in uses if u.grade == IMAGE_KIND), None),
                    written=written,
                    portable=own if own != facts else None,
                    images=tuple(uses),
                    notices=tuple(self._contradictions(tag, written, uses)) if uses else (),
                )

    def _contradictions(self, tag: str, written: dict[str, Fact], uses: list[ImageUse]) -> Iterator[str]:
        """What the image configs of `tag` declare against its written values (envpin.knowledge.trust)."""
        cited = {
            name: (f.value, self.sources.get(f.source) if f.known and f.source else None) for name, f in written.items()
        }
        return trust.contradictions(self.repository, tag, cited, uses)

    def _written(self, raw: dict[str, Any]) -> Fact:
        """A field as the written sources give it."""
        src = raw.get("source")
        kind = self.sources[src]["kind"] if raw["value"] is not None and src else None
        return Fact(
            raw["value"],
            src,
            raw.get("reason"),
            kind,
            tuple(raw.get("also", ())),
            tuple((c["value"], c["source"]) for c in raw.get("conflicts", ())),
        )

    # -- queries ------------------------------------------------------------------------------------
    def entries(self) -> list[Entry]:
        return list(self._entries)

    def releases(self) -> list[str]:
        return sorted(self.data["releases"], key=release_index)

    def release_entries(self, release: str, *, notify: bool = True) -> list[Entry]:
        """All tags of one release, or a clear error for unknown and release-less months. With notify, each
        chosen entry's notices are posted (envpin.knowledge.notices): a command is told about the values it uses."""
        found = self._release(release) if release in self.data["releases"] else []
        if found:
            return _posted(list(found), notify)
        try:
            return _posted(self._selector.release_entries(release), notify)
        except SpecError as exc:
            raise UsageError(exc.message, hint=exc.hint_naming(param)) from None

    def select(
        self,
        ngc: NGCSpec | str | None,
        tf: TFSpec | None = None,
        flavor: str | None = None,
        *,
        single: bool = False,
        notify: bool = True,
    ) -> list[Entry]:
        """The one way from an NGC spec ('20.02', '20.02-tf2-py3', a full reference) to catalog entries;
        with no spec (None), every release's entries that fit `tf` and `flavor`, possibly none. With notify,
        each chosen entry's notices are posted (envpin.knowledge.notices).

        The rules live in envpin.portable.ngc (standard library); this turns their errors into the CLI's."""
        try:
            return _posted(self._select(ngc, tf, flavor, single), notify)
        except SpecError as exc:
            raise UsageError(exc.message, hint=exc.hint_naming(param)) from None

    def _select(self, spec: NGCSpec | str | None, tf: TFSpec | None, flavor: str | None, single: bool) -> list[Entry]:
        """A known release's spec picks among that release alone; anything else, and every error, the whole."""
        with contextlib.suppress(SpecError):
            release = None if spec is None else (parse_ngc_spec(spec) if isinstance(spec, str) else spec).release
            if release is not None and release in self.data["releases"]:
                return ngc.Selector(self._release(release), self.missing).select(spec, tf, flavor, single)
        return self._selector.select(spec, tf, flavor, single)

    @staticmethod
    def nearest_releases(anchor: str, candidates: Iterable[str], limit: int) -> list[str]:
        """Candidates ordered by distance in months from `anchor` (later first on ties)."""
        return ngc.nearest_releases(anchor, candidates, limit)


def _posted(entries: list[Entry], notify: bool) -> list[Entry]:
    if notify:
        notices.post(*(line for e in entries for line in e.notices))
    return entries


def _resolve(written: dict[str, Fact], uses: list[ImageUse]) -> dict[str, Fact]:
    """Each field's value: what the image-grade config declares outranks every written source (the written
    value is kept beside it, Entry.outranked); a mirror-grade config fills only what is still unknown."""
    image = next((u for u in uses if u.grade == IMAGE_KIND), None)
    mirrors = [u for u in uses if u.grade == MIRROR_KIND]
    out: dict[str, Fact] = {}
    for name in FIELDS:
        filler = next((u for u in mirrors if name in u.image["declared"]), None)
        if image is not None and name in image.image["declared"]:
            out[name] = Fact(image.image["declared"][name], IMAGE_SOURCE, None, IMAGE_KIND, read_from=image.read_from)
        elif not written[name].known and filler is not None:
            out[name] = Fact(
                filler.image["declared"][name], IMAGE_SOURCE, None, MIRROR_KIND, read_from=filler.read_from
            )
        else:
            out[name] = written[name]
    return out


# -- loading ----------------------------------------------------------------------------------------
def catalog_path() -> Path:
    """The catalog in use: $ENVPIN_CATALOG when set (a refreshed copy), else the one shipped with envpin."""
    override = os.environ.get(CATALOG_ENV, "").strip()
    return Path(override).expanduser().absolute() if override else shipped_catalog_path()


def shipped_catalog_path() -> Path:
    """envpin/data/catalog.json: the catalog shipped with envpin."""
    return schema.shipped_data_path("catalog.json")


def load(path: str | None = None, *, cache: bool = True) -> Catalog:
    """Load and validate the catalog in use (or another file, e.g. one refreshed by `catalog sync`), with the
    user's image-facts cache merged in unless cache=False (the README's tables describe the shipped file only).

    The catalog file is envpin's input and must be sound (a CatalogError otherwise); the cache is envpin's own
    output, so a damaged one is never fatal: what cannot be used is left out and Catalog.notices says so,
    posted to envpin.knowledge.notices on every load (the CLI prints it once, at the end of the command)."""
    from envpin.knowledge import facts as imagecache

    override = os.environ.get(CATALOG_ENV, "").strip()
    if path:
        p, missing_hint, bad_hint = Path(path).expanduser().absolute(), None, None
    elif override:
        p = catalog_path()
        missing_hint = bad_hint = f"{CATALOG_ENV} names this file: fix it, or unset {CATALOG_ENV} for the shipped one"
    else:
        p, missing_hint, bad_hint = shipped_catalog_path(), "reinstall envpin", None
    try:
        st = p.stat()
    except FileNotFoundError as exc:
        raise CatalogError(f"catalog file {p} does not exist", hint=missing_hint) from exc
    except OSError as exc:
        raise CatalogError(f"catalog file {p} cannot be read: {exc.strerror or exc}", hint=bad_hint) from exc
    try:
        # Keyed on the path and its stat, so a file rewritten in place (catalog sync --write) is read again.
        cat = _load_file(str(p), st.st_mtime_ns, st.st_size, not path and not override)
    except CatalogError as exc:
        if bad_hint:  # the variable that names the file says more than the schema's hint
            raise CatalogError(exc.message, hint=bad_hint) from exc
        raise
    if not cache:
        return cat
    cache_file = imagecache.cache_path()
    try:
        cst = cache_file.stat()
        key = (cst.st_mtime_ns, cst.st_size)
    except FileNotFoundError:
        return cat
    except OSError:
        key = (-1, -1)  # facts.read says why, as a notice
    cat = _with_cache(cat, str(cache_file), *key)
    notices.post(*cat.notices)
    return cat


@lru_cache(maxsize=4)
def _with_cache(cat: Catalog, cache_file: str, mtime_ns: int, size: int) -> Catalog:
    """`cat` with the user's image-facts cache merged in (envpin.knowledge.trust decides what applies), and a
    notice when part or all of the cache had to be ignored; `cat` itself when the cache changes nothing."""
    from envpin.knowledge import facts as imagecache

    got = imagecache.read(cat.repository, Path(cache_file))
    tags = {fl["tag"] for rel in cat.data["releases"].values() for fl in rel["flavors"].values()}
    useful = {key: image for key, image in got.images.items() if key[1] in tags}
    found = (got.notice,) if got.notice else ()
    if not useful and not found:
        return cat
    origin = f"{cat.origin} + image facts from {cache_file}" if useful else cat.origin
    return Catalog(cat.data, origin, useful, (*cat.notices, *found), checked=True)


def with_images(data: dict[str, Any], images: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A copy of catalog data with these image objects (by tag) recorded; written fields are never touched."""
    import copy

    out = copy.deepcopy(data)
    for rel in out["releases"].values():
        for fl in rel["flavors"].values():
            if fl["tag"] in images:
                fl["image"] = copy.deepcopy(images[fl["tag"]])
    return out


def coverage(entries: Iterable[Entry]) -> Counter[tuple[str, str | None]]:
    """How many values each (field, kind of evidence) has; kind None counts the unknowns."""
    return Counter((name, e.facts[name].kind) for e in entries for name in FIELDS)


@lru_cache(maxsize=4)
def _load_file(path: str, mtime_ns: int, size: int, shipped: bool = False) -> Catalog:
    p = Path(path)
    from envpin.files.read import parse_json, read_regular

    try:
        raw = read_regular(p)
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"catalog file {p} cannot be read: {exc}") from exc
    if shipped and schema.recorded("catalog", raw):  # the very bytes that passed the full check: parse_json's
        import json  # depth walk has nothing to find

        return Catalog(json.loads(text), str(p), checked=True)
    return Catalog(parse_json(text, f"catalog file {p}", CatalogError), str(p), checked=False)


def validate(data: Any, origin: str = "catalog") -> None:
    """Check the catalog's shape and invariants (envpin.knowledge.catalogcheck); raise CatalogError naming the
    first problem."""
    from envpin.knowledge import catalogcheck

    catalogcheck.validate(data, origin)
