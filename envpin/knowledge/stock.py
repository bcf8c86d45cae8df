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

from envpin.errors import CatalogError, UsageError, shown
from envpin.knowledge.catalog import Entry, Fact
from envpin.knowledge.catalogcheck import refuse_first, shipped_data_path
from envpin.knowledge.fields import FIELDS, LIST_FIELDS
from envpin.knowledge.versions import TFSpec
from envpin.portable import imageref
from envpin.portable.imageref import is_digest
from envpin.portable.versions import SpecError, parse_tf_spec
from envpin.record import Value

TYPE_CHECKING = False  # typing's, without importing typing (annotations are strings here)
if TYPE_CHECKING:
    from typing import Any

SCHEMA_VERSION = 1
#: The lock's [inputs].flavor of a stock image (NGC flavors are py2, py3, tf1, tf1-py2, tf2).
STOCK_FLAVOR = "gpu"
#: The repository as Dockerfiles name it (docker.io/tensorflow/tensorflow).
REPOSITORY = "tensorflow/tensorflow"
#: Kinds of evidence, strongest first; "usage" shows only that a tag was published and backs no value.
KINDS = ("tensorflow", "nvidia-cuda", "third-party")
KIND_TEXT = {
    "tensorflow": "TensorFlow's own documentation (Docker guide, tested build configurations)",
    "nvidia-cuda": "NVIDIA's CUDA release notes (driver of that CUDA release)",
    "third-party": "a third party's statement about the tag",
}
#: What the stock table records; every other catalog field is unknown for stock images.
RECORDED = ("tf_version", "python", "ubuntu", "cuda", "cudnn", "driver_min")
_TAG = re.compile(r"([0-9]+)\.([0-9]+)\.([0-9]+)-gpu\Z")
_TOP = {"schema", "image_repository", "epoch", "sources", "tags"}
_FACT_KEYS = {"value", "source", "reason", "also", "conflicts"}
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})\Z")


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
        """The one tag for --stock SPEC ('2.20', '2.20.0', '2.20.0-gpu', 'tensorflow/tensorflow:2.20.0-gpu')
        and/or --tf: the newest patch release that fits both; a UsageError naming what exists otherwise."""
        known = ", ".join(self.tags())
        wanted = tf
        if spec is not None:
            wanted = _spec(spec)
            if tf is not None and not (tf.matches(wanted.text) or wanted.matches(tf.text)):
                raise UsageError(
                    f"--stock {shown(spec)} and --tf {tf.text} name different TensorFlow releases",
                    hint="give one of them",
                )
            if tf is not None and len(tf.parts) > len(wanted.parts):
                wanted = tf
        if wanted is None:
            raise UsageError(
                "a stock image needs a TensorFlow version",
                hint=f"give --tf MAJOR.MINOR or --stock TAG (the catalog knows {known})",
            )
        found = self.filtered(wanted)
        if not found:
            raise UsageError(
                f"no stock TensorFlow GPU image in the catalog holds TensorFlow {wanted.text}",
                hint=f"the catalog knows {known} (see `envpin catalog --stock`); for an NGC image give --ngc RELEASE",
            )
        return found[0]


def _spec(text: str) -> TFSpec:
    """--stock: a version or a tag, optionally with the repository in front; a UsageError otherwise."""
    raw = text.strip()
    bad = UsageError(
        f"--stock {shown(text) if raw else repr(text)} is not a version or a tag of {REPOSITORY}",
        hint="give a version or a tag, e.g. --stock 2.20 or --stock 2.20.0-gpu",
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
                f"--stock {shown(text)} is not {REPOSITORY} on Docker Hub: --stock names the upstream "
                "tag, --base-image the copy to build from",
                hint=f"give --stock {shown(tag)} --base-image {shown(raw)}",
            )
        if digest or tag is None or not ours:
            raise bad
        if re.fullmatch(r"[0-9]+(\.[0-9]+){0,2}", tag):  # a full reference names one image: :2.20.0 is not
            # the -gpu one (the image without GPU support), so it is never taken as that one
            gpu = f"{tag}-gpu" if tag.count(".") == 2 else "2.20.0-gpu"
            raise UsageError(
                f"--stock {shown(text)} names {REPOSITORY}:{shown(tag)}, which is not a -gpu image (tags X.Y.Z-gpu)",
                hint=f"give the -gpu tag, e.g. --stock {REPOSITORY}:{gpu}, or a version alone (--stock 2.20)",
            )
        raw = tag
    try:
        return parse_tf_spec(raw.removesuffix("-gpu"))
    except SpecError:
        raise bad from None


def epoch_of(date: str) -> int:
    """'2020-01-01' -> seconds since 1970 at midnight UTC."""
    m = _DATE.match(date)
    assert m, date  # validate() checked it
    import calendar  # here: it loads datetime and locale, which no audit or recipe needs

    return calendar.timegm((int(m.group(1)), int(m.group(2)), int(m.group(3)), 0, 0, 0))


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
    """--ngc given a stock image's tag ('2.20.0-gpu'): a UsageError that names --stock (the NGC shape hint would
    only ask for YY.MM)."""
    if names_stock_tag(text):
        raise UsageError(
            f"--ngc {shown(text.strip())} names a stock TensorFlow GPU image ({REPOSITORY}), not an NGC release",
            hint=f"give it as --stock {shown(text.strip())}",
        )


def is_stock_flavor(flavor: str) -> bool:
    return flavor == STOCK_FLAVOR


def stock_path() -> str:
    return str(shipped_data_path("stock.json"))


@lru_cache(maxsize=1)
def load() -> StockCatalog:
    """The shipped stock table, validated (a CatalogError names the first problem)."""
    from envpin.files.read import parse_json, read_regular

    path = stock_path()
    try:
        text = read_regular(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CatalogError(f"stock image table {path} cannot be read: {exc}", hint="reinstall envpin") from exc
    data = parse_json(text, f"stock image table {path}", CatalogError)
    validate(data, path)
    entries = [entry(tag, rel, data["sources"]) for tag, rel in data["tags"].items()]
    entries.sort(key=lambda e: tuple(int(p) for p in e.release.split(".")), reverse=True)
    return StockCatalog(tuple(entries), data["sources"], epoch_of(data["epoch"]["value"]), path)


def validate(data: Any, origin: str = "stock image table") -> None:
    """Check the table's shape and invariants; raise CatalogError naming the first problem."""
    refuse_first(_problems(data), origin)


def _problems(data: Any) -> Iterator[str]:
    if not isinstance(data, dict) or set(data) != _TOP:
        yield f"top-level keys must be {sorted(_TOP)}"
        return
    if data["schema"] != SCHEMA_VERSION:
        yield f"schema {data['schema']!r} is not {SCHEMA_VERSION}"
        return
    if data["image_repository"] != f"docker.io/{REPOSITORY}":
        yield f"image_repository must be docker.io/{REPOSITORY}"
    epoch = data["epoch"]
    if (
        not isinstance(epoch, dict)
        or set(epoch) != {"value", "reason"}
        or not _DATE.match(str(epoch.get("value")))
        or not epoch.get("reason")
    ):
        yield "epoch needs a YYYY-MM-DD value and a reason"
    sources = data["sources"]
    for sid, src in sources.items():
        if not isinstance(src, dict) or set(src) != {"title", "url", "kind"}:
            yield f"source {sid}: needs exactly 'title', 'url' and 'kind'"
        elif src["kind"] not in (*KINDS, "usage"):
            yield f"source {sid}: kind {src['kind']!r} is not one of {[*KINDS, 'usage']}"
        elif not isinstance(src["url"], str) or not src["url"].startswith("https://"):
            yield f"source {sid}: url must be an https:// address"
    for tag, rel in data["tags"].items():
        yield from (f"{tag}: {p}" for p in _tag_problems(tag, rel, sources))


def _tag_problems(tag: str, rel: Any, sources: dict[str, Any]) -> Iterator[str]:
    m = _TAG.match(tag)
    if not m:
        yield "not a tag of the form X.Y.Z-gpu"
        return
    if not isinstance(rel, dict) or not {"published", "fields"} <= set(rel) <= {"published", "digest", "fields"}:
        yield "needs 'published' and 'fields' (and optionally 'digest')"
        return
    if not rel["published"] or any(
        sources.get(s, {}).get("kind") not in ("usage", "third-party") for s in rel["published"]
    ):
        yield "'published' must list at least one public file that uses the tag (a usage or third-party source)"
    if "digest" in rel:
        stated = rel["digest"]
        if not isinstance(stated, dict) or set(stated) != {"value", "source"} or not is_digest(stated["value"]):
            yield "digest must be {'value': 'sha256:<64 hex>', 'source': ID}"
        elif sources.get(stated["source"], {}).get("kind") in (None, "usage"):
            yield f"digest source {stated['source']!r} must be a known source that states it (not usage)"
    fields = rel["fields"]
    if set(fields) != set(RECORDED):
        yield f"fields must be exactly {list(RECORDED)}"
        return
    if fields["tf_version"]["value"] != ".".join(m.groups()):
        yield "tf_version must be the version the tag names"
    for name in RECORDED:
        yield from (f"{name}: {p}" for p in _fact_problems(name, fields[name], sources))


def _rank(sources: dict[str, Any], sid: Any) -> int:
    kind = sources.get(sid, {}).get("kind") if isinstance(sid, str) else None
    return KINDS.index(kind) if kind in KINDS else len(KINDS)


def _fact_problems(name: str, fact: Any, sources: dict[str, Any]) -> Iterator[str]:
    if not isinstance(fact, dict) or "value" not in fact or set(fact) - _FACT_KEYS:
        yield "must be an object with 'value' and 'source' or 'reason' (and optionally 'also', 'conflicts')"
        return
    value = fact["value"]
    cited = [("source", fact.get("source"))] if value is not None else []
    cited += [("also", s) for s in fact.get("also", [])]
    cited += [("conflict", c.get("source")) for c in fact.get("conflicts", []) if isinstance(c, dict)]
    if value is None and not fact.get("reason"):
        yield "null without a reason"
    if value is not None and (name in LIST_FIELDS or not isinstance(value, str) or not value):
        yield "must be a non-empty string"
    for role, sid in cited:
        if sid not in sources:
            yield f"{role} {sid!r} is not a known source"
        elif sources[sid]["kind"] == "usage":
            yield f"{role} {sid!r} shows only that a tag was published; it backs no value"
    for c in fact.get("conflicts", []):
        if not isinstance(c, dict) or set(c) != {"value", "source"}:
            yield "'conflicts' must be a list of objects with exactly 'value' and 'source'"
        elif value is None or c["value"] == value or _rank(sources, c["source"]) <= _rank(sources, fact["source"]):
            yield f"conflict {c['source']!r} must give another value from a weaker source than the value's own"
