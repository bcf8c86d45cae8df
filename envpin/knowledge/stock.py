"""The stock TensorFlow GPU images (Docker Hub's ``tensorflow/tensorflow:X.Y.Z-gpu``): one schema-checked
table with per-field provenance, loaded into the same Entry objects as the NGC catalog so that plans, locks,
doctor and the audit treat both kinds of base alike.

A tag is listed only when a source read shows it was published (``usage``: a public Dockerfile that builds
FROM it). Each value cites its source and kind of evidence: ``tensorflow`` (TensorFlow's own documentation:
the Docker guide, which says tags name the TensorFlow release, and the tested build configurations, which
give the CUDA and cuDNN the pip package was built and tested against), ``nvidia-cuda`` (NVIDIA's CUDA
release notes: the minimum driver of that CUDA release) and ``third-party`` (someone else's statement about
the tag; a weak grade, shown with a notice). Unknown values are ``null`` with a reason. docs/catalog-sources.md
records how the values were found.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache

from envpin.errors import CatalogError, UsageError, param, shown
from envpin.knowledge import schema
from envpin.knowledge.catalog import Entry, Fact
from envpin.knowledge.fields import FIELDS
from envpin.portable import imageref
from envpin.portable.imageref import is_digest
from envpin.portable.versions import SpecError, TFSpec, parse_tf_spec, parse_version
from envpin.record import Value

TYPE_CHECKING = False  # typing's, without importing typing (annotations are strings here)
if TYPE_CHECKING:
    from typing import Any

    from envpin.knowledge.provenance import Grades

#: The lock's [inputs].flavor of a stock image (NGC flavors are py2, py3, tf1, tf1-py2, tf2).
STOCK_FLAVOR = "gpu"
#: The repository as Dockerfiles name it (docker.io/tensorflow/tensorflow).
REPOSITORY = "tensorflow/tensorflow"
#: Kinds of evidence, strongest first; "usage" shows only that a tag was published and backs no value. The
#: schema's enum of source kinds is these and usage (tests/unit/test_schemas.py).
KINDS = ("tensorflow", "nvidia-cuda", "third-party")
KIND_TEXT = {
    "tensorflow": "TensorFlow's own documentation (Docker guide, tested build configurations)",
    "nvidia-cuda": "NVIDIA's CUDA release notes (driver of that CUDA release)",
    "third-party": "a third party's statement about the tag",
}
#: What the stock table records, in display order (the schema's required fields of a tag); every other catalog
#: field is unknown for stock images.
RECORDED = ("tf_version", "python", "ubuntu", "cuda", "cudnn", "driver_min")
_TAG = re.compile(r"([0-9]+)\.([0-9]+)\.([0-9]+)-gpu\Z")


@dataclass(frozen=True, slots=True)
class StockCatalog(Value):
    """The loaded stock table: one Entry per tag, newest TensorFlow first."""

    entries: tuple[Entry, ...]
    sources: dict[str, dict[str, str]]
    #: SOURCE_DATE_EPOCH of every stock-image build (a fixed date; the table says why).
    epoch: int
    origin: str

    def tags(self) -> list[str]:
        return [e.tag for e in self.entries]

    def filtered(self, tf: TFSpec | None = None) -> list[Entry]:
        """Every tag whose TensorFlow fits `tf` (all without one), newest first."""
        return [e for e in self.entries if tf is None or tf.matches(e.tf_version)]

    def select(self, spec: str | None = None, tf: TFSpec | None = None) -> Entry:
        """The one tag for a stock SPEC ('2.20', '2.20.0', '2.20.0-gpu', 'tensorflow/tensorflow:2.20.0-gpu')
        and/or a TensorFlow spec: the newest patch release that fits both; a UsageError naming what exists
        otherwise."""
        known = ", ".join(self.tags())
        wanted = tf
        if spec is not None:
            wanted = _spec(spec)
            if tf is not None and not (tf.matches(wanted.text) or wanted.matches(tf.text)):
                raise UsageError(
                    f"{param('stock')} {shown(spec)} and {param('tf')} {tf.text} name different TensorFlow releases",
                    hint="give one of them",
                )
            if tf is not None and len(tf.parts) > len(wanted.parts):
                wanted = tf
        if wanted is None:
            raise UsageError(
                "a stock image needs a TensorFlow version",
                hint=f"give {param('tf')} MAJOR.MINOR or {param('stock')} TAG (the catalog knows {known})",
            )
        found = self.filtered(wanted)
        if not found:
            raise UsageError(
                f"no stock TensorFlow GPU image in the catalog holds TensorFlow {wanted.text}",
                hint=f"the catalog knows {known} (see `{param('stock', command='catalog')}`); for an NGC image give "
                f"{param('ngc')} RELEASE",
            )
        return found[0]


def _spec(text: str) -> TFSpec:
    """The `stock` parameter: a version or a tag, optionally with the repository in front; a UsageError
    otherwise."""
    raw = text.strip()
    stock = param("stock")
    bad = UsageError(
        f"{stock} {shown(text) if raw else repr(text)} is not a version or a tag of {REPOSITORY}",
        hint=f"give a version or a tag, e.g. {stock} 2.20 or {stock} 2.20.0-gpu",
    )
    if ":" in raw:
        try:
            name, tag, digest = imageref.split(raw)
            full = imageref.parse(name).name
            ours = full == f"docker.io/{REPOSITORY}"
        except imageref.RefError:
            raise bad from None
        copy = not ours and full.endswith(f"/{REPOSITORY}")  # the repository under another host (a mirror)
        if copy and tag is not None and not digest and _TAG.match(tag):
            raise UsageError(
                f"{stock} {shown(text)} is not {REPOSITORY} on Docker Hub: {stock} names the upstream "
                f"tag, {param('base_image')} the copy to build from",
                hint=f"give {stock} {shown(tag)} {param('base_image')} {shown(raw)}",
            )
        if digest or tag is None or not ours:
            raise bad
        if re.fullmatch(r"[0-9]+(\.[0-9]+){0,2}", tag):  # a full reference names one image: :2.20.0 is not
            # the -gpu one (the image without GPU support), so it is never taken as that one
            gpu = f"{tag}-gpu" if tag.count(".") == 2 else "2.20.0-gpu"
            raise UsageError(
                f"{stock} {shown(text)} names {REPOSITORY}:{shown(tag)}, which is not a -gpu image (tags X.Y.Z-gpu)",
                hint=f"give the -gpu tag, e.g. {stock} {REPOSITORY}:{gpu}, or a version alone ({stock} 2.20)",
            )
        raw = tag
    try:
        return parse_tf_spec(raw.removesuffix("-gpu"))
    except SpecError:
        raise bad from None


def epoch_of(date: str) -> int:
    """'2020-01-01' (YYYY-MM-DD, as the schema has it) -> seconds since 1970 at midnight UTC."""
    import calendar  # here: it loads datetime and locale, which no audit or recipe needs

    year, month, day = (int(part) for part in date.split("-"))
    return calendar.timegm((year, month, day, 0, 0, 0))


def entry(tag: str, rel: dict[str, Any], sources: dict[str, dict[str, str]]) -> Entry:
    """One stock tag as a catalog Entry: release is the TensorFlow version, flavor STOCK_FLAVOR."""
    facts: dict[str, Fact] = {}
    for name in FIELDS:
        raw = rel["fields"].get(name)
        if raw is None:
            facts[name] = Fact(
                None, reason="not recorded for stock images: no source read gives it per tag (docs/catalog-sources.md)"
            )
            continue
        src = raw.get("source")
        kind = sources[src]["kind"] if raw["value"] is not None and src else None
        facts[name] = Fact(
            raw["value"],
            src,
            raw.get("reason"),
            kind,
            tuple(raw.get("also", ())),
            tuple((c["value"], c["source"]) for c in raw.get("conflicts", ())),
        )
    version = tag[: -len("-gpu")]
    stated = rel.get("digest")
    digest = Fact(stated["value"], stated["source"], kind=sources[stated["source"]]["kind"]) if stated else None
    return Entry(
        release=version,
        flavor=STOCK_FLAVOR,
        tag=tag,
        image=f"{REPOSITORY}:{tag}",
        facts=facts,
        sources=sources,
        written=dict(facts),
        distribution="stock",
        published=tuple(rel["published"]),
        stated_digest=digest,
    )


def names_stock_tag(text: str) -> bool:
    """'2.20.0-gpu' or 'tensorflow/tensorflow:2.20.0-gpu' (any registry spelling of Docker Hub): a stock tag,
    never an NGC release or tag (YY.MM...)."""
    raw = text.strip()
    if ":" in raw:
        try:
            name, tag, _ = imageref.split(raw)
            if imageref.parse(name).name != f"docker.io/{REPOSITORY}":
                return False
        except imageref.RefError:
            return False
        raw = tag or ""
    return bool(_TAG.match(raw))


def refuse_as_ngc(text: str) -> None:
    """The `ngc` parameter given a stock image's tag ('2.20.0-gpu'): a UsageError that names the `stock` one (the
    NGC shape hint would only ask for YY.MM)."""
    if names_stock_tag(text):
        raise UsageError(
            f"{param('ngc')} {shown(text.strip())} names a stock TensorFlow GPU image ({REPOSITORY}), not an NGC "
            "release",
            hint=f"give it as {param('stock')} {shown(text.strip())}",
        )


def is_stock_flavor(flavor: str) -> bool:
    return flavor == STOCK_FLAVOR


def stock_path() -> str:
    return str(schema.shipped_data_path("stock.json"))


@lru_cache(maxsize=1)
def load() -> StockCatalog:
    """The shipped stock table: trusted as it is when its bytes are the recorded ones (envpin.knowledge.schema),
    else checked in full (a CatalogError names the first problem)."""
    from envpin.files.read import parse_json, read_regular

    path = stock_path()
    try:
        raw = read_regular(path)
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"stock image table {path} cannot be read: {exc}", hint="reinstall envpin") from exc
    if schema.recorded("stock", raw):
        import json

        data = json.loads(text)
    else:
        data = parse_json(text, f"stock image table {path}", CatalogError)
        validate(data, path)
    entries = [entry(tag, rel, data["sources"]) for tag, rel in data["tags"].items()]
    entries.sort(key=lambda e: parse_version(e.release) or (), reverse=True)
    return StockCatalog(tuple(entries), data["sources"], epoch_of(data["epoch"]["value"]), path)


def validate(data: Any, origin: str = "stock image table") -> None:
    """Check the table against its schema (stock.schema.json), then its cross-field rules; raise one
    CatalogError naming the first problem."""
    schema.validate(data, "stock", origin, CatalogError, _problems)


def _problems(data: dict[str, Any]) -> Iterator[str]:
    """The rules between the parts of a stock table of the schema's shape (provenance's, imported here: a recorded
    table is never checked)."""
    from envpin.knowledge.provenance import Grades

    grades = Grades(KINDS)
    for tag, rel in data["tags"].items():
        yield from _tag_problems(tag, rel, data["sources"], schema.where("tags", tag), grades)


def _tag_problems(tag: str, rel: dict[str, Any], sources: dict[str, Any], where: str, grades: Grades) -> Iterator[str]:
    from envpin.knowledge.provenance import USAGE, fact_problems

    m = _TAG.match(tag)
    if not m:  # the grammar names_stock_tag reads, so not a copy of it as a schema pattern
        yield f"{where}: not a tag of the form X.Y.Z-gpu"
        return
    if any(sources.get(s, {}).get("kind") not in ("usage", "third-party") for s in rel["published"]):
        yield f"{where}.published: must list public files that use the tag (usage or third-party sources)"
    if "digest" in rel:
        stated = rel["digest"]
        if not is_digest(stated["value"]):
            yield f"{where}.digest: the value must be sha256:<64 hex digits>"
        elif sources.get(stated["source"], {}).get("kind") in (None, USAGE):
            yield f"{where}.digest: source {stated['source']!r} must be a known source that states it (not usage)"
    fields = rel["fields"]
    if fields["tf_version"]["value"] != ".".join(m.groups()):
        yield f"{where}.fields.tf_version: must be the version the tag names"
    for name in RECORDED:
        yield from (f"{where}.fields.{name}: {p}" for p in fact_problems(name, fields[name], sources, grades))
