"""Seeds: a global TensorFlow seed where the script trains (py-no-global-seed), Python's and NumPy's generators
seeded before they are drawn from (py-unseeded-random), no seed taken from the clock or the OS
(py-seed-from-clock), and PYTHONHASHSEED, which only the interpreter's start reads (py-pythonhashseed-runtime).

The fix inserts the global seeding in the start-up block (envpin.audit.python.edits.Fixing.startup), which
seeds Python's and NumPy's generators too where TensorFlow's own call does not: that fixes the
py-unseeded-random findings of the global generators as well.
"""

from __future__ import annotations

import ast

from envpin.audit import facts
from envpin.audit.check import Finding
from envpin.audit.python.refs import FWR, HEAD, SCRIPTS
from envpin.audit.python.script import Call, Script
from envpin.audit.python.switch import determinism_on, run_words
from envpin.audit.python.table import holds, matches, meetable, short
from envpin.audit.rule import Rule
from envpin.errors import param
from envpin.knowledge.recipes import Recipe

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from envpin.audit.python.edits import Fix, Fixing, Startup

PY_NO_GLOBAL_SEED = Rule(
    id="py-no-global-seed",
    severity="warning",
    title="The training script sets no global TensorFlow seed",
    finds="A script that trains but never calls `tf.random.set_seed`, `tf.compat.v1.set_random_seed` / "
    "`tf.set_random_seed`, or `keras.utils.set_random_seed`; and a script that turns determinism on (itself "
    "or its image) without a global seed and calls a random op the recipe table lists as raising then "
    "(`tf.random.uniform` without a `seed` from TF 2.7). Scripts audited together are judged as runs, as for "
    "`py-determinism-switch-missing`: a seed anywhere in the run counts, and the finding is reported once, where "
    "that rule's is.",
    why="Initializers, Dropout and shuffles without a seed draw from a fresh random state in every run, so the "
    "weights differ from the first step; from TF 2.7 such ops even raise RuntimeError under determinism (the "
    "finding is then an error and names the first unseeded op or layer the recipe table lists).",
    bad=HEAD + "model = tf.keras.Sequential([tf.keras.layers.Dense(1), tf.keras.layers.Dropout(0.5)])\n"
    "model.compile(loss='mse')\n",
    good=HEAD + "tf.keras.utils.set_random_seed(0)\n"
    "model = tf.keras.Sequential([tf.keras.layers.Dense(1), tf.keras.layers.Dropout(0.5)])\n"
    "model.compile(loss='mse')\n",
    autofix="Inserts the global seeding after the imports (`tf.keras.utils.set_random_seed(0)` from TF 2.7, "
    "else `random.seed(0)`, `numpy.random.seed(0)` and TensorFlow's global seed). Safe: seeding only fixes "
    "what was random.",
    references=(
        ("tf.random.set_seed", "https://www.tensorflow.org/api_docs/python/tf/random/set_seed"),
        FWR,
        SCRIPTS,
    ),
    fixable=True,
    language="python",
)


PY_UNSEEDED_RANDOM = Rule(
    id="py-unseeded-random",
    severity="warning",
    title="Python's or NumPy's global random generator is used without a seed",
    finds="In a script that trains, or a module a training script of the same run imports (scripts audited "
    "together, as for `py-determinism-switch-missing`): the first call of `random.*` or `numpy.random.*` "
    "(shuffle, choice, randint, random_sample, ...) with no `random.seed` / `numpy.random.seed` (or "
    "`keras.utils.set_random_seed`) anywhere in the run; "
    "`numpy.random.default_rng()` / `RandomState()` without a seed; "
    "`tf.random.Generator.from_non_deterministic_state()`.",
    why="Data order, augmentation and splits drawn from an unseeded generator change in every run, and the "
    "model with them. Seed the generators once at start-up, or pass a seed.",
    bad="import random\n\nimport tensorflow as tf\n\ntf.random.set_seed(0)\nfiles = ['a', 'b', 'c']\n"
    "random.shuffle(files)\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(1)])\nmodel.compile(loss='mse')\n",
    good="import random\n\nimport tensorflow as tf\n\ntf.random.set_seed(0)\nrandom.seed(0)\nfiles = ['a', 'b', 'c']\n"
    "random.shuffle(files)\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(1)])\nmodel.compile(loss='mse')\n",
    autofix="Comments the line; `--fix` seeds Python and NumPy too when it inserts the global seeding "
    "(`py-no-global-seed`).",
    references=(("Python: random.seed", "https://docs.python.org/3/library/random.html#random.seed"), FWR, SCRIPTS),
    language="python",
)


PY_SEED_FROM_CLOCK = Rule(
    id="py-seed-from-clock",
    severity="error",
    title="A seed is taken from the clock, the process id or os.urandom",
    finds="A seed (`random.seed`, `numpy.random.seed`, `tf.random.set_seed`, `set_random_seed`, `default_rng`, "
    "`RandomState`, or a `seed=` argument) whose value comes from `time.time()`, `datetime.now()`, "
    "`os.getpid()`, `os.urandom()`, `uuid`, `secrets` or `random.SystemRandom`, directly or through a "
    "variable assigned from one; `random.seed()` and `numpy.random.seed()` given no seed (or `None`), which "
    "take one from the OS.",
    why="A seed that differs in every run is no seed: the run cannot be repeated. Use a constant (or one "
    "given on the command line and logged).",
    bad=HEAD + "import time\n\ntf.random.set_seed(int(time.time()))\n",
    good=HEAD + "tf.random.set_seed(1234)\n",
    autofix="Comments the line.",
    references=(FWR, SCRIPTS),
    language="python",
)


PY_HASHSEED_RUNTIME = Rule(
    id="py-pythonhashseed-runtime",
    severity="warning",
    title="PYTHONHASHSEED is set inside the running script",
    finds="`os.environ['PYTHONHASHSEED'] = ...` (or `setdefault`, `update`, `os.putenv`) in a script.",
    why="Python reads PYTHONHASHSEED once, when the interpreter starts: setting it in the running script "
    "changes nothing for this process (only for child processes it starts). Set it in the image "
    "(ENV PYTHONHASHSEED=0) or the command that starts the script.",
    bad="import os\n\nos.environ['PYTHONHASHSEED'] = '0'\n",
    good="import os\n\nprint(os.environ.get('PYTHONHASHSEED'))\n",
    autofix="Comments the line (the variable belongs in the image's ENV).",
    references=(
        ("Python documentation: PYTHONHASHSEED", "https://docs.python.org/3/using/cmdline.html#envvar-PYTHONHASHSEED"),
        SCRIPTS,
    ),
    language="python",
)


RULES: tuple[Rule, ...] = (PY_NO_GLOBAL_SEED, PY_UNSEEDED_RANDOM, PY_SEED_FROM_CLOCK, PY_HASHSEED_RUNTIME)

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


def check_seeds(s: Script) -> None:
    seeded = s.seeded()
    runs = s.runs()  # the training runs the script is part of: its own, or those of the scripts importing it
    for run in s.anchored_runs():
        if "tf" in run.seeds:
            continue
        layers, raises = next(
            (
                (f"{found} of {w.path}" if w.path != s.path else found, raised)
                for w in run.scripts
                for found, raised in [_layers_of(w)]
                if found
            ),
            ("", False),
        )
        s.add(
            PY_NO_GLOBAL_SEED,
            run.line,
            f"{run_words(s, run)} trains but sets no global TensorFlow seed: initializers, Dropout and shuffles "
            "draw a new random state in every run" + layers,
            _seed_fix(),
            severity="error" if raises else None,
        )
    if not runs and not seeded["tf"] and determinism_on(s, usable=True):
        # a script that only turns determinism on is judged too: an unseeded random op of the table raises there
        layers, raises = _unseeded_layers(s)
        if raises:
            s.add(
                PY_NO_GLOBAL_SEED,
                s.first_import_line(),
                "the script turns determinism on but sets no global TensorFlow seed" + layers,
                _seed_fix(),
                severity="error",
            )
    if runs:  # a script that trains, or a module of a training run: its draws are the run's
        firsts: dict[str, Call] = {}
        unseeded = {key: not s.run_seeded(key, runs) for key in ("python", "numpy")}
        for c in s.calls:
            name = c.name or ""
            key = (
                "python"
                if name.startswith("random.") and c.last in _PY_RANDOM
                else "numpy"
                if name.startswith("np.random.") and name.count(".") == 2 and c.last not in _NP_NOT_DRAWS
                else None
            )
            # the first draw in the source, by line and column (the walk is breadth first: a draw nested in
            # another call, np.random.random_sample(shape).astype(...), comes after a shallower one below it)
            if key is not None and unseeded[key] and (key not in firsts or _before(c, firsts[key])):
                firsts[key] = c
        who = "the script" if all(len(r.scripts) == 1 for r in runs) else "the training run"
        for key, c in firsts.items():
            seed = "random.seed(SEED)" if key == "python" else "numpy.random.seed(SEED)"
            s.add(
                PY_UNSEEDED_RANDOM,
                c.node.lineno,
                f"{c.name}() draws from {'Python' if key == 'python' else 'NumPy'}'s global generator, which "
                f"{who} never seeds",
                f"call {seed} once at start-up" + ("" if who == "the script" else ", in the run's entry script"),
            )
    for c in s.calls:
        name = c.name or ""
        if (
            name in ("np.random.default_rng", "np.random.RandomState", "random.Random")
            and not c.node.args
            and not c.node.keywords
        ):
            s.add(
                PY_UNSEEDED_RANDOM,
                c.node.lineno,
                f"{name}() without a seed starts from OS entropy",
                f"pass a seed: {name}(SEED)",
            )
        elif c.last == "from_non_deterministic_state" and name.startswith("tf."):
            s.add(
                PY_UNSEEDED_RANDOM,
                c.node.lineno,
                "tf.random.Generator.from_non_deterministic_state() draws a new state in every run",
                "use tf.random.Generator.from_seed(SEED)",
            )
        _clock_seed(s, c)


def _layers_of(s: Script) -> tuple[str, bool]:
    """_unseeded_layers, once per walk (a module of many runs is asked for each)."""
    if "unseeded_layers" not in s.memo:
        s.memo["unseeded_layers"] = _unseeded_layers(s)
    return s.memo["unseeded_layers"]  # type: ignore[no-any-return]


def _before(a: Call, b: Call) -> bool:
    return (a.node.lineno, a.node.col_offset) < (b.node.lineno, b.node.col_offset)


def _unseeded_layers(s: Script) -> tuple[str, bool]:
    """What the table says of the script's unseeded random ops and Keras random layers on its TensorFlow and
    Keras: the entry for calls without a seed while no global seed is set whose APIs the script calls
    (tf.random.uniform and Keras 2's Dropout raise from TF 2.7, Keras 3's Dropout stays nondeterministic), and the
    first such call of the script; True when it raises."""
    records, keras = s.target.records, s.keras_major()
    if records is None:
        return "", False
    method_hit: tuple[str, bool] | None = None  # a method the table names: told when no unseeded call is
    for kind, items in (("raises", records.raises), ("stays nondeterministic", records.silent)):
        for e in meetable(items, keras, "no_global_seed"):
            how = f"{kind} ({e.item.exception})" if e.item.exception is not None else kind
            for c in (n for call in s.calls for n in call.narrowed()):
                method = e.item.methods.get(c.attr or "") if c.name is None else None
                if method is not None and method_hit is None and holds(c.node, method) and determinism_on(s, True):
                    # model.fit: its default shuffle is an unseeded random op, which raises under determinism
                    method_hit = (
                        f"; on TensorFlow {s.target.tf_version} the table says {c.attr}() on line {c.node.lineno} "
                        f"{how}: {short(e.item.op)}",
                        kind == "raises",
                    )
                if holds(c.node, e.item.arguments) and any(matches(c, a, frozenset()) for a in e.apis):
                    name = c.name or ""
                    return (
                        f"; on TensorFlow {s.target.tf_version} the table says an unseeded "
                        f"{name.rsplit('.', 1)[-1] if name.startswith('keras.') else name} {how}: "
                        f"line {c.node.lineno}",
                        kind == "raises",
                    )
    if method_hit is not None:
        return method_hit
    return "", False


#: Seeding calls that, given no seed (or None), take one from the OS: random.seed(), numpy.random.seed().
_OS_SEEDED = frozenset({"random.seed", "np.random.seed"})


def _clock_seed(s: Script, c: Call) -> None:
    if c.name in _OS_SEEDED and not c.given_seed():
        s.add(
            PY_SEED_FROM_CLOCK,
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
                PY_SEED_FROM_CLOCK,
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


def _seed_fix() -> str:
    return (
        "call tf.keras.utils.set_random_seed(SEED) (TF 2.7+) or tf.random.set_seed(SEED) before building the "
        f"model ({param('fix', command='audit')} inserts it)"
    )


def check_hashseed(s: Script) -> None:
    for line, key, _ in s.env:
        if key == "PYTHONHASHSEED":
            s.add(
                PY_HASHSEED_RUNTIME,
                line,
                "PYTHONHASHSEED set inside the running script has no effect on "
                "this interpreter (Python reads it at start-up)",
                "set ENV PYTHONHASHSEED=0 in the image or in the command that starts the script",
            )


CHECKS = (check_seeds, check_hashseed)


def _insert_seeding(fix: Fixing, f: Finding) -> bool:
    """py-no-global-seed: the start-up block, with the global seeding in it."""
    return fix.startup()


def _seeded_by_startup(fix: Fixing, f: Finding) -> bool:
    """py-unseeded-random of Python's or NumPy's global generator: fixed by the global seeding already inserted
    (it seeds both), not by a seeding a later finding inserts (the line comes first)."""
    return "global generator" in f.message and bool(fix.inserted) and PY_NO_GLOBAL_SEED.id in fix.rules


def _seeding_lines(recipe: Recipe, version: str, tf: str) -> tuple[list[str], list[str], str] | None:
    """The global seeding's part of the start-up block: keras.utils.set_random_seed(0) where the recipe has that
    step (it seeds Python, NumPy and TensorFlow), else each generator's own seed."""
    records = facts.records(recipe)
    if any(st.step == "keras_set_random_seed" for st in records.steps):
        after = [f"{tf}.keras.utils.set_random_seed(0)"]
    else:
        # tf.compat.v1 exists from TF 1.13 (the table's advice for older versions says so)
        old = any(a.id == "compat-v1-before-1-13" for a in records.advice)
        tf1 = f"{tf}.set_random_seed(0)" if old else f"{tf}.compat.v1.set_random_seed(0)"
        after = [
            "import random",
            "import numpy",
            "random.seed(0)",
            "numpy.random.seed(0)",
            f"{tf}.random.set_seed(0)" if int(version.split(".")[0]) >= 2 else tf1,
        ]
    return [], after, "inserted the global seeding (seed 0)"


FIXES: dict[str, Fix] = {PY_NO_GLOBAL_SEED.id: _insert_seeding, PY_UNSEEDED_RANDOM.id: _seeded_by_startup}
FOLLOW_UPS: dict[str, Fix] = {}
STARTUP: dict[str, Startup] = {PY_NO_GLOBAL_SEED.id: _seeding_lines}
