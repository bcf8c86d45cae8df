"""The build plan: one serialisable value that every artifact (Dockerfile, plan.json, lock) derives from."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envpin import __version__
from envpin.errors import UsageError, param, shown
from envpin.files.read import read_regular, sha256_bytes
from envpin.knowledge import catalog, recipes
from envpin.knowledge.versions import parse_ngc_spec, parse_tf_spec
from envpin.portable import imageref
from envpin.portable.ngc import PY2_FLAVORS
from envpin.portable.versions import NGCSpec, TFSpec, major_minor, parse_version, version_text
from envpin.record import Value

if TYPE_CHECKING:  # loaded where used: `recipe` needs neither the payload, requirements nor the stock table
    from envpin.environment.requirements import Requirement

PLAN_SCHEMA = 1
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
#: The oldest Python the in-image probe and runtime helper support.
MIN_IMAGE_PYTHON = (3, 6)


@dataclass(frozen=True, slots=True)
class BuildPlan(Value):
    """Inputs resolved against the catalog and recipe table; pure data, no I/O."""

    name: str
    entry: catalog.Entry
    tf_version: str
    #: "catalog" (the catalog file's sources), "image" (the image config declares it: read from the registry,
    #: or kept in this user's image-facts cache) or "user" (--tf, where no source gives it).
    tf_version_source: str
    recipe: recipes.Recipe
    base_digest: str | None = None
    build_from: str | None = None
    requirements: tuple[Requirement, ...] = ()
    ca_bundle: bytes | None = field(default=None, repr=False)
    #: The version variables the base image's config declares at base_digest (ENV name -> value), when read.
    #: A fact about the pinned digest, recorded in the lock; not an input, so not in to_dict.
    base_declared: dict[str, str] | None = field(default=None, compare=False)
    #: The distributed recipe baked in beside the base recipe, None when it was not asked for.
    distributed: recipes.Distributed | None = None

    @property
    def image(self) -> str:
        """The upstream identity (nvcr.io, or Docker Hub's tensorflow/tensorflow for a stock image), even when
        building from a mirror."""
        return self.entry.image

    @property
    def distribution(self) -> str:
        """ "ngc" or "stock" (a Docker Hub tensorflow/tensorflow:X.Y.Z-gpu base)."""
        return self.entry.distribution

    @property
    def from_ref(self) -> str:
        ref = self.build_from or self.image
        if self.base_digest and "@" not in ref:
            return f"{ref}@{self.base_digest}"
        return ref

    @property
    def source_date_epoch(self) -> int:
        """The build's one timestamp: midnight UTC on the first day of the NGC release month; for a stock image
        the stock table's fixed date (envpin.knowledge.stock: no source gives when a Docker Hub tag was pushed).

        Derived from the inputs, never the clock, so every machine stamps the same time into the image
        (podman build --timestamp) and pip writes hash-based .pyc files (Python 3.7+ reads SOURCE_DATE_EPOCH)."""
        import calendar

        if self.distribution == "stock":
            from envpin.knowledge import stock as stock_table

            return stock_table.load().epoch
        year, month = (int(part) for part in self.entry.release.split(".")[:2])
        return calendar.timegm((2000 + year, month, 1, 0, 0, 0))

    @property
    def pip_compiles_reproducibly(self) -> bool:
        """Python 3.6's py_compile ignores SOURCE_DATE_EPOCH (its .pyc hold the source mtime): pip must not compile."""
        python = major_minor(self.entry.portable_value("python"))
        return python is not None and python >= (3, 7)

    def to_dict(self) -> dict[str, Any]:
        e = self.entry
        # Only a stock plan names its distribution, and only a distributed one its distributed recipe: the other
        # plans (and their inputs hashes) stay as they were.
        stock_only = {"distribution": e.distribution} if e.distribution != "ngc" else {}
        dist = self.distributed
        distributed = {"distributed": {"hash": dist.hash, "env": dist.env_dict()}} if dist is not None else {}
        return {
            **stock_only,
            **distributed,
            "plan_schema": PLAN_SCHEMA,
            "envpin_version": __version__,
            "name": self.name,
            "release": e.release,
            "flavor": e.flavor,
            "tag": e.tag,
            "image": self.image,
            "base_digest": self.base_digest,
            "build_from": self.build_from,
            "tf_version": self.tf_version,
            "tf_version_source": self.tf_version_source,
            # What every machine with the same catalog file resolves (one user's image-facts cache is left
            # out), so teammates derive the same inputs hash.
            "catalog": {k: e.portable_value(k) for k in ("python", "ubuntu", "cuda", "cudnn", "nccl", "driver_min")},
            "recipe": {
                "id": self.recipe.id,
                "hash": self.recipe.hash,
                "env": self.recipe.env_dict(),
                "unset": [u.name for u in self.recipe.records.unset],
                "steps": [s.step for s in self.recipe.records.steps],
            },
            "requirements": [f"{r.name}{r.extras}=={r.version}" for r in self.requirements],
            "requirements_hash": sha256_bytes("".join(r.render() for r in self.requirements).encode())
            if self.requirements
            else None,
            "ca_bundle_hash": sha256_bytes(self.ca_bundle) if self.ca_bundle else None,
            # The bytes copied into the image are an input: editing the probe must change inputs_hash.
            "payload_hash": _payload_hash(),
        }

    def canonical_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True, indent=2) + "\n"

    @property
    def inputs_hash(self) -> str:
        return self.inputs_hash_with()

    def inputs_hash_with(self, **recorded: Any) -> str:
        """The inputs hash with some inputs as a lock recorded them (payload_hash, envpin_version): a lock
        written by another envpin must still hash its own listed inputs to its own inputs hash."""
        return sha256_bytes(json.dumps({**self.to_dict(), **recorded}, sort_keys=True, separators=(",", ":")).encode())


class UnknownTF(UsageError):
    """No source gives the tag's TensorFlow version and `tf` was not given: the caller may read the image config."""

    def __init__(self, entry: catalog.Entry) -> None:
        super().__init__(
            f"the catalog does not know which TensorFlow {entry.tag} contains",
            hint=f"give it as {param('tf')} MAJOR.MINOR (check with: docker run --rm {entry.image} "
            "python -c 'import tensorflow as tf; print(tf.__version__)'), or run `envpin catalog sync`",
        )
        self.entry = entry


def release_version(declared: str) -> str:
    """'2.14.0' -> '2.14.0'; '1.15.5+nv23.03' -> '1.15.5': the TensorFlow release an image declares."""
    parts = parse_version(declared)
    if parts is None or len(parts) < 2:
        raise UsageError(
            f"the image declares TensorFlow '{shown(declared)}', which is not a version",
            hint=f"give the version with {param('tf')} MAJOR.MINOR",
        )
    return version_text(parts[:3])


def same_minor(a: str, b: str) -> bool:
    """Same TensorFlow major.minor: the unit recipes are chosen by."""
    mm = major_minor(a)
    return mm is not None and mm == major_minor(b)


def resolve_tf(entry: catalog.Entry, tf_spec: TFSpec | None, tf_source: str | None = None) -> tuple[str, str]:
    """(TensorFlow version, where it comes from) for a plan. The catalog file's value first; then what the
    image declares (this user's cache, or tf_source="image" for a value read from the registry or a lock);
    then --tf. A cached image value that contradicts the catalog's major.minor is refused: the recipe
    depends on it."""
    written, declared = entry.portable_value("tf_version"), entry.tf_version
    if declared is not None and declared != written:
        declared = release_version(declared)
    if written is not None:
        if declared is None or same_minor(declared, written):
            return written, "catalog"
        if tf_spec is not None and same_minor(tf_spec.text, declared):
            return declared, "image"
        mm = major_minor(declared)
        assert mm is not None  # release_version gave it two components at least
        raise UsageError(
            f"{entry.tag}: the catalog gives TensorFlow {written}, but the image config (kept by "
            f"`envpin catalog sync`) declares {declared}; the recipe depends on which is right",
            hint=f"pass {param('tf')} {mm[0]}.{mm[1]} to build for what the image declares, or "
            f"re-read it with `{param('releases', command='catalog sync')} {entry.tag}`",
        )
    if declared is not None:
        return declared, "image"
    if tf_spec is not None and len(tf_spec.parts) >= 2:
        return tf_spec.text, tf_source or "user"
    raise UnknownTF(entry)


def ngc_releases(tf_spec: TFSpec, cat: catalog.Catalog | None = None) -> tuple[str, ...]:
    """The NGC releases (YY.MM, oldest first) with a tag whose TensorFlow fits `tf_spec`: where to go when no
    stock image holds that TensorFlow."""
    entries = (cat or catalog.load()).select(None, tf=tf_spec, notify=False)
    return tuple(sorted({e.release for e in entries}, key=lambda r: tuple(int(p) for p in r.split("."))))


def listed(releases: tuple[str, ...], most: int = 6) -> str:
    """Releases for one line: all of them, or past `most` the first and the last with the count."""
    if len(releases) <= most:
        return ", ".join(releases)
    return f"{releases[0]} to {releases[-1]} ({len(releases)} releases)"


def _known_digest(entry: catalog.Entry, build_from: str | None) -> str | None:
    """The digest the catalog file recorded for the tag, when it was read from the repository the build pulls
    from (a digest read from one mirror says nothing about what another repository holds under that tag). One
    user's image-facts cache never pins a render: teammates without it must derive the same plan."""
    if entry.cached:
        return None
    if entry.stated_digest is not None:  # a stock image: the digest a source states, for Docker Hub itself only
        return entry.stated_digest.value if build_from is None else None
    verified = entry.verified or {}
    pulled_from = imageref.parse(build_from).name if build_from else entry.image.rsplit(":", 1)[0]
    return verified.get("digest") if verified.get("registry") == pulled_from else None


def validate_name(name: str) -> str:
    if "/" in name or "\\" in name or ".." in name or not _NAME.match(name):
        raise UsageError(
            f"'{shown(name)}' is not a usable environment name",
            hint="use letters, digits, '.', '_' and '-' only (no '/' or '..'), at most 64 characters",
        )
    return name


def validate_image_ref(ref: str) -> str:
    """A base image: a reference envpin.portable.imageref accepts, kept exactly as written for FROM."""
    try:
        return imageref.validate(ref)
    except imageref.RefError as exc:
        raise UsageError(exc.message, hint=exc.hint) from None


def make_plan(
    *,
    ngc: str | None = None,
    stock: str | None = None,
    tf: str | None = None,
    name: str | None = None,
    requirements: Path | None = None,
    base_image: str | None = None,
    base_digest: str | None = None,
    ca_bundle: Path | None = None,
    cat: catalog.Catalog | None = None,
    tf_source: str | None = None,
    base_declared: dict[str, str] | None = None,
    distributed: bool = False,
) -> BuildPlan:
    """Resolve user input into a plan, or raise an EnvpinError saying exactly what is wrong.

    The base is the NGC image of `ngc`, else the stock TensorFlow GPU image that `stock` names (a version or
    tag) or, with neither, the newest stock image of `tf` (envpin.knowledge.stock). `distributed` adds the
    distributed recipe for its TensorFlow (recipes.distributed)."""
    if ngc is not None and stock is not None:
        raise UsageError(
            f"give {param('ngc')} or {param('stock')}, not both",
            hint=f"{param('ngc')} for an NGC image, {param('stock')} for Docker Hub's tensorflow/tensorflow:X.Y.Z-gpu",
        )
    if ngc is not None:
        from envpin.knowledge.stock import refuse_as_ngc

        refuse_as_ngc(ngc)
    ngc_spec = parse_ngc_spec(ngc) if ngc is not None else None
    tf_spec = parse_tf_spec(tf) if tf is not None else None
    if ngc_spec is None:
        from envpin.knowledge import stock as stock_table

        try:
            entry = stock_table.load().select(stock, tf_spec)
        except UsageError as exc:
            held = ngc_releases(tf_spec) if stock is None and tf_spec is not None else ()
            if not held or tf_spec is None:
                raise
            raise UsageError(
                exc.message,
                hint=f"NGC releases with TensorFlow {tf_spec.text}: {listed(held)}; give {param('ngc')} "
                f"{held[-1]} {param('tf')} {tf_spec.text} (`{param('tf', command='catalog')} {tf_spec.text}` lists "
                f"their tags); stock images envpin knows: `{param('stock', command='catalog')}`",
            ) from None
        tf_version, tf_source = entry.tf_version or "", "catalog"  # the tag names it
        recipe = recipes.select(tf_version, "stock", None)
    else:
        entry, tf_version, tf_source, recipe = _ngc_base(cat or catalog.load(), ngc_spec, tf_spec, tf_source)
    build_from = validate_image_ref(base_image) if base_image is not None else None
    if requirements is not None:
        from envpin.environment.requirements import read_lock

        reqs = read_lock(requirements)
    else:
        reqs = ()
    ca = None
    if ca_bundle is not None:
        try:
            ca = read_regular(ca_bundle)
        except OSError as exc:
            raise UsageError(f"cannot read CA bundle {ca_bundle}: {exc.strerror}", hint="check the path") from exc
        if b"-----BEGIN CERTIFICATE-----" not in ca:
            raise UsageError(f"{ca_bundle} holds no PEM certificate", hint="pass a PEM CA bundle file")
    return BuildPlan(
        name=validate_name(name or f"{entry.release}-{entry.flavor}"),
        entry=entry,
        tf_version=tf_version,
        tf_version_source=tf_source,
        recipe=recipe,
        base_digest=base_digest or _known_digest(entry, build_from),
        build_from=build_from,
        requirements=reqs,
        ca_bundle=ca,
        base_declared=base_declared,
        distributed=recipes.distributed(tf_version) if distributed else None,
    )


def _ngc_base(
    cat: catalog.Catalog, ngc_spec: NGCSpec, tf_spec: TFSpec | None, tf_source: str | None
) -> tuple[catalog.Entry, str, str, recipes.Recipe]:
    """The NGC tag, its TensorFlow version (and where it comes from) and its recipe."""
    (entry,) = cat.select(ngc_spec, tf_spec, single=True)
    if entry.flavor in PY2_FLAVORS:
        raise UsageError(
            f"{entry.tag} is a Python 2 image; envpin's in-image probe and helper need Python 3.6+",
            hint=f"use {entry.tag.replace('py2', 'py3')}",
        )
    python = major_minor(entry.value("python"))
    if python is not None and python < MIN_IMAGE_PYTHON:
        raise UsageError(
            f"{entry.tag} ships Python {entry.value('python')}; envpin's in-image probe and helper need 3.6+",
            hint="use NGC 19.06 or later (Ubuntu 18.04, Python 3.6)",
        )
    tf_version, tf_source = resolve_tf(entry, tf_spec, tf_source)
    return entry, tf_version, tf_source, recipes.select(tf_version, "ngc", entry.release)


def _payload_hash() -> str:
    """The in-image payload's hash, loaded only when a plan is serialised (the payload module reads zipfile)."""
    from envpin.environment.payload import payload_hash

    return payload_hash()
