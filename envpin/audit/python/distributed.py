"""Distributed training with tf.distribute: MultiWorkerMirroredStrategy without a pinned communication
implementation (py-dist-mwms-communication), a tf.random.Generator created under a strategy's scope or shared by
the replicas of strategy.run (py-dist-generator), sample_from_datasets / choose_from_datasets in a script that
distributes (py-dist-sample-from-datasets), an unseeded shuffle in a dataset a strategy distributes
(py-dist-unseeded-shuffle), and ParameterServerStrategy while determinism is on (py-dist-parameter-server).

What each rule says, and on which TensorFlow versions, is the distributed recipe's (recipes.json `distributed`,
read as typed records: its `code` settings and `hazards` by id); this module knows only how the patterns look in a
script. Horovod is its own family (envpin.audit.python.horovod), which reads the same part of the table.

The fixes: RING as the implementation of MultiWorkerMirroredStrategy (the argument added, or AUTO replaced), and
`seed=0` added to the unseeded shuffle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from envpin.audit.check import Finding
from envpin.audit.python.names import canonical
from envpin.audit.python.refs import HEAD, SCRIPTS
from envpin.audit.python.script import Call, Script, const
from envpin.audit.python.switch import determinism_on
from envpin.audit.python.table import matches
from envpin.audit.rule import Rule
from envpin.errors import param
from envpin.knowledge import recipes

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from envpin.audit.python.edits import Fix, Fixing, Startup
    from envpin.knowledge.distributedrecords import Guarded

#: The page of the distributed recipe, and the table it comes from.
RECIPE = ("The distributed recipe", "distributed.md")
_STRATEGY = "strategy = tf.distribute.MirroredStrategy()\n"

PY_DIST_MWMS = Rule(
    id="py-dist-mwms-communication",
    severity="warning",
    title="MultiWorkerMirroredStrategy without a pinned communication implementation",
    finds="`tf.distribute.MultiWorkerMirroredStrategy(...)` without `communication_options=` "
    "`CommunicationOptions(implementation=RING or NCCL)`, and the experimental (and `tf.compat.v1`) one without "
    "`communication=RING` or `NCCL`; either with `AUTO`, as a name or a string. The versions and the arguments are "
    "the distributed recipe's `code` settings (`mwms-communication`, `mwms-communication-experimental`). An "
    "argument the script computes is taken as pinned, unless it is the result of one of the script's functions "
    "that names `AUTO` (a mapping from a flag whose default is AUTO, as in tensorflow/models).",
    why="AUTO leaves the collective implementation to TensorFlow, and TensorFlow issue 121429 reports RING and AUTO "
    "giving substantially different results with TF_DETERMINISTIC_OPS=1 (TF 2.18). Pin RING (TensorFlow's own "
    "ring, CPU and GPU) or NCCL (GPUs, with the distributed recipe's NCCL settings).",
    bad=HEAD + "strategy = tf.distribute.MultiWorkerMirroredStrategy()\n",
    good=HEAD + "strategy = tf.distribute.MultiWorkerMirroredStrategy(\n"
    "    communication_options=tf.distribute.experimental.CommunicationOptions(\n"
    "        implementation=tf.distribute.experimental.CommunicationImplementation.RING))\n",
    autofix="Adds `communication_options=tf.distribute.experimental.CommunicationOptions(implementation="
    "tf.distribute.experimental.CommunicationImplementation.RING)` (the experimental strategy: "
    "`communication=tf.distribute.experimental.CollectiveCommunication.RING`), or replaces `AUTO` with `RING`, "
    "where the script imports `tensorflow` under a name; else comments the line. RING works on CPUs and GPUs; "
    "NCCL may be faster on GPUs (change it by hand).",
    references=(
        (
            "tf.distribute.experimental.CommunicationOptions",
            "https://www.tensorflow.org/api_docs/python/tf/distribute/experimental/CommunicationOptions",
        ),
        ("TensorFlow issue 121429", "https://github.com/tensorflow/tensorflow/issues/121429"),
        RECIPE,
        SCRIPTS,
    ),
    fixable=True,
    language="python",
    example_tf="2.18",
)


PY_DIST_GENERATOR = Rule(
    id="py-dist-generator",
    severity="warning",
    title="A tf.random.Generator created under a strategy's scope, or shared by the replicas",
    finds="A `tf.random.Generator` made (`Generator(...)`, `from_seed`, `from_non_deterministic_state`, "
    "`from_state`, `from_key_counter`) inside `with STRATEGY.scope():` or in the function a `STRATEGY.run(fn)` "
    "runs (which runs in the scope); and, inside that function, "
    "`tf.random.get_global_generator()` or a generator the script made outside the "
    "scope. A strategy is an object made by a `tf.distribute.*Strategy` call or named `strategy`. The versions "
    "are the distributed recipe's hazards `generator-in-scope-raises` (an error: TensorFlow 2.2-2.4 raise "
    "ValueError), `generator-in-scope` and `shared-generator-in-replica`.",
    why="Under the scope each replica draws its own stream derived from its replica id; a shared generator hands "
    "its numbers to the replicas one after another. Either way what a replica draws depends on how many replicas "
    "there are, so runs with another replica count cannot match. Give each replica its own generator "
    "(Generator.split) or stateless ops seeded from the replica id.",
    bad=HEAD + _STRATEGY + "with strategy.scope():\n    gen = tf.random.Generator.from_seed(1)\n",
    good=HEAD + _STRATEGY + "gen = tf.random.Generator.from_seed(1)\nwith strategy.scope():\n"
    "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n",
    autofix="Comments the line.",
    references=(
        ("tf.random.Generator", "https://www.tensorflow.org/api_docs/python/tf/random/Generator"),
        (
            "NVIDIA/framework-reproducibility: tf.distribute strategies",
            "https://github.com/NVIDIA/framework-reproducibility/blob/master/doc/d9m/tensorflow.md"
            "#multi-gpu-using-tfdistribute-strategies",
        ),
        RECIPE,
        SCRIPTS,
    ),
    language="python",
    example_tf="2.18",
)


PY_DIST_SAMPLE = Rule(
    id="py-dist-sample-from-datasets",
    severity="warning",
    title="sample_from_datasets or choose_from_datasets in a script that uses a distribution strategy",
    finds="`tf.data.experimental.sample_from_datasets` / `Dataset.sample_from_datasets` (and, as info, "
    "`choose_from_datasets`) in a script that makes a `tf.distribute` strategy other than "
    "`OneDeviceStrategy`, or distributes a dataset, on the versions of the distributed recipe's hazards "
    "`sample-from-datasets` and `choose-from-datasets` (from TensorFlow 2.4).",
    why="sample_from_datasets was reported nondeterministic on several GPUs and deterministic on one (TensorFlow "
    "issue 53846, TF 2.4.1), and no fix is known. Check the pipeline's output on the GPUs (hash the batches of "
    "two runs) or build the mix another way.",
    bad=HEAD + _STRATEGY + "a = tf.data.Dataset.range(10)\nb = tf.data.Dataset.range(10, 20)\n"
    "mixed = tf.data.Dataset.sample_from_datasets([a, b], seed=1)\n",
    good=HEAD + _STRATEGY + "a = tf.data.Dataset.range(10)\nb = tf.data.Dataset.range(10, 20)\n"
    "mixed = a.concatenate(b).shuffle(20, seed=1)\n",
    autofix="Comments the line.",
    references=(
        ("TensorFlow issue 53846", "https://github.com/tensorflow/tensorflow/issues/53846"),
        RECIPE,
        SCRIPTS,
    ),
    language="python",
    example_tf="2.18",
)


PY_DIST_SHUFFLE = Rule(
    id="py-dist-unseeded-shuffle",
    severity="warning",
    title="An unseeded shuffle in a dataset a strategy distributes",
    finds="`Dataset.shuffle(buffer)` with no `seed` in a dataset given to `STRATEGY.experimental_distribute_"
    "dataset(...)`, built in the function given to `distribute_datasets_from_function(...)`, or given to a "
    "Keras `fit` in a script that builds its model under `STRATEGY.scope()` (followed through the variables "
    "the script assigns it to, an element of a tuple a function of the script returns, `train, test = "
    "datasets()`, and a function of another script of the run that makes it: reported in that script). Info "
    "when the run sets a global TensorFlow seed.",
    why="A shuffle without a seed takes one from the global seed in the order the process creates unseeded random "
    "ops (or, with none set, a new one each run), and NVIDIA found the seed of shuffle needed for determinism "
    "under tf.distribute; before TF 2.3 reshuffle_each_iteration=True was nondeterministic under MirroredStrategy. "
    "Pass the same seed on every worker.",
    bad=HEAD + _STRATEGY + "ds = tf.data.Dataset.range(100).shuffle(100).batch(8)\n"
    "dist = strategy.experimental_distribute_dataset(ds)\n",
    good=HEAD + _STRATEGY + "ds = tf.data.Dataset.range(100).shuffle(100, seed=0).batch(8)\n"
    "dist = strategy.experimental_distribute_dataset(ds)\n",
    autofix="Adds `seed=0` to the shuffle (the same on every worker, so the workers' shards stay disjoint).",
    references=(
        (
            "NVIDIA/framework-reproducibility: tf.distribute strategies",
            "https://github.com/NVIDIA/framework-reproducibility/blob/master/doc/d9m/tensorflow.md"
            "#multi-gpu-using-tfdistribute-strategies",
        ),
        RECIPE,
        SCRIPTS,
    ),
    fixable=True,
    language="python",
    example_tf="2.18",
)


PY_DIST_PSS = Rule(
    id="py-dist-parameter-server",
    severity="warning",
    title="ParameterServerStrategy while determinism is on",
    finds="`tf.distribute.ParameterServerStrategy`, `tf.distribute.experimental.ParameterServerStrategy` or "
    "`tf.compat.v1.distribute.experimental.ParameterServerStrategy` in a script that (or whose image) turns "
    "determinism on; the distributed recipe's hazard `parameter-server-strategy`.",
    why="TensorFlow's enable_op_determinism says ParameterServerStrategy can introduce nondeterminism, and its "
    "determinism RFC that it will be neither made deterministic nor refused: the switch does not cover it. Use "
    "MultiWorkerMirroredStrategy for a run that must repeat.",
    bad=HEAD + "tf.config.experimental.enable_op_determinism()\n"
    "resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()\n"
    "strategy = tf.distribute.ParameterServerStrategy(resolver)\n",
    good=HEAD + "tf.config.experimental.enable_op_determinism()\n"
    "strategy = tf.distribute.MultiWorkerMirroredStrategy(\n"
    "    communication_options=tf.distribute.experimental.CommunicationOptions(\n"
    "        implementation=tf.distribute.experimental.CommunicationImplementation.RING))\n",
    autofix="Comments the line.",
    references=(
        (
            "tf.config.experimental.enable_op_determinism",
            "https://www.tensorflow.org/api_docs/python/tf/config/experimental/enable_op_determinism",
        ),
        RECIPE,
        SCRIPTS,
    ),
    language="python",
    example_tf="2.18",
)


RULES: tuple[Rule, ...] = (PY_DIST_MWMS, PY_DIST_GENERATOR, PY_DIST_SAMPLE, PY_DIST_SHUFFLE, PY_DIST_PSS)

#: Methods a strategy runs a replica function with.
_RUNS = frozenset({"run", "experimental_run_v2", "experimental_run"})
#: Methods a strategy distributes a dataset with (the dataset, or a function that makes it).
_DISTRIBUTES = frozenset(
    {
        "experimental_distribute_dataset",
        "distribute_datasets_from_function",
        "experimental_distribute_datasets_from_function",
    }
)
#: Implementations a pinned argument may name (CommunicationImplementation / CollectiveCommunication members).
_PINNED = frozenset({"RING", "NCCL"})
#: A tf.random.Generator's methods that draw numbers (split, state and reset are not draws).
_DRAWS = frozenset(
    {"normal", "uniform", "truncated_normal", "binomial", "uniform_full_int", "make_seeds", "make_seeds_v2"}
)


# --- what the table says for the script's TensorFlow ---------------------------------------------------------


def _guarded(s: Script, key: str, gid: str) -> Guarded | None:
    """The distributed recipe's code setting or hazard `gid` (key: code, hazards) when it is about the script's
    TensorFlow; with no version known, the one whose range is open at the top (the newest)."""
    part = recipes.book().distributed
    if part is None:
        return None
    item = part.setting(gid) if key == "code" else part.hazard(gid)
    if item is None:
        return None
    version = s.target.tf_version
    return item if (item.applies_to(version) if version else item.tf_max is None) else None


def _called(c: Call, g: Guarded) -> bool:
    """A call of one of the entry's APIs (its last name first: most calls are of none)."""
    if c.last not in {a.rsplit(".", 1)[-1] for a in g.apis}:
        return False
    return any(matches(n, canonical(a), frozenset()) for n in c.narrowed() for a in g.apis)


def _distributed_script(s: Script) -> bool:
    """Whether the script can be about tf.distribute at all: it names tf.distribute, or calls a method a strategy
    has (scope, run, a dataset's distribution). The checks that walk the script ask this first."""
    return any(
        (c.name or "").startswith(("tf.distribute.", "tf.compat.v1.distribute."))
        or c.attr in _RUNS
        or c.attr in _DISTRIBUTES
        or c.attr == "scope"
        for c in s.calls
    )


# --- strategies -------------------------------------------------------------------------------------------


def _makes_strategy(name: str | None) -> bool:
    """A tf.distribute strategy's constructor (tf.distribute.*Strategy, experimental and compat.v1 ones too) or
    tf.distribute.get_strategy."""
    if not name:
        return False
    return name.startswith(("tf.distribute.", "tf.compat.v1.distribute.")) and name.endswith(
        ("Strategy", "get_strategy")
    )


def _strategy_names(s: Script) -> set[str]:
    """The names the script binds to a strategy it makes."""
    return {
        n
        for n, values in s.assigned.items()
        if any(isinstance(v, ast.Call) and _makes_strategy(s.names.resolve(v.func)) for v in values)
    }


def _is_strategy(s: Script, node: ast.expr, names: set[str]) -> bool:
    """A strategy: made in place, a name bound to one, or a name or attribute called strategy (a parameter,
    self.strategy)."""
    if isinstance(node, ast.Call):
        return _makes_strategy(s.names.resolve(node.func))
    if isinstance(node, ast.Name):
        return node.id in names or "strategy" in node.id.lower()
    if isinstance(node, ast.Attribute):
        return "strategy" in node.attr.lower()
    return False


def _distributes(s: Script, names: set[str]) -> bool:
    """The script makes a strategy that runs several replicas or workers (not OneDeviceStrategy), or calls a
    strategy's method that distributes."""
    for c in s.calls:
        if _makes_strategy(c.name) and not (c.name or "").endswith(("OneDeviceStrategy", "get_strategy")):
            return True
        func = c.node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in (*_DISTRIBUTES, *_RUNS)
            and _is_strategy(s, func.value, names)
        ):
            return True
    return False


def _scopes(s: Script, names: set[str]) -> list[ast.With | ast.AsyncWith]:
    """The `with STRATEGY.scope():` blocks."""
    out: list[ast.With | ast.AsyncWith] = []
    for node in s.withs:
        for item in node.items:
            e = item.context_expr
            if (
                isinstance(e, ast.Call)
                and isinstance(e.func, ast.Attribute)
                and e.func.attr == "scope"
                and _is_strategy(s, e.func.value, names)
            ):
                out.append(node)
                break
    return out


def _inside(node: ast.AST, blocks: list[ast.With | ast.AsyncWith]) -> bool:
    line = getattr(node, "lineno", 0)
    return any(b.body and b.body[0].lineno <= line <= (b.end_lineno or b.lineno) for b in blocks)


def _function(s: Script, node: ast.expr | None) -> ast.AST | None:
    """The function a call is given: a lambda, a function of the script by name, or one passed through partial."""
    if isinstance(node, ast.Call) and (s.names.resolve(node.func) or "").endswith("partial") and node.args:
        node = node.args[0]
    if isinstance(node, ast.Lambda):
        return node
    if isinstance(node, ast.Name):
        return s.functions.get(node.id)
    if isinstance(node, ast.Attribute):
        return s.functions.get(node.attr)
    return None


# --- the checks --------------------------------------------------------------------------------------------


def _implementation(s: Script, node: ast.expr | None, depth: int = 2) -> str | None:
    """What an implementation argument names: RING, NCCL or AUTO; "computed" when the script computes it (a
    variable bound to something else, a call); None when absent."""
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.upper()
    if isinstance(node, ast.Attribute) and node.attr.upper() in (*_PINNED, "AUTO"):
        return node.attr.upper()
    if isinstance(node, ast.Name) and depth and len(s.assigned.get(node.id, [])) == 1:
        return _implementation(s, s.assigned[node.id][0], depth - 1)
    if isinstance(node, ast.Call):
        fn = _function(s, node.func)
        if fn is not None and any(isinstance(n, ast.Attribute) and n.attr == "AUTO" for n in ast.walk(fn)):
            return f"AUTO through {node.func.id}()" if isinstance(node.func, ast.Name) else "AUTO"
    return "computed"


def _options_implementation(s: Script, node: ast.expr | None, depth: int = 2) -> str | None:
    """The implementation a communication_options= value asks for: CommunicationOptions(implementation=...)
    (its third argument), followed through one variable; "computed" for anything else."""
    if node is None:
        return None
    if isinstance(node, ast.Name) and depth and len(s.assigned.get(node.id, [])) == 1:
        return _options_implementation(s, s.assigned[node.id][0], depth - 1)
    if isinstance(node, ast.Call) and (s.names.resolve(node.func) or "").endswith("CommunicationOptions"):
        c = Call(node, None, None)
        given = c.kw("implementation") or (node.args[2] if len(node.args) > 2 else None)
        return _implementation(s, given) or "AUTO"
    return "computed"


def check_mwms(s: Script) -> None:
    for c in s.calls:
        name = c.name or ""
        if not name.endswith("MultiWorkerMirroredStrategy"):
            continue
        experimental = ".experimental." in name
        g = _guarded(s, "code", "mwms-communication-experimental" if experimental else "mwms-communication")
        if g is None or not _called(c, g):
            continue
        if experimental:
            asked = _implementation(s, c.kw("communication") or (c.node.args[0] if c.node.args else None))
            argument = "communication"
        else:
            asked = _options_implementation(
                s, c.kw("communication_options") or (c.node.args[1] if len(c.node.args) > 1 else None)
            )
            argument = "communication_options"
        if asked in (*_PINNED, "computed"):
            continue  # pinned, or computed in a way the script does not show
        said = (
            f"gives no {argument}"
            if asked is None
            else ("asks for AUTO" if asked == "AUTO" else f"may ask for AUTO ({asked}, which can return AUTO)")
        )
        shown = "experimental.MultiWorkerMirroredStrategy" if experimental else "MultiWorkerMirroredStrategy"
        s.add(
            PY_DIST_MWMS,
            c.node.lineno,
            f"{shown}(...) {said}, so TensorFlow picks the collective implementation: {g.text}",
            f"pin RING or NCCL ({param('fix', command='audit')} adds RING)",
        )


#: The hazards of a generator made under a strategy's scope, the one that raises first.
_IN_SCOPE = ("generator-in-scope-raises", "generator-in-scope")


def check_generator(s: Script) -> None:
    if not _distributed_script(s):
        return
    names = _strategy_names(s)
    scopes = _scopes(s, names)
    made = next((g for g in (_guarded(s, "hazards", h) for h in _IN_SCOPE) if g is not None), None)
    outside: set[str] = set()  # names bound to a generator made outside any scope
    run_fns = _run_functions(s, names)

    def in_scope(node: ast.AST) -> bool:
        return _inside(node, scopes) or any(_within(node, fn) for fn, _ in run_fns)

    for c in s.calls:
        if made is None or not _called(c, made):
            continue
        if in_scope(c.node):
            raises = made.id == "generator-in-scope-raises"
            s.add(
                PY_DIST_GENERATOR,
                c.node.lineno,
                f"{c.name}() under a strategy's scope() (or in a function its run() runs): {made.text}",
                "create the generator outside the scope and give each replica its own (Generator.split), or use "
                "stateless random ops seeded from the replica id",
                severity="error" if raises else None,
            )
    for n, values in s.assigned.items():
        if made is not None and any(
            isinstance(v, ast.Call) and not in_scope(v) and _called(_call_of(s, v), made) for v in values
        ):
            outside.add(n)
    shared = _guarded(s, "hazards", "shared-generator-in-replica")
    if shared is None:
        return
    seen: set[int] = set()
    for fn, method in run_fns:
        for sub in ast.walk(fn):
            if not isinstance(sub, ast.Call) or id(sub) in seen:
                continue
            inner = _call_of(s, sub)
            owner = sub.func.value if isinstance(sub.func, ast.Attribute) else None
            draws = isinstance(sub.func, ast.Attribute) and sub.func.attr in _DRAWS
            if _called(inner, shared) or (draws and isinstance(owner, ast.Name) and owner.id in outside):
                seen.add(id(sub))
                what = f"{inner.name}()" if inner.name else f"the generator {owner.id}"  # type: ignore[union-attr]
                s.add(
                    PY_DIST_GENERATOR,
                    sub.lineno,
                    f"{what} drawn from inside {method}(): {shared.text}",
                    "give each replica its own generator (Generator.split) or a stateless op seeded from the "
                    "replica id",
                )


def _run_functions(s: Script, names: set[str]) -> list[tuple[ast.AST, str]]:
    """The functions a strategy's run() (or experimental_run_v2) runs, with the method's name: their bodies run
    in the strategy's scope, once per replica."""
    out = []
    for c in s.calls:
        func = c.node.func
        if isinstance(func, ast.Attribute) and func.attr in _RUNS and _is_strategy(s, func.value, names):
            fn = _function(s, c.node.args[0] if c.node.args else c.kw("fn"))
            if fn is not None:
                out.append((fn, func.attr))
    return out


def _within(node: ast.AST, fn: ast.AST) -> bool:
    line = getattr(node, "lineno", 0)
    return getattr(fn, "lineno", 0) <= line <= (getattr(fn, "end_lineno", 0) or 0)


def _call_of(s: Script, node: ast.Call) -> Call:
    return Call(node, s.names.resolve(node.func), None, s.names.star_alternatives(node.func))


def check_sample(s: Script) -> None:
    if not _distributed_script(s):
        return
    names = _strategy_names(s)
    if not _distributes(s, names):
        return
    for hid, severity in (("sample-from-datasets", None), ("choose-from-datasets", "info")):
        g = _guarded(s, "hazards", hid)
        if g is None:
            continue
        for c in s.calls:
            if _called(c, g):
                s.add(
                    PY_DIST_SAMPLE,
                    c.node.lineno,
                    f"{c.name}() in a script that distributes: {g.text}",
                    "hash the pipeline's batches in two runs on the GPUs, or mix the datasets another way",
                    severity=severity,
                )


def _sources(s: Script, node: ast.AST | None, seen: set[str], depth: int = 4) -> Iterator[ast.AST]:
    """The expressions a dataset is made of: `node`, and what every name in it is assigned anywhere in the script
    (ds = ds.shuffle(...) chains), `depth` names deep; an element of what a function of the script returns
    (`train, test = datasets()`: train is the first element of its `return train, test`)."""
    if node is None:
        return
    picked = _returned_element(s, node)
    if picked is not None:
        if depth:
            for element in picked:
                yield from _sources(s, element, seen, depth - 1)
        return
    yield node
    if depth == 0:
        return
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id not in seen and sub.id in s.assigned:
            seen.add(sub.id)
            for value in s.assigned[sub.id]:
                yield from _sources(s, value, seen, depth - 1)
        elif (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Name)
            and sub.func.id in s.functions
            and "def " + sub.func.id not in seen
        ):  # a function of the script that makes the dataset: what it returns is made in its body
            seen.add("def " + sub.func.id)
            yield from _sources(s, s.functions[sub.func.id], seen, depth - 1)


def _returned_element(s: Script, node: ast.AST) -> list[ast.expr] | None:
    """For `f(...)[i]` of a function of the script whose returns are tuples (or lists): the i-th element of each;
    None for anything else (then the whole function body is what the dataset is made of)."""
    if not (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Name)
        and isinstance(const(node.slice), int)
    ):
        return None
    fn = s.functions.get(node.value.func.id)
    if fn is None:
        return None
    i = const(node.slice)
    returns = [r.value for r in _own_returns(fn) if r.value is not None]
    if not returns or not all(isinstance(r, (ast.Tuple, ast.List)) and len(r.elts) > i for r in returns):
        return None
    return [r.elts[i] for r in returns]  # type: ignore[attr-defined]


def _own_returns(fn: ast.AST) -> Iterator[ast.Return]:
    """The return statements of a function, not those of the functions defined inside it."""
    todo = list(ast.iter_child_nodes(fn))
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Return):
            yield node
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))


def _unseeded_shuffles(s: Script, roots: list[ast.AST]) -> Iterator[ast.Call]:
    seen: set[str] = set()
    for root in roots:
        for node in _sources(s, root, seen):
            for sub in ast.walk(node):
                if (
                    isinstance(sub, ast.Call)
                    and isinstance(sub.func, ast.Attribute)
                    and sub.func.attr == "shuffle"
                    and not (s.names.resolve(sub.func) or "").startswith(("tf.random.", "np.", "random."))
                    and len(sub.args) < 2
                    and not any(k.arg == "seed" for k in sub.keywords)
                    and (sub.args or any(k.arg == "buffer_size" for k in sub.keywords))
                ):
                    yield sub


def _shuffle_roots(s: Script) -> list[tuple[ast.AST, str]]:
    """The datasets the script distributes (what the shuffle rule follows back), with how: given to
    experimental_distribute_dataset(), made by the function given to distribute_datasets_from_function(), or given
    to fit() in a script that builds its model under a strategy's scope."""
    if not _distributed_script(s):
        return []
    names = _strategy_names(s)
    scoped = bool(_scopes(s, names))
    roots: list[tuple[ast.AST, str]] = []
    for c in s.calls:
        func = c.node.func
        if not isinstance(func, ast.Attribute):
            continue
        first = c.node.args[0] if c.node.args else None
        if func.attr == "experimental_distribute_dataset" and first is not None:
            roots.append((first, "experimental_distribute_dataset()"))
        elif func.attr in _DISTRIBUTES:
            fn = _function(s, first or c.kw("dataset_fn"))
            if fn is not None:
                roots.append((fn, f"{func.attr}()"))
        elif scoped and c.attr in ("fit", "fit_generator") and (first is not None or c.kw("x") is not None):
            roots.append((first or c.kw("x"), "fit() under a strategy's scope"))  # type: ignore[arg-type]
    return roots


def _distributed_elsewhere(s: Script) -> Iterator[tuple[ast.AST, str]]:
    """The functions of this script whose datasets another script of the run distributes (`dataset =
    mnist_setup.mnist_dataset(64)` then fit() under the scope there), with how and where."""
    users = {p.path: p for p in s.peers.values() if p.walk is not None and p.path != s.path}
    for peer in users.values():
        module = {local for local, path, name in peer.bound if path == s.path and not name}
        functions = {local: name for local, path, name in peer.bound if path == s.path and name}
        if not (module or functions):
            continue
        w = peer.walk
        assert w is not None
        for root, how in _shuffle_roots(w):
            for node in _sources(w, root, set()):
                for sub in ast.walk(node):
                    if not isinstance(sub, ast.Call):
                        continue
                    f = sub.func
                    name = (
                        functions.get(f.id)
                        if isinstance(f, ast.Name)
                        else f.attr
                        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in module
                        else None
                    )
                    if name is not None and name in s.functions:
                        yield s.functions[name], f"{how} in {peer.path} (through {ast.unparse(f)})"


def check_shuffle(s: Script) -> None:
    g = _guarded(s, "hazards", "unseeded-shuffle-distributed")
    if g is None:
        return
    roots = [*_shuffle_roots(s), *_distributed_elsewhere(s)]
    if not roots:
        return
    seeded = s.run_seeded("tf")
    done: set[int] = set()
    for root, how in roots:
        for shuffle in _unseeded_shuffles(s, [root]):
            line = shuffle.func.end_lineno or shuffle.lineno  # where `.shuffle` is, in a chain over lines
            if line in done:
                continue
            done.add(line)
            s.add(
                PY_DIST_SHUFFLE,
                line,
                f"shuffle() without a seed in a dataset given to {how}"
                + (
                    "; a global seed is set, so the order repeats while nothing created before it changes"
                    if seeded
                    else ""
                )
                + f": {g.text}",
                f"pass seed= to shuffle(), the same on every worker ({param('fix', command='audit')} adds seed=0)",
                severity="info" if seeded else None,
            )


def check_parameter_server(s: Script) -> None:
    g = _guarded(s, "hazards", "parameter-server-strategy")
    found = [c for c in s.calls if (c.name or "").endswith("ParameterServerStrategy")] if g is not None else []
    if g is None or not found or not determinism_on(s):
        return
    for c in found:
        if _called(c, g):
            s.add(
                PY_DIST_PSS,
                c.node.lineno,
                f"{c.name}() with determinism on: {g.text}",
                "use MultiWorkerMirroredStrategy with a pinned implementation for a run that must repeat",
            )


CHECKS = (check_mwms, check_generator, check_sample, check_shuffle, check_parameter_server)


# --- the fixes ------------------------------------------------------------------------------------------------


def _tf_name(fix: Fixing) -> str | None:
    """The module-level name the script binds tensorflow to (import tensorflow as tf), if any."""
    for node in fix.tree.body:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name == "tensorflow":
                    return a.asname or "tensorflow"
    return None


def _pin_ring(fix: Fixing, f: Finding) -> bool:
    """py-dist-mwms-communication: AUTO replaced with RING where the call names it, else the argument added with
    RING (the experimental strategy's communication=, or communication_options=); False where the script binds
    tensorflow to no name the added argument could use."""
    for call in fix.calls_at(f.line):
        name = _canonical_call(fix, call)
        if not name.endswith("MultiWorkerMirroredStrategy"):
            continue
        experimental = ".experimental." in name
        argument = "communication" if experimental else "communication_options"
        given = any(k.arg == argument for k in call.keywords) or len(call.args) > (0 if experimental else 1)
        auto = _auto_node(call)
        if auto is not None:
            return _replace_auto(fix, f, auto)
        tf = _tf_name(fix)
        if tf is None or given:  # no name to write it with, or an argument the script computes: by hand
            return False
        if experimental:
            text = f"communication={tf}.distribute.experimental.CollectiveCommunication.RING"
        else:
            text = (
                f"communication_options={tf}.distribute.experimental.CommunicationOptions("
                f"implementation={tf}.distribute.experimental.CommunicationImplementation.RING)"
            )
        if fix.add_argument(call, text):
            fix.actions.append(f"line {f.line}: MultiWorkerMirroredStrategy pinned to RING")
            return True
    return False


def _canonical_call(fix: Fixing, call: ast.Call) -> str:
    """The canonical name of a call, with the names of the script being fixed."""
    from envpin.audit.python.names import Names

    return Names(fix.tree).resolve(call.func) or ""


def _auto_node(call: ast.Call) -> ast.expr | None:
    """Where a call of the strategy names AUTO: `...AUTO` or "auto" as its communication or as the implementation
    of the CommunicationOptions it is given in place."""
    for node in ast.walk(call):
        if isinstance(node, ast.Attribute) and node.attr == "AUTO":
            return node
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.upper() == "AUTO":
            return node
    return None


def _replace_auto(fix: Fixing, f: Finding, node: ast.expr) -> bool:
    line, end = node.end_lineno, node.end_col_offset
    if line is None or end is None or line != node.lineno:
        return False
    if isinstance(node, ast.Attribute):
        fix.edits.cuts.setdefault(line, []).append((end - len("AUTO"), end, "RING"))
    else:
        fix.edits.cuts.setdefault(line, []).append((node.col_offset, end, '"RING"'))
    fix.actions.append(f"line {f.line}: AUTO replaced with RING")
    return True


def _seed_shuffle(fix: Fixing, f: Finding) -> bool:
    """py-dist-unseeded-shuffle: seed=0 added to the unseeded shuffle whose `.shuffle` is on the finding's line."""
    for call in (n for n in ast.walk(fix.tree) if isinstance(n, ast.Call)):
        if (
            isinstance(call.func, ast.Attribute)
            and (call.func.end_lineno or call.lineno) == f.line
            and call.func.attr == "shuffle"
            and not any(k.arg == "seed" for k in call.keywords)
            and len(call.args) < 2
            and fix.add_argument(call, "seed=0")
        ):
            fix.actions.append(f"line {f.line}: seed=0 added to shuffle()")
            return True
    return False


FIXES: dict[str, Fix] = {PY_DIST_MWMS.id: _pin_ring, PY_DIST_SHUFFLE.id: _seed_shuffle}
FOLLOW_UPS: dict[str, Fix] = {}
STARTUP: dict[str, Startup] = {}
