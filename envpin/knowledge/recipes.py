"""Determinism recipes: which env vars, Python steps and caveats apply to one TensorFlow version.

The table lives in data/recipes.json (each entry cites its source; its shape is data/recipes.schema.json, the
rules between its parts are `validate`'s); `select` resolves one row, plus the shared settings and the
per-version lists of ops that raise or stay nondeterministic, into a Recipe.

Reading the table: a Recipe's fields (`env`, `steps`, `raises`, ...) and `table()` are the table's own entries,
dicts as recipes.json holds them: what `envpin recipe --json`, the recipe hash and the lock are made of, read by
key only here. Every other module reads them as typed records: `Recipe.records` (the resolved recipe; classes in
envpin.knowledge.reciperecords) and `book()` (the whole table; envpin.knowledge.recipebook). The standard-library
code inside images (envpin.probe.runtime, envpin.probe.selftest.expect) reads the same file with its own few
look-ups, as it cannot import the host side.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache

from envpin.errors import RecipeError, param
from envpin.knowledge import schema
from envpin.portable.versions import major_minor
from envpin.probe import runtime
from envpin.probe.selftest.expect import ngc_overrides
from envpin.record import Value

TYPE_CHECKING = False  # typing's, without importing typing (annotations are strings here)
if TYPE_CHECKING:
    from typing import Any

    from envpin.knowledge.distributedrecords import DistributedRecords
    from envpin.knowledge.recipebook import RecipeBook
    from envpin.knowledge.reciperecords import Item, RecipeRecords, Variable

#: Distributions a recipe row is for (the schema's enum of match.distribution).
DISTRIBUTIONS = ("ngc", "stock")


@dataclass(frozen=True, slots=True)
class Recipe(Value):
    """One resolved recipe: everything a Dockerfile and a training script need, with sources. Its fields hold the
    table's entries as recipes.json has them (what to_dict, the hash and `envpin recipe --json` are made of);
    read them as typed records through `records`."""

    id: str
    distribution: str
    tf_version: str
    summary: str
    env: tuple[dict[str, str], ...]
    unset: tuple[dict[str, str], ...]
    no_effect: tuple[dict[str, str], ...]
    steps: tuple[dict[str, str], ...]
    caveats: tuple[dict[str, str], ...]
    raises: tuple[dict[str, Any], ...]
    silent: tuple[dict[str, Any], ...]
    sources: dict[str, dict[str, str]]
    #: Where this NGC release differs from stock TensorFlow (empty for stock builds).
    ngc_overrides: tuple[dict[str, Any], ...] = ()
    #: Popular advice that is wrong for this TensorFlow, each with its docs anchor.
    advice: tuple[dict[str, Any], ...] = ()

    @property
    def records(self) -> RecipeRecords:
        """The recipe's parts as typed records (envpin.knowledge.reciperecords), field for field."""
        from envpin.knowledge.reciperecords import RecipeRecords

        return RecipeRecords.of(self.to_dict())

    def env_dict(self) -> dict[str, str]:
        """The variables to set, name -> value."""
        return {e["name"]: e["value"] for e in self.env}

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "distribution": self.distribution,
            "tf_version": self.tf_version,
            "summary": self.summary,
            "env": list(self.env),
            "unset": list(self.unset),
            "no_effect": list(self.no_effect),
            "steps": list(self.steps),
            "caveats": list(self.caveats),
            "raises_under_determinism": list(self.raises),
            "nondeterministic_under_determinism": list(self.silent),
            "ngc_overrides": list(self.ngc_overrides),
            "advice": list(self.advice),
        }

    @property
    def hash(self) -> str:
        """sha256 over the canonical JSON of the resolved recipe (labels and the lock carry it)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":")).encode()
        return "sha256:" + hashlib.sha256(blob).hexdigest()

    def source_url(self, sid: str) -> str:
        return self.sources[sid]["url"]


@dataclass(frozen=True, slots=True)
class Distributed(Value):
    """The distributed recipe for one TensorFlow version (`distributed()`): the variables baked into the image with
    the NCCL or Horovod versions that read them, the shared variables of the base recipe it relies on, the settings
    and hazards of distributed scripts on this version, what the settings cost, and caveats. Its fields hold the
    table's entries as recipes.json has them (what to_dict, the hash and `envpin recipe --json` are made of); read
    them as typed records through `records`. Apart from Recipe, so a recipe's hash (and every lock of an image
    rendered without it) stays what it was."""

    tf_version: str
    summary: str
    env: tuple[dict[str, Any], ...]
    uses_common: tuple[str, ...]
    code: tuple[dict[str, Any], ...]
    hazards: tuple[dict[str, Any], ...]
    cost: tuple[dict[str, Any], ...]
    caveats: tuple[dict[str, Any], ...]
    sources: dict[str, dict[str, str]]

    @property
    def records(self) -> DistributedRecords:
        """The parts as typed records (envpin.knowledge.distributedrecords), field for field."""
        from envpin.knowledge.distributedrecords import DistributedRecords

        return DistributedRecords.of(self.to_dict())

    def env_dict(self) -> dict[str, str]:
        """The variables the distributed recipe sets, name -> value (sorted by name)."""
        return {e["name"]: e["value"] for e in sorted(self.env, key=lambda e: e["name"])}

    def to_dict(self) -> dict[str, Any]:
        return {
            "tf_version": self.tf_version,
            "summary": self.summary,
            "env": list(self.env),
            "uses_common": list(self.uses_common),
            "code": list(self.code),
            "hazards": list(self.hazards),
            "cost": list(self.cost),
            "caveats": list(self.caveats),
        }

    @property
    def hash(self) -> str:
        """sha256 over the canonical JSON of the resolved distributed recipe (the plan, labels and lock carry it)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":")).encode()
        return "sha256:" + hashlib.sha256(blob).hexdigest()

    def source_url(self, sid: str) -> str:
        return self.sources[sid]["url"]


def distributed(tf_version: str) -> Distributed:
    """The distributed recipe for TensorFlow `tf_version` (MAJOR.MINOR...): every variable (an image may carry
    another NCCL than its catalog entry says, so none is left out: each says which versions read it), the code
    settings and hazards whose TensorFlow range holds the version, every cost and caveat."""
    data = table()
    part = data.get("distributed")
    if part is None:
        raise RecipeError("the recipe table has no distributed recipe", hint="reinstall envpin")
    mm = major_minor(tf_version)
    if mm is None:
        raise RecipeError(f"TensorFlow '{tf_version}' has no MAJOR.MINOR", hint=f"pass {param('tf')} MAJOR.MINOR")

    def here(items: list[dict[str, Any]]) -> tuple[dict[str, Any], ...]:
        return tuple(i for i in items if runtime.within(mm, i["tf_min"], i["tf_max"]))

    return Distributed(
        tf_version=tf_version,
        summary=part["summary"],
        env=tuple(part["env"]),
        uses_common=tuple(part["uses_common"]),
        code=here(part["code"]),
        hazards=here(part["hazards"]),
        cost=tuple(part["cost"]),
        caveats=tuple(part["caveats"]),
        sources=data["sources"],
    )


@lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    """The table as recipes.json holds it: trusted as it is when its bytes are the recorded ones
    (envpin.knowledge.schema), else checked in full (a RecipeError names the first problem)."""
    from envpin.files.read import parse_json, read_regular

    path = schema.shipped_data_path("recipes.json")
    try:
        raw = read_regular(path)
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecipeError(f"recipe table {path} cannot be read: {exc}", hint="reinstall envpin") from exc
    if schema.recorded("recipes", raw):
        data: dict[str, Any] = json.loads(text)
    else:
        data = parse_json(text, f"recipe table {path}", RecipeError)
        validate(data)
    return data


@lru_cache(maxsize=1)
def book() -> RecipeBook:
    """The whole table as typed records (envpin.knowledge.recipebook)."""
    from envpin.knowledge.recipebook import RecipeBook

    return RecipeBook.of(table())


def shared(kind: str) -> tuple[Variable, ...]:
    """The variables every recipe shares of one `kind` (env, unset, no_effect) as records, without the whole
    book's classes: a Dockerfile's audit reads only these of the table's common part."""
    from envpin.knowledge.reciperecords import Variable

    return tuple(map(Variable.of, table()["common"][kind]))


def validate(data: Any, origin: str = "recipes.json") -> None:
    """Check the table against its schema (recipes.schema.json), then the rules between its parts; raise one
    RecipeError naming the first problem."""
    schema.validate(data, "recipes", origin, RecipeError, _problems)


def _problems(data: dict[str, Any]) -> Iterator[str]:
    """Every source cited is known and every known source is cited; ids are unique; an entry's api_conditions
    speak of its own apis; built_on calls an API an op entry lists."""
    sources = data["sources"]
    cited: set[str] = set()
    for where, sid in _citations(data, ""):
        cited.add(sid)
        if sid not in sources:
            yield f"{where}: unknown source {sid!r}"
    ids = [row["id"] for row in data["recipes"]]
    for rid in sorted({i for i in ids if ids.count(i) > 1}):
        yield f"recipes: duplicate recipe id {rid!r}"
    named: set[str] = set()
    for key in ("raises_under_determinism", "nondeterministic_under_determinism"):
        for n, item in enumerate(data[key]):
            named.update(item["apis"])
            if not set(item.get("api_conditions", {})) <= set(item["apis"]):
                yield f"{key}[{n}].api_conditions: names an API the entry does not list in apis"
    seen: set[str] = set()
    for key in ("advice", "overridden_under_determinism"):
        for n, item in enumerate(data.get(key, [])):
            if item["id"] in seen:
                yield f"{key}[{n}].id: {item['id']!r} is the id of another advice or overridden entry"
            seen.add(item["id"])
    for n, item in enumerate(data.get("built_on", [])):
        if item["calls"] not in named:
            yield f"built_on[{n}].calls: {item['calls']!r} is no API an op entry lists"
    yield from _distributed_problems(data)
    unused = sorted(set(sources) - cited)
    if unused:
        yield f"sources: defined but cited by nothing: {unused}"


def _distributed_problems(data: dict[str, Any]) -> Iterator[str]:
    """The distributed part: its variables are not the base recipe's (an image would set one twice), the shared
    ones it names are in common.env, its code and hazard ids are unique, and each cost is about one of its
    variables or code settings."""
    part = data.get("distributed")
    if part is None:
        return
    base = {e["name"] for e in data["common"]["env"]} | {e["name"] for row in data["recipes"] for e in row["env"]}
    names = [e["name"] for e in part["env"]]
    for n, name in enumerate(names):
        if name in base:
            yield f"distributed.env[{n}].name: {name!r} is a variable of the base recipe (keep it there, once)"
        if names.count(name) > 1:
            yield f"distributed.env[{n}].name: {name!r} is listed twice"
    common = {e["name"] for e in data["common"]["env"]}
    for n, name in enumerate(part["uses_common"]):
        if name not in common:
            yield f"distributed.uses_common[{n}]: {name!r} is not a variable of common.env"
    ids = [i["id"] for key in ("code", "hazards") for i in part[key]]
    for hid in sorted({i for i in ids if ids.count(i) > 1}):
        yield f"distributed: duplicate code or hazard id {hid!r}"
    about = set(names) | {i["id"] for i in part["code"]}
    for n, item in enumerate(part["cost"]):
        if item["about"] not in about:
            yield f"distributed.cost[{n}].about: {item['about']!r} is no variable or code setting here"


def _citations(node: Any, path: str) -> Iterator[tuple[str, str]]:
    """(where, source id) of every `source` and `range_source` outside the sources themselves."""
    if isinstance(node, dict):
        for key, value in node.items():
            if path == "" and key == "sources":
                continue
            where = schema.where(path, key)
            if key in ("source", "range_source", "value_source") and isinstance(value, str):
                yield where, value
            else:
                yield from _citations(value, where)
    elif isinstance(node, list):
        for n, item in enumerate(node):
            yield from _citations(item, schema.where(path, n))


def select(tf_version: str, distribution: str = "ngc", ngc_release: str | None = None) -> Recipe:
    """Resolve the recipe for a TensorFlow version (at least MAJOR.MINOR) on NGC or stock builds.

    The selection rule itself lives in envpin.probe.runtime so the in-image helper applies the very
    same rule to the very same table.
    """
    if distribution not in DISTRIBUTIONS:
        raise RecipeError(f"unknown distribution {distribution!r}", hint="use 'ngc' or 'stock'")
    data = table()
    try:
        row = runtime.resolve(data, tf_version, distribution, ngc_release)
    except ValueError as exc:
        raise RecipeError(
            str(exc), hint=f"pass {param('tf')} MAJOR.MINOR (and {param('ngc')} YY.MM for NGC images)"
        ) from exc
    except LookupError as exc:
        raise RecipeError(str(exc)) from exc
    overrides = ngc_overrides(data, tf_version, ngc_release) if distribution == "ngc" else []
    covered = {check for o in overrides for check in o["checks"]}
    mm = major_minor(tf_version)  # runtime.resolve took it: it has one
    return Recipe(
        id=row["id"],
        distribution=distribution,
        tf_version=tf_version,
        summary=row["summary"],
        env=tuple(row["env"]),
        unset=tuple(row["unset"]),
        no_effect=tuple(row["no_effect"]),
        steps=tuple(row["steps"]),
        caveats=tuple(row["caveats"]),
        raises=tuple(e for e in row["raises_under_determinism"] if not _replaced(e, covered)),
        silent=tuple(e for e in row["nondeterministic_under_determinism"] if not _replaced(e, covered)),
        sources=data["sources"],
        ngc_overrides=tuple(overrides),
        advice=tuple(
            a for a in data.get("advice", []) if mm is not None and runtime.within(mm, a["tf_min"], a["tf_max"])
        ),
    )


def _replaced(entry: Item, covered: set[str]) -> bool:
    """A stock entry whose every check an NGC override speaks of (`covered`: NVIDIA's build behaves otherwise)."""
    checks = set(entry["checks"])
    return bool(checks) and checks <= covered


def rows() -> list[dict[str, Any]]:
    """The recipe rows as the table holds them (typed: `book().rows`)."""
    return list(table()["recipes"])


def op_apis(item: Mapping[str, Any]) -> tuple[str, ...]:
    """The Python names an op entry (or a common caveat) of the table is about: fully qualified `tf.`/`keras.`
    names, Keras' `tf.keras.*` and `keras.*` both, a trailing `*` for a prefix (`tf.image.random_*`). Typed:
    OpEntry.apis and Note.apis."""
    return tuple(item.get("apis") or ())


def overridden(tf_version: str) -> list[dict[str, Any]]:
    """What op determinism overrides on TensorFlow `tf_version` (MAJOR.MINOR...): tf.data's deterministic=False
    from 2.7, stateful random ops in a parallel map run serially. Not part of a Recipe (its hash stays as it was):
    the script rules read it for the version they judge. The table's entries; typed: `book().overridden_on`."""
    mm = major_minor(tf_version)
    return [
        o
        for o in table().get("overridden_under_determinism", [])
        if mm is not None and runtime.within(mm, o["tf_min"], o["tf_max"])
    ]


def built_on() -> list[dict[str, Any]]:
    """Library APIs that run a listed op inside (Keras' sparse categorical cross-entropy runs
    tf.nn.sparse_softmax_cross_entropy_with_logits): `apis`, `calls` (an API of the op entries) and `source`.
    The table's entries; typed: `book().built_on`."""
    return list(table().get("built_on", []))
