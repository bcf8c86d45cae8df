"""The catalog's rules: what every catalog file must satisfy (envpin.knowledge.catalog).

Its shape (keys, JSON types, kinds of evidence, release months) is envpin/data/catalog.schema.json, checked
by envpin.knowledge.schema; the rules here are those between its parts: sources that exist and may give a
field (envpin.knowledge.provenance, shared with the stock table), every month from FIRST_RELEASE to
LAST_RELEASE a release or a known gap, flavors of their era with their tags, each field stored once.

Loading the shipped catalog skips this check when the file is byte for byte the one that last passed, as
recorded by `python -m envpin.knowledge.tablecheck`; any other file (an ENVPIN_CATALOG copy, a refreshed
catalog, an edited shipped file) is checked in full on every load (envpin.knowledge.schema).
"""

from __future__ import annotations

from collections.abc import Iterator

from envpin.errors import CatalogError
from envpin.knowledge import schema
from envpin.knowledge.fields import FIELDS, reference_problems
from envpin.knowledge.provenance import Grades, fact_problems
from envpin.knowledge.trust import MIRROR_KIND
from envpin.portable.ngc import FLAVOR_SUFFIX, LAST_TF1_RELEASE
from envpin.portable.versions import release_index

TYPE_CHECKING = False  # typing's, without importing typing (annotations are strings here)
if TYPE_CHECKING:
    from typing import Any

#: Kinds of evidence (grades), strongest first: a value of an earlier kind outranks a later one where both exist.
KINDS = ("image", "user", "notes", "nvidia", "sibling", "mirror", "nv-version", "third-party", "jetson")
#: MIRROR_KIND (envpin.knowledge.trust) is never a written source's kind in the catalog file; the schema's
#: enum of source kinds is this set (tests/unit/test_schemas.py).
SOURCE_KINDS = (frozenset(KINDS) - {MIRROR_KIND}) | {"usage"}
#: Fields a sibling framework's notes may give: the shared base stack, never TensorFlow or Python.
SIBLING_FIELDS = frozenset(
    {"ubuntu", "cuda", "cublas", "cudnn", "nccl", "tensorrt", "driver_min", "driver_compat", "compute_capability_min"}
)
#: The catalog's grades, with the fields each restricted kind may give.
GRADES = Grades(
    KINDS,
    {
        "sibling": (SIBLING_FIELDS, "base-stack fields"),
        "nv-version": (frozenset({"tf_version"}), "the TensorFlow version"),
        "jetson": (frozenset({"tf_version"}), "the TensorFlow version"),
    },
)
FIRST_RELEASE = "19.01"
LAST_RELEASE = "25.02"
#: Flavor naming changed with 19.11 (tf1/tf2 instead of py2/py3); tf1 images ended with LAST_TF1_RELEASE.
TF_SPLIT_RELEASE = "19.11"


def validate(data: Any, origin: str = "catalog") -> None:
    """Check the catalog against its schema, then its cross-field rules; raise one CatalogError naming the
    first problem."""
    schema.validate(data, "catalog", origin, CatalogError, _problems)


def _problems(data: dict[str, Any]) -> Iterator[str]:
    """The rules between the parts of a catalog of the schema's shape; each problem says where it is as the
    schema's do (`releases['20.02'].flavors.tf2.fields.cuda`)."""
    sources, releases, missing = data["sources"], data["releases"], data["missing_months"]
    for month, info in missing.items():
        where = schema.where("missing_months", month)
        if month in releases:
            yield f"{where}: {month} is both a release and a missing month"
        if info.get("source") is not None and info["source"] not in sources:
            yield f"{where}: unknown source {info['source']!r}"
    lo, hi = release_index(FIRST_RELEASE), release_index(LAST_RELEASE)
    for idx in range(lo, hi + 1):
        month = f"{idx // 12:02d}.{idx % 12 + 1:02d}"
        if month not in releases and month not in missing:
            yield f"{month} is neither a release nor a known missing month"
    for release, rel in releases.items():
        yield from _release_problems(release, rel, sources)


def _release_problems(release: str, rel: dict[str, Any], sources: dict[str, Any]) -> Iterator[str]:
    split = release_index(release) >= release_index(TF_SPLIT_RELEASE)
    at = schema.where("releases", release)
    for flavor, fl in rel["flavors"].items():
        where = schema.where(f"{at}.flavors", flavor)
        if flavor not in FLAVOR_SUFFIX:
            yield f"{where}: unknown flavor (one of {', '.join(FLAVOR_SUFFIX)})"
            continue
        if split != (flavor in ("tf1", "tf1-py2", "tf2")):
            yield f"{where}: flavor does not fit the naming of that era"
        if flavor in ("tf1", "tf1-py2") and release_index(release) > release_index(LAST_TF1_RELEASE):
            yield f"{where}: tf1 images ended with {LAST_TF1_RELEASE}"
        if fl["tag"] != f"{release}-{FLAVOR_SUFFIX[flavor]}":
            yield f"{where}.tag: {fl['tag']!r} should be {release}-{FLAVOR_SUFFIX[flavor]}"
        if "image" in fl:
            yield from (f"{where}.image.{p}" for p in reference_problems(fl["image"]))
        both = set(rel["fields"]) & set(fl["fields"])
        if both:
            yield f"{where}: {sorted(both)} defined at release and flavor level"
        for name in FIELDS:
            if name in fl["fields"]:
                fact, place = fl["fields"][name], f"{where}.fields.{name}"
            elif name in rel["fields"]:
                fact, place = rel["fields"][name], f"{at}.fields.{name}"
            else:
                yield f"{where}: field {name} missing (at release or flavor level)"
                continue
            yield from (f"{place}: {p}" for p in fact_problems(name, fact, sources, GRADES))
