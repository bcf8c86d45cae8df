"""The checks over one Python training script: one walk over its syntax tree collects calls, environment
settings and assignments; each rule then judges what was collected against the script's TensorFlow.

Which ops raise or stay nondeterministic, on which versions, under which names (`apis`), with which escape
hatches and conditions, which library APIs run them inside (`built_on`), and which random APIs are racy in a
parallel tf.data map are read from the recipe table (envpin.knowledge.recipes): this module holds no list of ops.
It knows Python's and Keras' names only: which calls seed a generator, which draw from one, which method trains a
model.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass

from envpin.audit.check import Finding
from envpin.audit.python import rules as R
from envpin.audit.python.names import canonical
from envpin.audit.python.script import Script, ScriptTarget, _Call, _const, _is_model_compile, _Missing, _mm
from envpin.knowledge import recipes
from envpin.knowledge.recipes import Recipe
from envpin.record import Value

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from typing import Any

__all__ = ["CHECKS", "Script", "ScriptTarget", "run_checks", "switch_name"]

#: Python's global random functions (module random) that draw from the shared generator.
_PY_RANDOM = frozenset(
    {
        "random",
        "randint",
        "randrange",
        "choice",
        "choices",
        "shuffle",
        "sample",
        "uniform",
        "gauss",
        "normalvariate",
        "triangular",
        "betavariate",
        "expovariate",
        "getrandbits",
    }
)
#: numpy.random attributes that are not draws from the global generator.
_NP_NOT_DRAWS = frozenset(
    {
        "seed",
        "default_rng",
        "RandomState",
        "Generator",
        "SeedSequence",
        "get_state",
        "set_state",
        "PCG64",
        "MT19937",
        "Philox",
        "SFC64",
        "BitGenerator",
        "bit_generator",
    }
)
#: Values that differ in every run: a seed made from one is no seed.
_CLOCKS = frozenset(
    {
        "time.time",
        "time.time_ns",
        "time.perf_counter",
        "time.perf_counter_ns",
        "time.monotonic",
        "time.monotonic_ns",
        "datetime.datetime.now",
        "datetime.datetime.utcnow",
        "datetime.now",
        "datetime.utcnow",
        "os.getpid",
        "os.urandom",
        "uuid.uuid1",
        "uuid.uuid4",
        "random.SystemRandom",
        "secrets.randbits",
        "secrets.randbelow",
        "secrets.token_bytes",
        "secrets.token_hex",
    }
)
#: Calls that set a seed (last name component), and keywords that pass one.
_SEEDERS = frozenset({"seed", "set_seed", "set_random_seed", "default_rng", "RandomState", "Random", "manual_seed"})
_SEED_KEYWORDS = frozenset({"seed", "random_state", "random_seed"})
_XLA_AUTO = re.compile(r"--tf_xla_auto_jit=(-?\d+|\w+)")
_DEFAULT_KW = re.compile(r"default (\w+)='(\w+)'")


# --- the table's facts, matched against calls ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Entry(Value):
    """A table entry as calls meet it: ``apis`` its canonical names (envpin.audit.python.names), as a script's
    calls are resolved; ``xla`` whether it is about XLA compilation (judged by the jit rules, not per call)."""

    item: dict[str, Any]
    apis: tuple[str, ...]
    xla: bool


def _apis(item: dict[str, Any]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(canonical(a) for a in recipes.op_apis(item)))


def _entries(items: tuple[dict[str, Any], ...], keras: int | None = None, context: str | None = None) -> list[_Entry]:
    """The entries a script can meet at a call: not those for another platform than Linux (images are Linux), nor
    those for a Keras major version other than the script's (`keras`: 2 or 3, None when unknown), nor those that
    depend on how TensorFlow was built; only those of `context` (the table's), none of another context."""
    out = []
    for item in items:
        if "build_condition" in item or item.get("platform") not in (None, "linux"):
            continue  # a condition on how TensorFlow was built or where it runs: nothing in a script tells
        if item.get("context") != context or (keras is not None and not _keras_in(item, keras)):
            continue
        out.append(_Entry(item, _apis(item), bool(item.get("xla"))))
    return out


def _keras_in(item: dict[str, Any], major: int) -> bool:
    lo, hi = item.get("keras_min"), item.get("keras_max")
    return not ((lo and _mm(lo)[0] > major) or (hi and _mm(hi)[0] < major))


def _matches(c: _Call, api: str, compat_split: frozenset[str]) -> bool:
    """Whether a call is of a (canonical) API of the table. TensorFlow exports an op under several modules
    (tf.unsorted_segment_sum, tf.math..., tf.compat.v1...), so tf. names match on their last component, raw_ops
    only raw_ops, and compat.v1 only compat.v1 where both spellings are listed apart; Keras names match on the
    class and the kind of module (keras.layers.experimental.preprocessing.RandomFlip is a layer)."""
    name = c.name
    if not name:
        return False
    root, _, rest = api.partition(".")
    if not name.startswith(root + "."):
        return False
    last, got = api.rsplit(".", 1)[-1], name.rsplit(".", 1)[-1]
    if not (got.startswith(last[:-1]) if last.endswith("*") else got == last):
        return False
    if root == "keras":
        return rest.split(".", 1)[0] in name.split(".")[1:-1]
    if ("raw_ops" in api) != ("raw_ops" in name):
        return False
    return not (last in compat_split and ("compat.v1" in api) != ("compat.v1" in name))


def _condition_holds(c: _Call, item: dict[str, Any]) -> bool:
    """The entry's own condition, where its text states one a call shows: a seed (raises without one), weights."""
    main = re.sub(r"\([^()]*\)", "", item["op"])
    if "seed" in main:
        seeds = [c.kw(k) for k in ("seed", "seed2")]
        given = [_const(s) for s in seeds if s is not None]
        if any(v not in (0, None) for v in given):
            return False
    if "with weights" in main and c.kw("weights") is None and len(c.node.args) < 2:
        return False
    for key, default in _DEFAULT_KW.findall(main):  # "Keras UpSampling2D default interpolation='nearest'"
        given = _const(c.kw(key)) if c.kw(key) is not None else default
        if given is not _Missing and given != default:
            return False
    return True


def _short(op: str, called: str = "") -> str:
    """The op's name in the table without asides and lists: 'tf.math.segment_sum / tf.math.segment_prod on GPU'.
    Asides nest ('(tf.function(jit_compile=True), auto-jit)'): they are removed from the inside out. Where the
    entry lists several ops ('tf.image.crop_and_resize backprop, tf.sparse.sparse_dense_matmul on GPU'), the one
    named `called` (the API's last name) rather than the first."""
    while True:
        bare = re.sub(r"\s*\([^()]*\)", "", op)
        if bare == op:
            break
        op = bare
    parts = [part.strip() for part in re.split(r",\s", re.split(r":\s", bare, maxsplit=1)[0])]
    if called and called not in parts[0]:
        return next((part for part in parts[1:] if called in part), parts[0])
    return parts[0]


def _range(item: dict[str, Any]) -> str:
    lo, hi = item["tf_min"], item["tf_max"]
    return f"TF {lo}-{hi}" if hi and hi != lo else (f"TF {lo}" if hi else f"TF {lo} and later")


_HATCHES: dict[tuple[int, str], str] = {}


def _hatch(item: dict[str, Any], recipe: Recipe) -> str:
    """The way out of an entry under a recipe, worked out once per run (a script may call the op often)."""
    key = (id(item), recipe.id)
    if key not in _HATCHES:
        _HATCHES[key] = _way_out(item, recipe)
    return _HATCHES[key]


def _way_out(item: dict[str, Any], recipe: Recipe) -> str:
    """The way out the table gives: the version that no longer raises, and the entry's escape hatch (the
    setting that turns the exception off, with its source)."""
    parts = []
    hi = item["tf_max"]
    if hi:
        major, minor = _mm(hi)
        mine = set(_apis(item))
        later = [
            e
            for e in recipes.table()["raises_under_determinism"]
            if set(_apis(e)) & mine
            and _mm(e["tf_min"]) > (major, minor)
            and "build_condition" not in e
            and e.get("platform") in (None, "linux")
        ]
        if not later:
            parts.append(f"TensorFlow {major}.{minor + 1} and later do not raise here")
    work = item.get("work_around")
    if work:
        parts.append(f"{work['text']} ({recipe.source_url(work['source'])})")
    hatch = item.get("escape_hatch")
    if hatch:
        parts.append(
            f"escape hatch: {hatch['name']}={hatch['value']} {hatch['effect']} ({recipe.source_url(hatch['source'])})"
        )
    return "; ".join(parts) or "replace the op or run it outside the determinism scope"


#: Calls that make a trainable variable: a gradient flows into what they return.
_VARIABLES = frozenset({"Variable", "get_variable", "add_weight"})


def _condition(s: Script, item: dict[str, Any], c: _Call) -> str | None:
    """The condition a script cannot show under which the entry holds for this call: the entry's own, or the
    one it gives for the API called (tf.gather: only when a gradient flows into the gathered tensor), unless the
    script shows it holds (the first argument is a variable it made)."""
    if "condition" in item:
        return str(item["condition"])
    apis = item.get("apis") or ()
    split = frozenset(
        {a.rsplit(".", 1)[-1] for a in apis if "compat.v1" in a}
        & {a.rsplit(".", 1)[-1] for a in apis if "compat.v1" not in a}
    )
    for api, text in item.get("api_conditions", {}).items():
        if _matches(c, canonical(api), split):
            first = c.node.args[0] if c.node.args else c.kw("params")
            made = s.assigned.get(first.id, []) if isinstance(first, ast.Name) else []
            if any(
                isinstance(v, ast.Call) and (s.names.resolve(v.func) or "").rsplit(".", 1)[-1] in _VARIABLES
                for v in made
            ):
                return None
            return str(text)
    return None


def _only(condition: str | None) -> str:
    return f" only when {condition} (the script does not show whether it does)" if condition else ""


def check_ops(s: Script) -> None:
    recipe = s.target.recipe
    if recipe is None:
        return
    keras = s.keras_major()
    raises, silent = _entries(recipe.raises, keras), _entries(recipe.silent, keras)
    all_apis = [a for e in raises + silent for a in e.apis]
    compat = {a.rsplit(".", 1)[-1] for a in all_apis if "compat.v1" in a}
    plain = {a.rsplit(".", 1)[-1] for a in all_apis if "compat.v1" not in a}
    split = frozenset(compat & plain)
    # the last name component each entry can match: a call is compared with those entries only
    lasts = {a.rsplit(".", 1)[-1] for a in all_apis}
    wanted = {last for last in lasts if not last.endswith("*")}
    prefixes = tuple(last[:-1] for last in lasts if last.endswith("*"))
    version = s.target.tf_version
    for c, shown in _uses(s):
        last = c.name.rsplit(".", 1)[-1] if c.name else ""
        if last not in wanted and not (prefixes and last.startswith(prefixes)):
            continue
        for item, when in _applying(s, c, raises, split):
            hatch = _hatch_set(s, item)
            if hatch:  # the exception is turned off: the op runs its nondeterministic kernel instead
                s.add(
                    R.PY_OP_NONDETERMINISTIC,
                    c.node.lineno,
                    f"{shown} would raise {item['exception']} under determinism on TensorFlow {version}, but "
                    f"{hatch} turns the exception off: it runs nondeterministically{_only(when)} "
                    f"({_short(item['op'], last)}; the table lists {_range(item)}, {item['devices']})",
                    _hatch(item, recipe),
                    severity="info" if when else None,
                )
                continue
            s.add(
                R.PY_OP_RAISES,
                c.node.lineno,
                f"{shown} raises {item['exception']} under determinism on TensorFlow {version}{_only(when)} "
                f"({_short(item['op'], last)}; the table lists {_range(item)}, {item['devices']})",
                _hatch(item, recipe),
                severity="warning" if when else None,
            )
        for item, when in _applying(s, c, silent, split):
            s.add(
                R.PY_OP_NONDETERMINISTIC,
                c.node.lineno,
                f"{shown} stays nondeterministic on TensorFlow {version} even with determinism on"
                f"{_only(when)} ({_short(item['op'], last)}, {_range(item)}): {item['why']}",
                "use a TensorFlow version where the op is deterministic, or replace it",
                severity="info" if when else None,
            )


def _hatch_set(s: Script, item: dict[str, Any]) -> str | None:
    """Where the entry's escape hatch is set to its value (the script's environment, else the image's), if it is."""
    hatch = item.get("escape_hatch")
    if not hatch:
        return None
    mine = s.env_value(hatch["name"])
    value = mine[1] if mine else s.target.image_env.get(hatch["name"])
    accepted = {str(hatch["value"]).lower()} | ({"true"} if str(hatch["value"]) == "1" else set())  # a bool
    if value is None or value.strip().lower() not in accepted:
        return None
    return f"{hatch['name']}={value} (" + (f"line {mine[0]})" if mine else "set in the image)")


def _applying(
    s: Script, c: _Call, entries: list[_Entry], split: frozenset[str]
) -> Iterator[tuple[dict[str, Any], str | None]]:
    """(table item, the condition the script leaves open, else None) of each entry, outside XLA, that the call `c`
    is an API of and whose condition the call does not rule out."""
    for e in entries:
        if not e.xla and any(_matches(c, a, split) for a in e.apis) and _condition_holds(c, e.item):
            yield e.item, _condition(s, e.item, c)


def _uses(s: Script) -> Iterator[tuple[_Call, str]]:
    """Each call of a TensorFlow or Keras name, as the name the table's entries are matched against (a library
    function the table says is built on a listed op counts as that op) and the words the message shows; a loss
    named by string in compile() counts as a call of keras.losses.<name> (Keras resolves it so) on compile's line."""
    built = {canonical(a): b["calls"] for b in recipes.built_on() for a in b["apis"]}
    for c in (n for call in s.calls for n in call.narrowed()):
        if c.name and c.name.startswith(("tf.", "keras.")):
            op = built.get(c.name)
            yield (c, c.name) if op is None else (_Call(c.node, op, c.attr), f"{c.name} (built on {op})")
        elif c.attr == "compile" and _is_model_compile(c):
            loss = _const(c.kw("loss"))
            op = built.get(f"keras.losses.{loss}") if isinstance(loss, str) else None
            if op is not None:
                yield _Call(c.node, op, c.attr), f"compile(loss={loss!r}) (built on {op})"


def xla_raisers(s: Script) -> list[tuple[_Call, dict[str, Any]]]:
    """Calls of ops whose XLA-compiled gradient raises on the script's TensorFlow (the table's XLA entries)."""
    recipe = s.target.recipe
    if recipe is None:
        return []
    entries = [e for e in _entries(recipe.raises, s.keras_major()) if e.xla]
    return [
        (c, e.item)
        for call in s.calls
        for c in call.narrowed()
        for e in entries
        if any(_matches(c, a, frozenset()) for a in e.apis)
    ]


# --- switch and seeds -----------------------------------------------------------------------------------


def _switch_env(recipe: Recipe | None) -> set[str]:
    """The determinism variables the recipe sets (TF_DETERMINISTIC_OPS, TF_CUDNN_DETERMINISTIC)."""
    return {e["name"] for e in recipe.env if "DETERMINISTIC" in e["name"]} if recipe else set()


def _truthy(value: str | None) -> bool:
    return value is None or value.strip().lower() in ("1", "true", "yes")


def switch_name(recipe: Recipe) -> str | None:
    if any(st["step"] == "enable_op_determinism" for st in recipe.steps):
        return "tf.config.experimental.enable_op_determinism()"
    names = sorted(_switch_env(recipe))
    return " and ".join(f"{n}=1" for n in names) or None


def _env_switches(s: Script) -> list[tuple[int, str, str | None]]:
    return [
        (line, key, value) for line, key, value in s.env if key in ("TF_DETERMINISTIC_OPS", "TF_CUDNN_DETERMINISTIC")
    ]


def _readable(recipe: Recipe) -> set[str]:
    """The determinism variables TensorFlow reads as a switch under the recipe (TF_DETERMINISTIC_OPS also from 2.8,
    where enable_op_determinism() is the recipe's step)."""
    has_step = any(st["step"] == "enable_op_determinism" for st in recipe.steps)
    return _switch_env(recipe) | ({"TF_DETERMINISTIC_OPS"} if has_step else set())


def determinism_on(s: Script, usable: bool = False) -> bool:
    """Whether the script or the image turns on the switch the script's recipe has (with no recipe: any switch).
    A variable the recipe does not use is no switch for it (TF_CUDNN_DETERMINISTIC on 2.1+: cuDNN only); with
    `usable`, neither is an enable_op_determinism() the version lacks (py-determinism-switch-unavailable)."""
    recipe, image = s.target.recipe, s.target.image_env
    lacks = usable and recipe is not None and not any(st["step"] == "enable_op_determinism" for st in recipe.steps)
    calls = ("enable_determinism",) if lacks else ("enable_op_determinism", "enable_determinism")
    on = (
        any(c.last in calls for c in s.calls)
        or any(_truthy(v) for _, key, v in _env_switches(s) if recipe is None or key in _readable(recipe))
        or any(_truthy(image.get(n)) for n in _switch_env(recipe) if n in image)
    )
    if recipe is None and s.target.tf_version is None:
        on = on or any(n in image for n in ("TF_DETERMINISTIC_OPS", "TF_CUDNN_DETERMINISTIC"))
    return on


def check_switch(s: Script) -> None:
    recipe, version = s.target.recipe, s.target.tf_version
    enables = [c for c in s.calls if c.last == "enable_op_determinism"]
    env_switches = _env_switches(s)
    if recipe is not None:
        has_step = any(st["step"] == "enable_op_determinism" for st in recipe.steps)
        wanted = switch_name(recipe) or "none exists"
        if not has_step:
            for c in enables:
                s.add(
                    R.PY_SWITCH_UNAVAILABLE,
                    c.node.lineno,
                    f"enable_op_determinism() does not exist in TensorFlow {version} (from 2.8): the script "
                    "stops with AttributeError",
                    f"use the switch of recipe {recipe.id}: {wanted}",
                )
        readable = _readable(recipe)
        cudnn_only = _cudnn_switch_read(version) and "TF_CUDNN_DETERMINISTIC" not in readable
        for line, key, _ in env_switches:
            if key not in readable and not (key == "TF_CUDNN_DETERMINISTIC" and cudnn_only):
                s.add(
                    R.PY_SWITCH_UNAVAILABLE,
                    line,
                    f"TensorFlow {version} does not read {key} (recipe {recipe.id} does not list it)",
                    f"use the switch of recipe {recipe.id}: {wanted}",
                )
    if not s.trains() or determinism_on(s):
        return
    if recipe is not None and switch_name(recipe) is None:
        return  # no switch exists for this version: nothing to turn on
    where = f" for TensorFlow {version} ({s.target.label})" if version else ""
    if recipe is not None:
        fix = f"add {switch_name(recipe)} before training (envpin audit --fix inserts it)"
    elif version:  # a version the table has no recipe for: asking for --tf again would not help
        fix = (
            f"no recipe of envpin's table covers TensorFlow {version}: turn on the determinism switch that version has"
        )
    else:
        fix = "turn on the switch of your TensorFlow's recipe (envpin recipe --tf X.Y); give --tf to judge it"
    partial = next((line for line, key, v in env_switches if key == "TF_CUDNN_DETERMINISTIC" and _truthy(v)), None)
    aside = (
        f" (TF_CUDNN_DETERMINISTIC, line {partial}, only makes cuDNN convolution and pooling deterministic)"
        if partial is not None
        else ""
    )
    s.add(
        R.PY_SWITCH_MISSING,
        s.first_import_line(),
        f"the script trains but turns no determinism switch on{where}{aside}, and the image does not either",
        fix,
    )


def _cudnn_switch_read(version: str | None) -> bool:
    """Whether TensorFlow `version` reads TF_CUDNN_DETERMINISTIC: from the first version a recipe of the table sets
    it for (1.14) on. Later versions keep reading it, for cuDNN only (TensorFlow's own notes in
    tensorflow/python/kernel_tests/nn_ops/cudnn_deterministic_base.py: deprecated, "only makes ops using cuDNN
    deterministic"), which is why the recipes from 2.1 set TF_DETERMINISTIC_OPS instead."""
    firsts = [
        row["match"]["tf_min"]
        for row in recipes.rows()
        if any(e["name"] == "TF_CUDNN_DETERMINISTIC" for e in row["env"]) and row["match"].get("tf_min")
    ]
    return version is not None and bool(firsts) and _mm(version) >= min(_mm(v) for v in firsts)


def check_seeds(s: Script) -> None:
    trains = s.trains()
    seeded = s.seeded()
    # a script that only turns determinism on is judged too: an unseeded random op of the table raises there
    layers, raises = (
        _unseeded_layers(s) if not seeded["tf"] and (trains or determinism_on(s, usable=True)) else ("", False)
    )
    if not seeded["tf"] and (trains or raises):
        s.add(
            R.PY_NO_GLOBAL_SEED,
            s.first_import_line(),
            (
                "the script trains but sets no global TensorFlow seed: initializers, Dropout and shuffles draw "
                "a new random state in every run"
                if trains
                else "the script turns determinism on but sets no global TensorFlow seed"
            )
            + layers,
            "call tf.keras.utils.set_random_seed(SEED) "
            "(TF 2.7+) or tf.random.set_seed(SEED) before building the model (envpin audit --fix inserts it)",
            severity="error" if raises else None,
        )
    if trains:
        firsts: dict[str, _Call] = {}
        for c in s.calls:
            name = c.name or ""
            if name.startswith("random.") and c.last in _PY_RANDOM and not seeded["python"]:
                firsts.setdefault("python", c)
            elif (
                name.startswith("np.random.")
                and name.count(".") == 2
                and c.last not in _NP_NOT_DRAWS
                and not seeded["numpy"]
            ):
                firsts.setdefault("numpy", c)
        for key, c in firsts.items():
            seed = "random.seed(SEED)" if key == "python" else "numpy.random.seed(SEED)"
            s.add(
                R.PY_UNSEEDED_RANDOM,
                c.node.lineno,
                f"{c.name}() draws from {'Python' if key == 'python' else 'NumPy'}'s global generator, which "
                "the script never seeds",
                f"call {seed} once at start-up",
            )
    for c in s.calls:
        name = c.name or ""
        if (
            name in ("np.random.default_rng", "np.random.RandomState", "random.Random")
            and not c.node.args
            and not c.node.keywords
        ):
            s.add(
                R.PY_UNSEEDED_RANDOM,
                c.node.lineno,
                f"{name}() without a seed starts from OS entropy",
                f"pass a seed: {name}(SEED)",
            )
        elif c.last == "from_non_deterministic_state" and name.startswith("tf."):
            s.add(
                R.PY_UNSEEDED_RANDOM,
                c.node.lineno,
                "tf.random.Generator.from_non_deterministic_state() draws a new state in every run",
                "use tf.random.Generator.from_seed(SEED)",
            )
        _clock_seed(s, c)


def _unseeded_layers(s: Script) -> tuple[str, bool]:
    """What the table says of the script's unseeded random ops and Keras random layers on its TensorFlow and
    Keras: the entry for calls without a seed while no global seed is set whose APIs the script calls
    (tf.random.uniform and Keras 2's Dropout raise from TF 2.7, Keras 3's Dropout stays nondeterministic), and the
    first such call of the script; True when it raises."""
    recipe, keras = s.target.recipe, s.keras_major()
    if recipe is None:
        return "", False
    for kind, items in (("raises", recipe.raises), ("stays nondeterministic", recipe.silent)):
        for e in _entries(items, keras, "no_global_seed"):
            for c in (n for call in s.calls for n in call.narrowed()):
                if c.kw("seed") is None and any(_matches(c, a, frozenset()) for a in e.apis):
                    how = f"{kind} ({e.item['exception']})" if "exception" in e.item else kind
                    name = c.name or ""
                    return (
                        f"; on TensorFlow {s.target.tf_version} the table says an unseeded "
                        f"{name.rsplit('.', 1)[-1] if name.startswith('keras.') else name} {how}: "
                        f"line {c.node.lineno}",
                        kind == "raises",
                    )
    return "", False


#: Seeding calls that, given no seed (or None), take one from the OS: random.seed(), numpy.random.seed().
_OS_SEEDED = frozenset({"random.seed", "np.random.seed"})


def _clock_seed(s: Script, c: _Call) -> None:
    if c.name in _OS_SEEDED and not c.given_seed():
        s.add(
            R.PY_SEED_FROM_CLOCK,
            c.node.lineno,
            f"{c.name}() without a seed takes one from the OS (os.urandom, else the clock), a new one in every run",
            f"pass a constant: {c.name}(SEED)",
        )
        return
    values: list[ast.expr] = []
    if c.last in _SEEDERS and (c.name is None or c.name.split(".", 1)[0] in ("tf", "keras", "np", "random")):
        values += list(c.node.args[:1])
    values += [k.value for k in c.node.keywords if k.arg in _SEED_KEYWORDS]
    for value in values:
        clock = _clock_in(s, value, depth=2)
        if clock:
            s.add(
                R.PY_SEED_FROM_CLOCK,
                c.node.lineno,
                f"the seed comes from {clock}(), which differs in every run",
                "use a constant seed (or one given on the command line and logged)",
            )
            return


def _clock_in(s: Script, node: ast.AST, depth: int) -> str | None:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            name = s.names.resolve(sub.func)
            if name in _CLOCKS:
                return name
        elif isinstance(sub, ast.Name) and depth and sub.id in s.assigned:
            for value in s.assigned[sub.id]:
                found = _clock_in(s, value, depth - 1)
                if found:
                    return found
    return None


# --- environment, tf.data, Keras ------------------------------------------------------------------------


def check_env(s: Script) -> None:
    common = recipes.table()["common"]
    unset = {u["name"]: u for u in common["unset"]}
    no_effect = {u["name"]: u for u in common["no_effect"]}
    for line, key, _ in s.env:
        if key == "PYTHONHASHSEED":
            s.add(
                R.PY_HASHSEED_RUNTIME,
                line,
                "PYTHONHASHSEED set inside the running script has no effect on "
                "this interpreter (Python reads it at start-up)",
                "set ENV PYTHONHASHSEED=0 in the image or in the command that starts the script",
            )
        elif key in unset:
            s.add(R.PY_ENV_UNSET, line, f"{key} is set: {unset[key]['why']}", "remove the line")
        elif key in no_effect:
            s.add(R.PY_ENV_NO_EFFECT, line, f"{key} is never read: {no_effect[key]['why']}", "remove the line")
    if s.names.uses("horovod"):
        want = next((e["value"] for e in common["env"] if e["name"] == "HOROVOD_FUSION_THRESHOLD"), "0")
        mine = s.env_value("HOROVOD_FUSION_THRESHOLD")
        value = mine[1] if mine else s.target.image_env.get("HOROVOD_FUSION_THRESHOLD")
        if value != want:
            line = s.first_import_line(("horovod",))
            what = "is not set" if value is None else f"is {value}"
            s.add(
                R.PY_HOROVOD_FUSION,
                mine[0] if mine else line,
                f"Horovod is used but HOROVOD_FUSION_THRESHOLD {what} (in the script or the image), so tensor "
                "fusion reorders allreduces from run to run",
                f"set HOROVOD_FUSION_THRESHOLD={want} in the image (ENV) or before hvd.init()",
            )


def _parallel(c: _Call) -> bool:
    n = c.kw("num_parallel_calls")
    if n is None and len(c.node.args) >= 2:
        n = c.node.args[1]
    return n is not None and _const(n) not in (1, None)


def _map_hazard() -> tuple[str, ...]:
    """The APIs the table's common caveat about parallel tf.data maps names (stateful random ops, Keras random
    preprocessing layers): each keeps a random state that every call advances, so parallel calls take from it in
    the order they happen to run."""
    return tuple(
        a for c in recipes.table()["common"]["caveats"] if c.get("context") == "parallel_map" for a in _apis(c)
    )


def _racy(s: Script, node: ast.Call, apis: tuple[str, ...]) -> bool:
    """A call of one of `apis`: a Keras layer keeps its random state whatever its seed, an op given a seed is
    reproducible."""
    call = _Call(node, s.names.resolve(node.func), None, s.names.star_alternatives(node.func))
    c = next((n for n in call.narrowed() if any(_matches(n, a, frozenset()) for a in apis)), None)
    if c is None:
        return False
    return (c.name or "").startswith("keras.") or not any(k.arg == "seed" for k in node.keywords)


def _stateful_random(s: Script, fn: ast.AST, apis: tuple[str, ...], depth: int = 1) -> ast.Call | None:
    for sub in ast.walk(fn):
        if isinstance(sub, ast.Call):
            if _racy(s, sub, apis):
                return sub  # an op, or a layer built and called in the function
            if isinstance(sub.func, ast.Name) and depth and sub.func.id in s.assigned:
                # a layer (or Sequential of layers) built once outside and called here: augment = Sequential([...])
                for value in s.assigned[sub.func.id]:
                    for inner in ast.walk(value):
                        if (
                            isinstance(inner, ast.Call)
                            and _racy(s, inner, apis)
                            and (s.names.resolve(inner.func) or "").startswith("keras.")
                        ):
                            return inner
    return None


def _overridden(s: Script) -> tuple[dict[str, dict[str, Any]], bool]:
    """What op determinism overrides on the script's TensorFlow (the table's entries by id), and whether the
    script or its image turns determinism on, so the override takes effect."""
    version = s.target.tf_version
    try:
        found = {o["id"]: o for o in recipes.overridden(version)} if version else {}
    except ValueError:
        found = {}
    return found, bool(found) and determinism_on(s, usable=True)


def _unordered(s: Script, what: str, overridden: dict[str, dict[str, Any]], on: bool) -> tuple[str, str | None]:
    """The message for a request of nondeterministic order, and its severity: on a TensorFlow whose determinism
    overrides it and with determinism on, the cost is speed, not results (info)."""
    over = overridden.get("tf-data-deterministic-false")
    if over and on:
        return f"{what}: on TensorFlow {s.target.tf_version} with determinism on, {over['effect']}", "info"
    if over:
        return (
            f"{what}: the pipeline hands out elements in the order they finish, since determinism, which on "
            f"TensorFlow {s.target.tf_version} would override it, is not switched on",
            None,
        )
    return f"{what}: the pipeline hands out elements in the order they finish", None


def check_data(s: Script) -> None:
    apis = _map_hazard()
    overridden, on = _overridden(s)
    for c in s.calls:
        for k in c.node.keywords:
            if k.arg == "deterministic" and _const(k.value) is False:
                message, severity = _unordered(s, f"{c.attr or c.last}(deterministic=False)", overridden, on)
                s.add(
                    R.PY_DATA_NONDETERMINISTIC,
                    c.node.lineno,
                    message,
                    "remove deterministic=False (envpin audit --fix removes it)",
                    severity=severity,
                )
            elif k.arg == "sloppy" and _const(k.value) is True:
                s.add(
                    R.PY_DATA_NONDETERMINISTIC,
                    c.node.lineno,
                    f"{c.attr or c.last}(sloppy=True) hands out elements in the order they finish",
                    "remove sloppy=True",
                )
        if c.attr == "map" and _parallel(c) and c.node.args:
            fn: ast.AST | None = c.node.args[0]
            if isinstance(fn, ast.Call) and (s.names.resolve(fn.func) or "").endswith("partial") and fn.args:
                fn = fn.args[0]
            if isinstance(fn, ast.Name):
                fn = s.functions.get(fn.id)
            elif isinstance(fn, ast.Attribute):
                fn = s.functions.get(fn.attr)
            if fn is None:
                continue
            op = _stateful_random(s, fn, apis)
            if op is not None:
                name = s.names.resolve(op.func) or ""
                how = (
                    "whose random state every parallel call advances" if name.startswith("keras.") else "without a seed"
                )
                fix = (
                    "use the stateless variant (tf.image.stateless_random_*, tf.random.stateless_*) with a "
                    "per-element seed, or apply Keras random layers in the model instead of the pipeline"
                )
                serial = overridden.get("tf-data-stateful-map-serial")
                if serial and on:
                    s.add(
                        R.PY_DATA_RANDOM_MAP,
                        c.node.lineno,
                        f"map(num_parallel_calls=...) runs {name} (line {op.lineno}) {how}: on TensorFlow "
                        f"{s.target.tf_version} with determinism on, {serial['effect']}",
                        fix,
                        severity="info",
                    )
                    continue
                late = (
                    (
                        f"; determinism, which on TensorFlow {s.target.tf_version} would run it serially, is "
                        "not switched on"
                    )
                    if serial
                    else ""
                )
                s.add(
                    R.PY_DATA_RANDOM_MAP,
                    c.node.lineno,
                    f"map(num_parallel_calls=...) runs {name} (line {op.lineno}) {how} in parallel: "
                    f"each element's random numbers depend on scheduling{late}",
                    fix,
                )
    for line in s.option_sets:
        message, severity = _unordered(s, "tf.data options ask for nondeterministic order", overridden, on)
        s.add(
            R.PY_DATA_NONDETERMINISTIC,
            line,
            message,
            "remove the line (deterministic order is the default)",
            severity=severity,
        )


def check_keras(s: Script) -> None:
    raisers = xla_raisers(s)
    for c in s.calls:
        if (
            c.attr in ("fit", "fit_generator", "evaluate", "evaluate_generator", "predict", "predict_generator")
            and _const(c.kw("use_multiprocessing")) is True
        ):
            workers = c.kw("workers")
            if workers is not None and _const(workers) not in (0, 1):
                s.add(
                    R.PY_FIT_MULTIPROCESSING,
                    c.node.lineno,
                    f"{c.attr}(workers=..., use_multiprocessing=True) fills batches in the order the worker "
                    "processes finish",
                    "use workers=1 (or a tf.data pipeline)",
                )
    # the table's entry for Keras 3's own XLA compilation (compile() with jit_compile='auto'), for this version
    auto = [(c, item) for c, item in raisers if item.get("keras_min", "").startswith("3")]
    if auto and s.keras_major() == 3:
        layer = auto[0][0]
        for c in s.calls:
            if c.attr == "compile" and _is_model_compile(c) and _const(c.kw("jit_compile")) is not False:
                s.add(
                    R.PY_KERAS3_AUTO_XLA,
                    c.node.lineno,
                    f"Keras 3 on TensorFlow {s.target.tf_version} compiles with XLA unless jit_compile=False, and "
                    f"the model's {layer.name.rsplit('.', 1)[-1]} (line {layer.node.lineno}) has an XLA gradient "
                    f"that raises under determinism ({_short(auto[0][1]['op'])})",
                    "pass jit_compile=False to compile() (envpin audit --fix adds it)",
                )
    _check_jit(s, raisers)


def _check_jit(s: Script, raisers: list[tuple[_Call, dict[str, Any]]]) -> None:
    sites: list[tuple[int, str]] = []
    for c in s.calls:
        for k in c.node.keywords:
            if k.arg in ("jit_compile", "experimental_compile") and _const(k.value) is True:
                sites.append((c.node.lineno, f"{k.arg}=True"))
        if (
            c.name
            and c.name.endswith("config.optimizer.set_jit")
            and c.node.args
            and _const(c.node.args[0]) not in (False, None, 0, "", _Missing)
        ):
            sites.append((c.node.lineno, "tf.config.optimizer.set_jit"))
    for line, key, value in s.env:
        if key == "TF_XLA_FLAGS" and value:
            m = _XLA_AUTO.search(value)
            if m and m.group(1) not in ("0", "-1"):
                sites.append((line, f"TF_XLA_FLAGS={value}"))
    when = [_condition(s, item, c) for c, item in raisers] if sites else []  # once: the same for every site
    for line, what in sites:
        if raisers:
            layer, item = raisers[when.index(None)] if None in when else raisers[0]
            s.add(
                R.PY_JIT_COMPILE,
                line,
                f"{what} compiles with XLA, and {layer.name} (line {layer.node.lineno}) then raises under "
                f"determinism{_only(min(when, key=bool))} ({_short(item['op'])}, {_range(item)})",
                "drop it, or compile with jit_compile=False",
                severity="warning" if all(when) else "error",
            )
        else:
            s.add(
                R.PY_JIT_COMPILE,
                line,
                f"{what} compiles with XLA, whose kernels the determinism switch does not fully cover",
                "drop it unless you checked the model is deterministic under XLA",
            )


CHECKS = (check_ops, check_switch, check_seeds, check_env, check_data, check_keras)


def run_checks(s: Script) -> Iterator[Finding]:
    for check in CHECKS:
        check(s)
    yield from s.findings
