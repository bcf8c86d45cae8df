"""The catalog's schema: the shape and invariants every catalog file must satisfy (envpin.knowledge.catalog).

Loading the shipped catalog skips this check when the file is byte for byte the one it last passed: its SHA-256
is recorded in envpin/data/catalog.checked by `python -m envpin.knowledge.catalogcheck`, which validates the
file first, and tests/unit/test_catalog_checked.py fails when the record and the file differ. Any other file (an
ENVPIN_CATALOG copy, a refreshed catalog, an edited shipped file) is checked in full on every load.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from envpin.errors import CatalogError, shown
from envpin.knowledge.fields import FIELDS, LIST_FIELDS, image_problems
from envpin.knowledge.trust import MIRROR_KIND
from envpin.knowledge.versions import release_index
from envpin.portable.ngc import FLAVOR_SUFFIX, LAST_TF1_RELEASE

TYPE_CHECKING = False  # typing's, without importing typing (annotations are strings here)
if TYPE_CHECKING:
    from typing import Any

SCHEMA_VERSION = 2
#: Kinds of evidence (grades), strongest first: a value of an earlier kind outranks a later one where both exist.
KINDS = ("image", "user", "notes", "nvidia", "sibling", "mirror", "nv-version", "third-party", "jetson")
#: MIRROR_KIND (envpin.knowledge.trust) is never a written source's kind in the catalog file.
SOURCE_KINDS = (frozenset(KINDS) - {MIRROR_KIND}) | {"usage"}
#: Fields a sibling framework's notes may give: the shared base stack, never TensorFlow or Python.
SIBLING_FIELDS = frozenset(
    {"ubuntu", "cuda", "cublas", "cudnn", "nccl", "tensorrt", "driver_min", "driver_compat", "compute_capability_min"}
)
#: Fields each restricted kind may give; kinds not listed may give any field.
KIND_FIELDS = {"sibling": SIBLING_FIELDS, "nv-version": frozenset({"tf_version"}), "jetson": frozenset({"tf_version"})}
_SOURCE_KEYS = {"title", "url", "kind"}
_FACT_KEYS = {"value", "source", "reason", "also", "conflicts"}
FIRST_RELEASE = "19.01"
LAST_RELEASE = "25.02"
#: Flavor naming changed with 19.11 (tf1/tf2 instead of py2/py3); tf1 images ended with LAST_TF1_RELEASE.
TF_SPLIT_RELEASE = "19.11"
_RELEASE_RE = re.compile(r"[0-9]{2}\.(0[1-9]|1[0-2])\Z")
_TOP_KEYS = {"schema", "image_repository", "sources", "missing_months", "releases", "notes"}


def shipped_data_path(name: str) -> Path:
    """A data file shipped inside the package (envpin/data/NAME): beside the package's own files when they are
    on disk (no importlib.resources, whose readers cost ~4 ms of every start-up), else as a package resource."""
    import envpin

    here = Path(envpin.__file__).parent if getattr(envpin, "__file__", None) else None
    if here is not None and here.is_dir():
        return here / "data" / name
    from importlib import resources

    return Path(str(resources.files("envpin") / "data" / name))


def shipped_catalog_path() -> Path:
    return shipped_data_path("catalog.json")


def checked_record_path() -> Path:
    """The SHA-256 of the shipped catalog as last validated in full (envpin.knowledge.catalogcheck)."""
    return shipped_catalog_path().with_name("catalog.checked")


def validate(data: Any, origin: str = "catalog") -> None:
    """Check the catalog's shape and invariants; raise CatalogError naming the first problem."""
    refuse_first(_problems(data), origin)


def refuse_first(problems: Iterator[str], origin: str) -> None:
    """One CatalogError naming the first of a table's problems and how many more there are (none: nothing)."""
    found = list(problems)
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise CatalogError(f"{origin} is invalid: {found[0]}{more}")


def _problems(data: Any) -> Iterator[str]:
    if not isinstance(data, dict):
        yield "top level is not an object"
        return
    if set(data) != _TOP_KEYS:
        yield f"top-level keys must be {sorted(_TOP_KEYS)}, got {sorted(data)}"
        return
    if data["schema"] != SCHEMA_VERSION:
        yield f"schema {shown(repr(data['schema']))} is not {SCHEMA_VERSION}"
        return
    shape = list(_shape_problems(data))
    if shape:  # wrong types: the checks below (and the loader) may then assume the right ones
        yield from shape
        return
    sources = data["sources"]
    for sid, src in sources.items():
        if not isinstance(src, dict) or set(src) != _SOURCE_KEYS:
            yield f"source {sid}: needs exactly 'title', 'url' and 'kind'"
        elif src["kind"] not in SOURCE_KINDS:
            yield f"source {sid}: kind {src['kind']!r} is not one of {sorted(SOURCE_KINDS)}"
        elif not isinstance(src["url"], str) or not src["url"].startswith("https://"):
            yield f"source {sid}: url must be an https:// address"
    releases, missing = data["releases"], data["missing_months"]
    for month, info in missing.items():
        if not _RELEASE_RE.match(month):
            yield f"missing month {month!r} is not YY.MM"
        elif month in releases:
            yield f"{month} is both a release and a missing month"
        if not isinstance(info, dict) or not info.get("reason"):
            yield f"missing month {month}: needs a reason"
        elif info.get("source") is not None and info["source"] not in sources:
            yield f"missing month {month}: unknown source {info['source']!r}"
    lo, hi = release_index(FIRST_RELEASE), release_index(LAST_RELEASE)
    for idx in range(lo, hi + 1):
        month = f"{idx // 12:02d}.{idx % 12 + 1:02d}"
        if month not in releases and month not in missing:
            yield f"{month} is neither a release nor a known missing month"
    for release, rel in releases.items():
        yield from _release_problems(release, rel, sources)


def _shape_problems(data: dict[str, Any]) -> Iterator[str]:
    """Every container and id has the JSON type the schema gives it (objects, lists, strings), so a file with a
    list where an object belongs is one CatalogError, never an AttributeError or TypeError further on."""

    def obj(value: Any) -> bool:
        return isinstance(value, dict)

    def text(value: Any, null: bool = False) -> bool:
        return isinstance(value, str) or (null and value is None)

    if not text(data["image_repository"]) or not data["image_repository"]:
        yield "image_repository must be a non-empty string"
    if not isinstance(data["notes"], list):
        yield "notes must be a list"
    for key in ("sources", "missing_months", "releases"):
        if not obj(data[key]):
            yield f"{key} must be an object"
    if not all(obj(data[k]) for k in ("sources", "missing_months", "releases")):
        return
    for sid, src in data["sources"].items():
        if not obj(src) or not all(text(v) for v in src.values()):
            yield f"source {shown(sid)}: must be an object of strings"
    for month, info in data["missing_months"].items():
        if not obj(info) or not text(info.get("reason"), True) or not text(info.get("source"), True):
            yield f"missing month {shown(month)}: must be an object with a string reason (and source)"
    for release, rel in data["releases"].items():
        if not obj(rel) or not obj(rel.get("fields", {})) or not obj(rel.get("flavors", {})):
            yield f"{shown(release)}: 'fields' and 'flavors' must be objects"
            continue
        facts = [(f"{release}.{n}", f) for n, f in rel.get("fields", {}).items()]
        for flavor, fl in rel.get("flavors", {}).items():
            if not obj(fl) or not text(fl.get("tag", "")) or not obj(fl.get("fields", {})):
                yield f"{release}/{shown(flavor)}: must be an object with a string 'tag' and an object 'fields'"
                continue
            facts += [(f"{release}/{flavor}.{n}", f) for n, f in fl.get("fields", {}).items()]
        for where, fact in facts:
            problem = _fact_shape(fact)
            if problem:
                yield f"{shown(where)}: {problem}"


def _fact_shape(fact: Any) -> str | None:
    """What is wrong with the JSON types of one field's object, or None."""

    def value_ok(v: Any) -> bool:
        return v is None or isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))

    if not isinstance(fact, dict):
        return "must be an object"
    if not value_ok(fact.get("value")):
        return "value must be a string, a list of strings or null"
    for key in ("source", "reason"):
        if not (fact.get(key) is None or isinstance(fact[key], str)):
            return f"{key} must be a string"
    also = fact.get("also", [])
    if not isinstance(also, list) or not all(isinstance(a, str) for a in also):
        return "'also' must be a list of source ids"
    conflicts = fact.get("conflicts", [])
    if not isinstance(conflicts, list) or not all(
        isinstance(c, dict) and isinstance(c.get("source"), str) and value_ok(c.get("value")) for c in conflicts
    ):
        return "'conflicts' must be a list of objects with exactly 'value' and 'source' (strings)"
    return None


def _release_problems(release: str, rel: Any, sources: dict[str, Any]) -> Iterator[str]:
    if not _RELEASE_RE.match(release):
        yield f"release {release!r} is not YY.MM"
        return
    if not isinstance(rel, dict) or set(rel) != {"fields", "flavors"}:
        yield f"{release}: needs exactly 'fields' and 'flavors'"
        return
    if not rel["flavors"]:
        yield f"{release}: no flavors"
    split = release_index(release) >= release_index(TF_SPLIT_RELEASE)
    for flavor, fl in rel["flavors"].items():
        where = f"{release}/{flavor}"
        if flavor not in FLAVOR_SUFFIX:
            yield f"{where}: unknown flavor"
            continue
        if split != (flavor in ("tf1", "tf1-py2", "tf2")):
            yield f"{where}: flavor does not fit the naming of that era"
        if flavor in ("tf1", "tf1-py2") and release_index(release) > release_index(LAST_TF1_RELEASE):
            yield f"{where}: tf1 images ended with {LAST_TF1_RELEASE}"
        if not isinstance(fl, dict) or not {"tag", "fields"} <= set(fl) or set(fl) - {"tag", "fields", "image"}:
            yield f"{where}: needs 'tag' and 'fields' (and optionally 'image')"
            continue
        if fl["tag"] != f"{release}-{FLAVOR_SUFFIX[flavor]}":
            yield f"{where}: tag {fl['tag']!r} should be {release}-{FLAVOR_SUFFIX[flavor]}"
        if "image" in fl:
            yield from (f"{where}.image: {p}" for p in image_problems(fl["image"]))
        both = set(rel["fields"]) & set(fl["fields"])
        if both:
            yield f"{where}: {sorted(both)} defined at release and flavor level"
        merged = {**rel["fields"], **fl["fields"]}
        unknown = set(merged) - set(FIELDS)
        if unknown:
            yield f"{where}: unknown fields {sorted(unknown)}"
        for name in FIELDS:
            if name not in merged:
                yield f"{where}: field {name} missing"
            else:
                yield from (f"{where}.{name}: {p}" for p in _fact_problems(name, merged[name], sources))


def _fact_problems(name: str, fact: Any, sources: dict[str, Any]) -> Iterator[str]:
    if not isinstance(fact, dict) or "value" not in fact or set(fact) - _FACT_KEYS:
        yield "must be an object with 'value' and 'source' or 'reason' (and optionally 'also', 'conflicts')"
        return
    value = fact["value"]
    if value is None:
        if not fact.get("reason"):
            yield "null without a reason"
        if "also" in fact:
            yield "'also' needs a value: it lists further sources giving the same value"
    else:
        yield from _backing_problems(name, fact.get("source"), sources, "source")
        yield from _value_problems(name, value)
    if value is None and fact.get("source") is not None and fact["source"] not in sources:
        yield f"source {fact['source']!r} is not a known source"
    also = fact.get("also", [])
    if not isinstance(also, list) or not all(isinstance(a, str) for a in also):
        yield "'also' must be a list of source ids"
        also = []
    if len(set(also)) != len(also) or (fact.get("source") in also):
        yield "'also' repeats a source"
    for sid in also:
        yield from _backing_problems(name, sid, sources, "also")
    yield from _conflict_problems(name, fact, sources)


def _backing_problems(name: str, sid: Any, sources: dict[str, Any], role: str) -> Iterator[str]:
    """A source id that backs a value: known, able to back a value, allowed to give this field."""
    if sid not in sources:
        yield f"{role} {sid!r} is not a known source"
        return
    kind = sources[sid].get("kind")
    if kind == "usage":
        yield f"{role} {sid!r} shows only that a tag was published; it backs no value"
    elif kind == "sibling" and name not in SIBLING_FIELDS:
        yield f"a sibling framework's notes cannot give {name} (base-stack fields only)"
    elif kind in KIND_FIELDS and name not in KIND_FIELDS[kind]:
        yield f"{kind} evidence gives the TensorFlow version only, not {name} ({role} {sid!r})"


def _value_problems(name: str, value: Any) -> Iterator[str]:
    if name in LIST_FIELDS:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            yield "must be a list of strings"
    elif not isinstance(value, str) or not value:
        yield "must be a non-empty string"


def _rank(sources: dict[str, Any], sid: Any) -> int:
    kind = sources.get(sid, {}).get("kind") if isinstance(sid, str) else None
    return KINDS.index(kind) if kind in KINDS else len(KINDS)


def _conflict_problems(name: str, fact: dict[str, Any], sources: dict[str, Any]) -> Iterator[str]:
    """Conflicts: sources giving another value. With a value, each is weaker than the value's source; with
    null, they are the disagreeing candidates of one grade (at least two values)."""
    conflicts = fact.get("conflicts", [])
    if not isinstance(conflicts, list) or not all(
        isinstance(c, dict) and set(c) == {"value", "source"} for c in conflicts
    ):
        yield "'conflicts' must be a list of objects with exactly 'value' and 'source'"
        return
    value = fact["value"]
    for c in conflicts:
        yield from (f"conflict {c['source']!r}: {p}" for p in _value_problems(name, c["value"]))
        yield from _backing_problems(name, c["source"], sources, "conflict")
        if value is not None and c["value"] == value:
            yield f"conflict {c['source']!r} gives the same value {value!r}: list it under 'also'"
        if value is not None and _rank(sources, c["source"]) <= _rank(sources, fact.get("source")):
            yield (
                f"conflict {c['source']!r} is not weaker than the value's source {fact.get('source')!r}: "
                "where sources of the same grade disagree the value stays null"
            )
    if value is None and conflicts:
        if len({repr(c["value"]) for c in conflicts}) < 2:
            yield "a null with conflicts needs at least two different candidate values"
        if len({_rank(sources, c["source"]) for c in conflicts}) > 1:
            yield "the candidates of a null are of different grades: the strongest one gives the value"


def digest(raw: bytes) -> str:
    """What the record holds: the SHA-256 of the catalog file's bytes, in hex."""
    import hashlib

    return hashlib.sha256(raw).hexdigest()


def record(path: Path, record_path: Path) -> str:
    """Validate the catalog file at `path` in full, then record its digest (a CatalogError if it is invalid,
    and nothing written)."""
    import json

    from envpin.files.write import atomic_write

    raw = path.read_bytes()
    validate(json.loads(raw.decode("utf-8")), f"catalog file {path}")
    atomic_write(record_path, (digest(raw) + "\n").encode("ascii"))
    return digest(raw)


if __name__ == "__main__":  # the record is the output: nothing is printed
    record(shipped_catalog_path(), checked_record_path())
