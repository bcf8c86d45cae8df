"""The order and randomness of the input pipeline: tf.data asked for nondeterministic order
(py-data-nondeterministic), stateful random ops in a parallel tf.data map (py-data-random-map), and Keras
filling batches from several worker processes (py-fit-multiprocessing).

Where the recipe table says op determinism overrides a request (TF 2.7 and later: `deterministic=False` is
ignored, a stateful map runs serially) and determinism is on, the cost is speed, not results: the finding is
info. The fix removes `deterministic=False` from a call.
"""

from __future__ import annotations

import ast

from envpin.audit.check import Finding
from envpin.audit.python.refs import FWR, HEAD, SCRIPTS
from envpin.audit.python.script import Call, Script, const
from envpin.audit.python.switch import determinism_on
from envpin.audit.python.table import apis_of, matches
from envpin.audit.rule import Rule
from envpin.errors import param
from envpin.knowledge import recipes

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from envpin.audit.python.edits import Fix, Fixing, Startup
    from envpin.knowledge.recipebook import Overridden

PY_DATA_NONDETERMINISTIC = Rule(
    id="py-data-nondeterministic",
    severity="warning",
    title="tf.data is asked for nondeterministic order",
    finds="`deterministic=False` given to a call (`Dataset.map`, `interleave`, `batch`, ...), "
    "`options.deterministic = False` or `options.experimental_deterministic = False`, and "
    "`parallel_interleave(..., sloppy=True)` or `sloppy=` a variable (`sloppy=is_training`). Not a "
    "`map(..., deterministic=False)` batched directly (`.map(...).batch(n)`) on a TensorFlow for which the "
    "recipe table says tf.data fuses the two and keeps the order (measured on 2.21).",
    why="The pipeline then hands out elements in the order they finish, which changes from run to run, and "
    "so does the order of training batches. Where the recipe table says op determinism overrides the request "
    "(TF 2.7 and later) and the script or its image turns determinism on, the order is kept and only speed is "
    "lost: the finding is then info.",
    bad=HEAD + "ds = tf.data.Dataset.range(8).map(lambda x: x + 1, num_parallel_calls=4, deterministic=False)\n",
    good=HEAD + "ds = tf.data.Dataset.range(8).map(lambda x: x + 1, num_parallel_calls=4)\n",
    autofix="Removes `deterministic=False` from the call (the default order is the deterministic one); option "
    "assignments and `sloppy=True` are commented. Costs some input-pipeline throughput.",
    references=(
        ("tf.data.Options.deterministic", "https://www.tensorflow.org/api_docs/python/tf/data/Options#deterministic"),
        FWR,
        SCRIPTS,
    ),
    fixable=True,
    language="python",
)


PY_DATA_RANDOM_MAP = Rule(
    id="py-data-random-map",
    severity="warning",
    title="Random ops without seeds inside a parallel tf.data map",
    finds="`Dataset.map(fn, num_parallel_calls=N)` (N not 1) whose function (a lambda or a function of the "
    "script) calls a stateful random op (`tf.random.uniform`, `tf.image.random_flip_left_right`, ...) "
    "without a `seed`, or a Keras random preprocessing layer (`RandomFlip`, `RandomRotation`, ...; also one "
    "built outside the function, `augment = Sequential([RandomFlip(...)])`, and called in it). The APIs are "
    "those the recipe table's caveat about parallel maps lists.",
    why="Parallel calls share the op's random state and take from it in the order they happen to run, so each "
    "element gets different random numbers in every run. Use the stateless ops "
    "(`tf.image.stateless_random_*`, `tf.random.stateless_uniform`) with a seed derived from the element. "
    "Where the recipe table says op determinism runs such a map serially (TF 2.7 and later) and determinism "
    "is on, the numbers are reproducible and the cost is speed: the finding is then info.",
    bad=HEAD + "def augment(x):\n    return tf.image.random_flip_left_right(x)\n\n"
    "ds = tf.data.Dataset.from_tensors(tf.zeros((4, 4, 3))).map(augment, num_parallel_calls=8)\n",
    good=HEAD + "def augment(x):\n    return tf.image.stateless_random_flip_left_right(x, seed=(1, 2))\n\n"
    "ds = tf.data.Dataset.from_tensors(tf.zeros((4, 4, 3))).map(augment, num_parallel_calls=8)\n",
    autofix="Comments the line.",
    references=(
        FWR,
        ("tf.random: stateless random numbers", "https://www.tensorflow.org/guide/random_numbers#stateless_rngs"),
        SCRIPTS,
    ),
    language="python",
)


PY_FIT_MULTIPROCESSING = Rule(
    id="py-fit-multiprocessing",
    severity="warning",
    title="Keras fit/evaluate with several worker processes",
    finds="`fit`, `fit_generator`, `evaluate` or `predict` with `use_multiprocessing=True` and `workers` other "
    "than 1 (or not given as a constant), given a generator or anything but a `keras.utils.Sequence` of the "
    "script; given such a Sequence, only when its `__getitem__` draws from a global random generator "
    "(`np.random.*`, `random.*`, unseeded `tf.random.*`).",
    why="Worker processes fill the batch queue of a generator in the order they finish, so batches reach the "
    "model in a different order in every run. A `keras.utils.Sequence` is handed to Keras' OrderedEnqueuer, "
    "which returns batch i as the i-th, whichever worker built it: the order holds, but a global generator "
    "drawn from in `__getitem__` is each worker's own copy, so a batch's random numbers depend on which worker "
    "built it. Use workers=1, a Sequence that seeds per index, or a tf.data pipeline.",
    bad=HEAD + "def train(model, seq):\n    model.fit(seq, epochs=2, workers=8, use_multiprocessing=True)\n",
    good=HEAD + "def train(model, seq):\n    model.fit(seq, epochs=2)\n",
    autofix="Comments the line.",
    references=(
        ("Keras Sequence (use_multiprocessing)", "https://www.tensorflow.org/api_docs/python/tf/keras/utils/Sequence"),
        (
            "Keras 2.12 data_utils.OrderedEnqueuer",
            "https://github.com/keras-team/keras/blob/v2.12.0/keras/utils/data_utils.py",
        ),
        SCRIPTS,
    ),
    language="python",
)


RULES: tuple[Rule, ...] = (PY_DATA_NONDETERMINISTIC, PY_DATA_RANDOM_MAP, PY_FIT_MULTIPROCESSING)


def _parallel(c: Call) -> bool:
    n = c.kw("num_parallel_calls")
    if n is None and len(c.node.args) >= 2:
        n = c.node.args[1]
    return n is not None and const(n) not in (1, None)


def _map_hazard() -> tuple[str, ...]:
    """The APIs the table's common caveat about parallel tf.data maps names (stateful random ops, Keras random
    preprocessing layers): each keeps a random state that every call advances, so parallel calls take from it in
    the order they happen to run."""
    return tuple(a for c in recipes.book().caveats if c.context == "parallel_map" for a in apis_of(c))


def _racy(s: Script, node: ast.Call, apis: tuple[str, ...]) -> bool:
    """A call of one of `apis`: a Keras layer keeps its random state whatever its seed, an op given a seed is
    reproducible."""
    call = Call(node, s.names.resolve(node.func), None, s.names.star_alternatives(node.func))
    c = next((n for n in call.narrowed() if any(matches(n, a, frozenset()) for a in apis)), None)
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


def _overridden(s: Script) -> tuple[dict[str, Overridden], bool]:
    """What op determinism overrides on the script's TensorFlow (the table's entries by id), and whether the
    script or its image turns determinism on, so the override takes effect."""
    version = s.target.tf_version
    try:
        found = {o.id: o for o in recipes.book().overridden_on(version)} if version else {}
    except ValueError:
        found = {}
    return found, bool(found) and determinism_on(s, usable=True)


def _unordered(s: Script, what: str, overridden: dict[str, Overridden], on: bool) -> tuple[str, str | None]:
    """The message for a request of nondeterministic order, and its severity: on a TensorFlow whose determinism
    overrides it and with determinism on, the cost is speed, not results (info)."""
    over = overridden.get("tf-data-deterministic-false")
    if over and on:
        return f"{what}: on TensorFlow {s.target.tf_version} with determinism on, {over.effect}", "info"
    if over:
        return (
            f"{what}: the pipeline hands out elements in the order they finish, since determinism, which on "
            f"TensorFlow {s.target.tf_version} would override it, is not switched on",
            None,
        )
    return f"{what}: the pipeline hands out elements in the order they finish", None


def _batched_maps(s: Script) -> set[int]:
    """The map() calls whose result the script batches directly: `ds.map(...).batch(n)` (ids of the nodes)."""
    return {
        id(c.node.func.value)
        for c in s.calls
        if c.attr == "batch" and isinstance(c.node.func, ast.Attribute) and isinstance(c.node.func.value, ast.Call)
    }


def _kept_order(s: Script) -> Overridden | None:
    """The table's entry that tf.data keeps a map directly followed by batch in order, where it holds for the
    script's TensorFlow (measured versions only)."""
    version = s.target.tf_version
    try:
        kept = recipes.book().kept_order_on(version) if version else ()
    except ValueError:
        kept = ()
    return next((k for k in kept if k.id == "tf-data-map-batch-fused"), None)


def check_data(s: Script) -> None:
    apis = _map_hazard()
    overridden, on = _overridden(s)
    removes = f"remove deterministic=False ({param('fix', command='audit')} removes it)"
    batched = _batched_maps(s)
    kept = _kept_order(s)
    for c in s.calls:
        for k in c.node.keywords:
            if k.arg == "deterministic" and const(k.value) is False:
                if kept is not None and c.attr == "map" and id(c.node) in batched:
                    continue  # map(...).batch(...): fused on this TensorFlow, the batches keep their order
                message, severity = _unordered(s, f"{c.attr or c.last}(deterministic=False)", overridden, on)
                s.add(
                    PY_DATA_NONDETERMINISTIC,
                    c.node.lineno,
                    message,
                    removes,
                    severity=severity,
                )
            elif k.arg == "sloppy" and const(k.value) is True:
                s.add(
                    PY_DATA_NONDETERMINISTIC,
                    c.node.lineno,
                    f"{c.attr or c.last}(sloppy=True) hands out elements in the order they finish",
                    "remove sloppy=True",
                )
            elif k.arg == "sloppy" and not isinstance(k.value, ast.Constant):
                shown = ast.unparse(k.value)
                s.add(
                    PY_DATA_NONDETERMINISTIC,
                    c.node.lineno,
                    f"{c.attr or c.last}(sloppy={shown}) hands out elements in the order they finish whenever "
                    f"{shown} is true (in training, where the order of batches counts)",
                    "pass sloppy=False, or leave sloppy out",
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
                        PY_DATA_RANDOM_MAP,
                        c.node.lineno,
                        f"map(num_parallel_calls=...) runs {name} (line {op.lineno}) {how}: on TensorFlow "
                        f"{s.target.tf_version} with determinism on, {serial.effect}",
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
                    PY_DATA_RANDOM_MAP,
                    c.node.lineno,
                    f"map(num_parallel_calls=...) runs {name} (line {op.lineno}) {how} in parallel: "
                    f"each element's random numbers depend on scheduling{late}",
                    fix,
                )
    for line in s.option_sets:
        message, severity = _unordered(s, "tf.data options ask for nondeterministic order", overridden, on)
        s.add(
            PY_DATA_NONDETERMINISTIC,
            line,
            message,
            "remove the line (deterministic order is the default)",
            severity=severity,
        )


def check_fit(s: Script) -> None:
    for c in s.calls:
        if (
            c.attr in ("fit", "fit_generator", "evaluate", "evaluate_generator", "predict", "predict_generator")
            and const(c.kw("use_multiprocessing")) is True
        ):
            workers = c.kw("workers")
            if workers is None or const(workers) in (0, 1):
                continue
            x = c.node.args[0] if c.node.args else (c.kw("x") or c.kw("generator"))
            seq = _sequence_class(s, x)
            if seq is None:
                s.add(
                    PY_FIT_MULTIPROCESSING,
                    c.node.lineno,
                    f"{c.attr}(workers=..., use_multiprocessing=True) fills batches in the order the worker "
                    "processes finish",
                    "use workers=1 (or a tf.data pipeline)",
                )
                continue
            draw = _shared_draw(s, seq)
            if draw is not None:
                s.add(
                    PY_FIT_MULTIPROCESSING,
                    c.node.lineno,
                    f"{c.attr}(workers=..., use_multiprocessing=True) of the keras.utils.Sequence {seq.name}: "
                    f"Keras keeps the batch order, but {seq.name}.__getitem__ draws from {draw[0]} (line "
                    f"{draw[1]}), a global generator each worker process holds a copy of, so which random numbers "
                    "a batch gets depends on the worker that builds it",
                    "draw from a generator seeded per batch index in __getitem__ (numpy.random.default_rng((SEED, "
                    "index))), or use workers=1",
                )


#: Keras' Sequence, as the imports name it: fit hands it to an OrderedEnqueuer, which keeps the batch order.
_SEQUENCES = frozenset({"keras.utils.Sequence", "keras.utils.data_utils.Sequence", "keras.utils.PyDataset"})


def _sequence_class(s: Script, x: ast.expr | None) -> ast.ClassDef | None:
    """The class of the script's own keras.utils.Sequence that `x` makes (`Clips(...)`, or a name assigned once
    from that), None when `x` is anything else (a generator, a name the script does not explain)."""
    if isinstance(x, ast.Name) and len(s.assigned.get(x.id, [])) == 1:
        x = s.assigned[x.id][0]
    if not (isinstance(x, ast.Call) and isinstance(x.func, ast.Name)):
        return None
    cls = next((n for n in ast.walk(s.tree) if isinstance(n, ast.ClassDef) and n.name == x.func.id), None)
    if cls is None or not any(s.names.resolve(b) in _SEQUENCES for b in cls.bases):
        return None
    return cls


def _shared_draw(s: Script, cls: ast.ClassDef) -> tuple[str, int] | None:
    """The first draw from a global random generator (Python's random, NumPy's np.random.*, TensorFlow's
    stateful tf.random.*) in the Sequence's __getitem__, with its line."""
    get = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__getitem__"), None)
    if get is None:
        return None
    for node in sorted((n for n in ast.walk(get) if isinstance(n, ast.Call)), key=lambda n: (n.lineno, n.col_offset)):
        if True:
            name = s.names.resolve(node.func) or ""
            last = name.rsplit(".", 1)[-1]
            if name.startswith(("random.", "np.random.", "tf.random.")) and last not in _NOT_DRAWS:
                if name.startswith("tf.random.") and (
                    last.startswith("stateless") or (node.keywords and any(k.arg == "seed" for k in node.keywords))
                ):
                    continue
                return name, node.lineno
    return None


#: Names under the random modules that make or seed a generator rather than draw from the global one.
_NOT_DRAWS = frozenset({"seed", "default_rng", "RandomState", "Generator", "SeedSequence", "Random", "set_seed"})


CHECKS = (check_data, check_fit)


def _remove_nondeterministic(fix: Fixing, f: Finding) -> bool:
    """Remove `deterministic=False` (with its comma) from the calls on the finding's line; False if there is none
    to remove on one physical line (an option assignment or sloppy=True is commented instead)."""
    removed = False
    for call in fix.calls_at(f.line):
        for k in call.keywords:
            if k.arg != "deterministic" or not (isinstance(k.value, ast.Constant) and k.value.value is False):
                continue
            if k.lineno != k.end_lineno or k.end_col_offset is None:
                return False
            raw = fix.lines[k.lineno - 1].rstrip("\r\n").encode("utf-8")
            start, end = k.col_offset, k.end_col_offset
            left = raw[:start].rstrip()
            right = raw[end:]
            if left.endswith(b",") and not left.endswith(b"(,"):
                start = len(left) - 1
            elif right.lstrip().startswith(b","):
                end = end + (len(right) - len(right.lstrip())) + 1
                while end < len(raw) and raw[end : end + 1] == b" ":
                    end += 1
            fix.edits.cuts.setdefault(k.lineno, []).append((start, end, ""))
            removed = True
    if removed:
        fix.actions.append(f"line {f.line}: removed deterministic=False")
    return removed


FIXES: dict[str, Fix] = {PY_DATA_NONDETERMINISTIC.id: _remove_nondeterministic}
FOLLOW_UPS: dict[str, Fix] = {}
STARTUP: dict[str, Startup] = {}
