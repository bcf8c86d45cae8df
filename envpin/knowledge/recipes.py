"""Determinism recipes: which env vars, Python steps and caveats apply to one TensorFlow version.

The table lives in data/recipes.json (each row cites its source); this module validates it and
resolves one row, plus the shared settings and the per-version list of ops that raise, into a Recipe.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from functools import lru_cache

from envpin.errors import RecipeError
from envpin.portable.versions import parse_version
from envpin.probe import runtime
from envpin.probe.selftest.expect import ngc_overrides
from envpin.record import Value

TYPE_CHECKING = False  # typing's, without importing typing (annotations are strings here)
if TYPE_CHECKING:
    from typing import Any

SCHEMA_VERSION = 1
#: Python-side steps the runtime helper (envpin.probe.runtime) knows how to perform.
STEPS = frozenset(
    {
        "seed_python",
        "seed_numpy",
        "seed_tf",
        "keras_set_random_seed",
        "enable_op_determinism",
        "fwr13y_enable_determinism",
        "keras3_no_auto_xla",
    }
)
DISTRIBUTIONS = ("ngc", "stock")
DEVICES = ("gpu", "cpu", "any")
_RAISE_KEYS = {"op", "apis", "tf_min", "tf_max", "devices", "exception", "message", "checks", "source"}
_SILENT_KEYS = {"op", "apis", "tf_min", "tf_max", "devices", "why", "checks", "source"}
#: Optional keys of op entries: a Keras range (Keras 2 and 3 differ), one platform, what is not settled yet; a
#: condition on the call a script cannot show ("the matrix has one column"), one on how TensorFlow was built
#: (nothing in a script tells), `xla` (the entry is about XLA-compiled code), the setting a script's context
#: decides (CONTEXTS), and the source of the version range where another source than `source` settles it.
_OPTIONAL_KEYS = {
    "keras_min",
    "keras_max",
    "platform",
    "unverified",
    "condition",
    "build_condition",
    "xla",
    "context",
    "range_source",
    "api_conditions",
}
#: What only raising entries may carry: the setting that turns the exception off, and a work-around in code,
#: each with its own source.
_RAISE_OPTIONAL_KEYS = {"escape_hatch", "work_around"}
_HATCH_KEYS = {"name", "value", "effect", "source"}
#: Where an entry applies other than at any call of its APIs: calls made without a seed while no global seed is
#: set (Keras random layers), calls inside a tf.data map with num_parallel_calls > 1 (a common caveat).
CONTEXTS = ("no_global_seed", "parallel_map")
_BUILT_ON_KEYS = {"apis", "calls", "source"}
#: A Python API name: fully qualified under tf. or keras. (tf.keras.* and keras.* both listed where both exist);
#: a trailing * stands for every name with that prefix (tf.image.random_*).
_API = re.compile(r"(tf|keras)(\.[A-Za-z_]\w*)+\*?")
PLATFORMS = ("windows", "linux", "darwin")
_OVERRIDE_KEYS = {"op", "ngc_min", "ngc_max", "tf_min", "tf_max", "devices", "verdict", "why", "checks", "source"}
OVERRIDE_VERDICTS = ("deterministic", "nondeterministic", "raises")
_ADVICE_KEYS = {"id", "tf_min", "tf_max", "text", "doc", "source"}
#: What op determinism overrides in a script's own request (tf.data's deterministic=False): `effect` says what
#: happens instead, so a rule can tell a cost in speed from a change in results.
_OVERRIDDEN_KEYS = {"id", "what", "tf_min", "tf_max", "effect", "source"}


@dataclass(frozen=True, slots=True)
class Recipe(Value):
    """One resolved recipe: everything a Dockerfile and a training script need, with sources."""

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

    def env_dict(self) -> dict[str, str]:
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


@lru_cache(maxsize=1)
def table() -> dict[str, Any]:
    from envpin.files.read import parse_json, read_regular
    from envpin.knowledge.catalogcheck import shipped_data_path  # not importlib.resources: ~4 ms of start-up

    path = shipped_data_path("recipes.json")
    try:
        text = read_regular(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RecipeError(f"recipe table {path} cannot be read: {exc}", hint="reinstall envpin") from exc
    data = parse_json(text, f"recipe table {path}", RecipeError)
    validate(data)
    return data


def validate(data: Any) -> None:
    """Schema check: every row complete, every source known, every step implemented."""
    problems: list[str] = []
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_VERSION:
        raise RecipeError("recipes.json: unknown schema")
    sources = data["sources"]
    cited: set[str] = set()

    def cite(where: str, item: dict[str, Any], key: str = "source") -> None:
        cited.add(item.get(key))  # type: ignore[arg-type]
        if item.get(key) not in sources:
            problems.append(f"{where}: unknown source {item.get(key)!r}")

    for key in ("env", "unset", "no_effect", "caveats"):
        for item in data["common"][key]:
            cite(f"common.{key}", item)
    for item in data["common"]["caveats"]:
        if (
            not {"text", "source"} <= set(item) <= {"text", "source", "apis", "context"}
            or not _apis_ok(item.get("apis", []))
            or item.get("context", CONTEXTS[0]) not in CONTEXTS
        ):
            problems.append("common.caveats entries need text and source (and optionally apis and a context)")
    for item in data["common"]["no_effect"]:
        if set(item) != {"name", "instead", "why", "source"}:
            problems.append("common.no_effect entries need name, instead, why, source")
    seen = set()
    for row in data["recipes"]:
        rid = row.get("id")
        if rid in seen:
            problems.append(f"duplicate recipe id {rid}")
        seen.add(rid)
        if set(row) != {"id", "match", "summary", "env", "steps", "caveats"}:
            problems.append(f"{rid}: wrong keys {sorted(row)}")
            continue
        if row["match"].get("distribution") not in DISTRIBUTIONS:
            problems.append(f"{rid}: distribution must be one of {DISTRIBUTIONS}")
        for item in row["env"]:
            if not {"name", "value", "why", "source"} <= set(item) <= {"name", "value", "why", "source", "unverified"}:
                problems.append(f"{rid}: env entries need name, value, why, source (and optionally unverified)")
            cite(rid, item)
        for item in row["steps"]:
            if item.get("step") not in STEPS:
                problems.append(f"{rid}: unknown step {item.get('step')!r}")
            cite(rid, item)
        for item in row["caveats"]:
            cite(rid, item)
    named: set[str] = set()
    for key, keys, optional in (
        ("raises_under_determinism", _RAISE_KEYS, _OPTIONAL_KEYS | _RAISE_OPTIONAL_KEYS),
        ("nondeterministic_under_determinism", _SILENT_KEYS, _OPTIONAL_KEYS),
    ):
        for item in data[key]:
            where = f"{key} {item.get('op')}"
            cite(where, item)
            named.update(item.get("apis") or ())
            if "range_source" in item:
                cite(where, item, "range_source")
            hatch = item.get("escape_hatch")
            if hatch is not None and "escape_hatch" in optional:
                if (
                    not isinstance(hatch, dict)
                    or set(hatch) != _HATCH_KEYS
                    or not re.fullmatch(r"[A-Z][A-Z0-9_]+", str(hatch["name"]))
                ):
                    problems.append(f"{where}: escape_hatch needs exactly {sorted(_HATCH_KEYS)}, name an env var")
                else:
                    cite(where, hatch)
            work = item.get("work_around")
            if work is not None and "work_around" in optional:
                if not isinstance(work, dict) or set(work) != {"text", "source"}:
                    problems.append(f"{where}: work_around needs exactly text and source")
                else:
                    cite(where, work)
            conds = item.get("api_conditions", {})
            if (
                not isinstance(conds, dict)
                or not set(conds) <= set(item.get("apis") or ())
                or not all(isinstance(v, str) for v in conds.values())
            ):
                problems.append(f"{where}: api_conditions maps some of the entry's apis to a condition text")
            if not keys <= set(item) <= keys | optional:
                problems.append(f"{where}: needs {sorted(keys)} (and optionally {sorted(optional)})")
            elif not _apis_ok(item["apis"]):
                problems.append(f"{where}: apis must be a list of tf./keras. names")
            elif (
                not all(isinstance(item.get(k, ""), str) for k in ("condition", "build_condition"))
                or not isinstance(item.get("xla", False), bool)
                or item.get("context", CONTEXTS[0]) not in CONTEXTS
            ):
                problems.append(f"{where}: condition/build_condition are text, xla a bool, context one of {CONTEXTS}")
            elif item["devices"] not in DEVICES or not isinstance(item["checks"], list):
                problems.append(f"{where}: devices must be one of {DEVICES} and checks a list")
            elif item.get("platform", "linux") not in PLATFORMS:
                problems.append(f"{where}: platform must be one of {PLATFORMS}")
            elif not all(_version_ok(item.get(k)) for k in ("tf_min", "tf_max", "keras_min", "keras_max")):
                problems.append(f"{where}: versions must be MAJOR.MINOR")
    for item in data.get("ngc_overrides", []):
        where = f"ngc_overrides {item.get('op')}"
        cite(where, item)
        if set(item) != _OVERRIDE_KEYS:
            problems.append(f"{where}: needs exactly {sorted(_OVERRIDE_KEYS)}")
        elif item["verdict"] not in OVERRIDE_VERDICTS or item["devices"] not in DEVICES:
            problems.append(f"{where}: verdict must be one of {OVERRIDE_VERDICTS}, devices one of {DEVICES}")
        elif not all(_release_ok(item.get(k)) for k in ("ngc_min", "ngc_max")):
            problems.append(f"{where}: ngc_min/ngc_max must be NGC releases YY.MM")
    ids = set()
    for item in data.get("advice", []):
        where = f"advice {item.get('id')}"
        cite(where, item)
        if set(item) != _ADVICE_KEYS or item["id"] in ids or not str(item["doc"]).startswith("docs/"):
            problems.append(f"{where}: needs exactly {sorted(_ADVICE_KEYS)}, a unique id and a docs/ page")
        ids.add(item.get("id"))
    for item in data.get("overridden_under_determinism", []):
        where = f"overridden_under_determinism {item.get('id')}"
        cite(where, item)
        if "range_source" in item:
            cite(where, item, "range_source")
        if (
            not _OVERRIDDEN_KEYS <= set(item) <= _OVERRIDDEN_KEYS | {"range_source"}
            or item["id"] in ids
            or not all(_version_ok(item.get(k)) for k in ("tf_min", "tf_max"))
            or item["tf_min"] is None
        ):
            problems.append(
                f"{where}: needs exactly {sorted(_OVERRIDDEN_KEYS)} (and optionally range_source), "
                "a unique id and MAJOR.MINOR versions"
            )
        ids.add(item.get("id"))
    for item in data.get("built_on", []):
        where = f"built_on {item.get('calls')}"
        cite(where, item)
        if set(item) != _BUILT_ON_KEYS or not _apis_ok(item["apis"]) or item["calls"] not in named:
            problems.append(f"{where}: needs exactly {sorted(_BUILT_ON_KEYS)}, and calls an API an op entry lists")
    unused = sorted(set(sources) - cited)
    if unused:
        problems.append(f"sources defined but cited by nothing: {unused}")
    if problems:
        raise RecipeError(f"recipes.json is invalid: {problems[0]}")


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
        raise RecipeError(str(exc), hint="pass --tf MAJOR.MINOR (and --ngc YY.MM for NGC images)") from exc
    except LookupError as exc:
        raise RecipeError(str(exc)) from exc
    overrides = ngc_overrides(data, tf_version, ngc_release) if distribution == "ngc" else []
    mm = tuple(parse_version(tf_version)[:2])
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
        raises=tuple(e for e in row["raises_under_determinism"] if not _replaced(e, overrides)),
        silent=tuple(e for e in row["nondeterministic_under_determinism"] if not _replaced(e, overrides)),
        sources=data["sources"],
        ngc_overrides=tuple(overrides),
        advice=tuple(a for a in data.get("advice", []) if runtime.within(mm, a["tf_min"], a["tf_max"])),
    )


def _replaced(entry: dict[str, Any], overrides: list[dict[str, Any]]) -> bool:
    """A stock entry whose every check an NGC override speaks of (NVIDIA's build behaves otherwise there)."""
    checks = set(entry["checks"])
    covered = {c for o in overrides for c in o["checks"]}
    return bool(checks) and checks <= covered


def _version_ok(value: Any) -> bool:
    return value is None or bool(re.fullmatch(r"[0-9]+\.[0-9]+", str(value)))


def _release_ok(value: Any) -> bool:
    return value is None or bool(re.fullmatch(r"[0-9]{2}\.(0[1-9]|1[0-2])", str(value)))


def rows() -> list[dict[str, Any]]:
    """The raw recipe rows, for the README table and `envpin recipe --all`."""
    return list(table()["recipes"])


def _apis_ok(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(a, str) and _API.fullmatch(a) for a in value)


def op_apis(item: dict[str, Any]) -> tuple[str, ...]:
    """The Python names an op entry (or a common caveat) of the table is about: fully qualified `tf.`/`keras.`
    names, Keras' `tf.keras.*` and `keras.*` both, a trailing `*` for a prefix (`tf.image.random_*`)."""
    return tuple(item.get("apis") or ())


def overridden(tf_version: str) -> list[dict[str, Any]]:
    """What op determinism overrides on TensorFlow `tf_version` (MAJOR.MINOR...): tf.data's deterministic=False
    from 2.7, stateful random ops in a parallel map run serially. Not part of a Recipe (its hash stays as it was):
    the script rules read it for the version they judge."""
    mm = tuple(parse_version(tf_version)[:2])
    return [o for o in table().get("overridden_under_determinism", []) if runtime.within(mm, o["tf_min"], o["tf_max"])]


def built_on() -> list[dict[str, Any]]:
    """Library APIs that run a listed op inside (Keras' sparse categorical cross-entropy runs
    tf.nn.sparse_softmax_cross_entropy_with_logits): `apis`, `calls` (an API of the op entries) and `source`."""
    return list(table().get("built_on", []))
