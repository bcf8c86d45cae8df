"""One walk over a Python script's syntax tree: what it imports (envpin.audit.python.names), calls, sets in its
environment and assigns, and where; and the TensorFlow it is judged against (ScriptTarget). The families'
checks (envpin.audit.rules.script_families) read this; nothing here knows a rule.
"""

from __future__ import annotations

import ast
import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from envpin.audit import facts
from envpin.audit.check import Finding, finding
from envpin.audit.python.names import Names, canonical
from envpin.audit.rule import Rule
from envpin.knowledge.recipes import Recipe
from envpin.portable.versions import major_minor
from envpin.record import Value

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from typing import Any

    from envpin.knowledge.reciperecords import RecipeRecords


@dataclass(frozen=True, slots=True)
class ScriptTarget(Value):
    """The TensorFlow a script is judged against and what the image already sets."""

    #: Where the version came from (a Dockerfile's base, the lock, the TensorFlow version given).
    label: str = ""
    tf_version: str | None = None
    recipe: Recipe | None = None
    #: The produced image's ENV (a determinism switch or HOROVOD_FUSION_THRESHOLD set there counts for the script).
    image_env: Mapping[str, str] = field(default_factory=dict)

    @property
    def records(self) -> RecipeRecords | None:
        """The recipe's parts as typed records (envpin.audit.facts), None without a recipe."""
        return None if self.recipe is None else facts.records(self.recipe)


#: Calls that train a model (method names): a script with none of them is a library module, not a training run.
_TRAIN_METHODS = frozenset({"fit", "fit_generator", "train_on_batch", "minimize", "apply_gradients"})
#: Functions of a custom training loop, by name: calling one (or handing it to strategy.run) runs training.
_STEP_FUNCTIONS = frozenset({"train_step", "training_step", "train_one_step", "distributed_train_step"})
#: Framework trainers' entry points (tensorpack): a call of one runs a training loop.
_TRAINER_CALLS = frozenset({"launch_train_with_config", "launch_train", "train_with_defaults"})
#: TF1 sessions, whose run() of a train op is a training step.
_SESSIONS = frozenset(
    {"Session", "InteractiveSession", "MonitoredTrainingSession", "MonitoredSession", "SingularMonitoredSession"}
)
#: What a TF1 train op is called (`train_op`, `model.opt_op`, `self.update`, `optimizer_step`).
_TRAIN_OP = re.compile(r"(^|_)(train|opt|optim|optimizer|update|updates|minimize|step)(_|$|op)", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Peer(Value):
    """Another script of the same run, as an import of it is judged: whether it uses TensorFlow, and why it
    trains (its own training call), if it does; and, for the run as a whole (Script.runs), the scripts of the run
    it imports, whether it trains through them, the names its imports bind to them, and its own walk."""

    path: str
    uses_tf: bool
    reason: str | None
    #: The paths of the scripts of the run it imports, in the order of its imports.
    imports: tuple[str, ...] = ()
    #: Whether it trains: itself, or through a name it imports from a script of the run that does.
    trains: bool = False
    #: What its imports bind to scripts of the run: (local name, the script's path, the name imported from it;
    #: "" for the module itself: `import mnist_setup`).
    bound: tuple[tuple[str, str, str], ...] = ()
    #: Its own walk (without the run): what the run's rules read of it (its seeds, its switch, its functions).
    walk: Script | None = field(default=None, compare=False, repr=False)
    #: The training runs it is part of (make_runs).
    member_of: tuple[Run, ...] = field(default=(), compare=False, repr=False)


def run_orders(by_path: Mapping[str, Peer]) -> list[tuple[str, tuple[str, ...]]]:
    """The training runs of a set of scripts (by path): each entry script (it trains, and no other training script
    imports it, directly or through other scripts; scripts that import each other are both entries) with the paths
    of its run: itself, then the scripts it imports, depth first in the order of the imports."""

    def closure(path: str) -> tuple[str, ...]:
        order: dict[str, None] = {}
        todo = [path]
        while todo:
            here = todo.pop()
            if here in order or here not in by_path:
                continue
            order[here] = None
            todo.extend(reversed(by_path[here].imports))
        return tuple(order)

    training = [path for path, p in by_path.items() if p.trains]
    reach = {path: closure(path) for path in training}
    within = {path: set(order) for path, order in reach.items()}
    importers: dict[str, list[str]] = {}
    for o in training:
        for path in reach[o][1:]:
            importers.setdefault(path, []).append(o)
    # an entry: every training script that reaches it is one it reaches too (an import cycle), or none is
    return [(e, reach[e]) for e in training if all(o in within[e] for o in importers.get(e, ()) if o != e)]


@dataclass(frozen=True, slots=True)
class Run(Value):
    """One training run of several scripts: the entry script (it trains and no other training script of the run
    imports it) and the scripts of the run it imports, directly or through each other, in the order of the
    imports. A hazard of the whole run (no switch, no seed) is reported once: in `anchor` at `line`, the entry's
    TensorFlow (or Keras) import, or, where the entry imports neither, the first script of the run that does."""

    entry: str
    #: The walks of the run's scripts, the entry first.
    scripts: tuple[Script, ...]
    anchor: str
    line: int
    #: The generators some script of the run seeds (tf, python, numpy; Script.seeded).
    seeds: frozenset[str] = frozenset()


def make_runs(by_path: Mapping[str, Peer]) -> list[Run]:
    """The training runs of a set of scripts (by path; each Peer with its walk), as run_orders finds them."""
    runs = []
    for entry, order in run_orders(by_path):
        walks = tuple(w for w in (by_path[path].walk for path in order) if w is not None)
        anchor = next((w for w in walks if w.tf_import_line() is not None), walks[0])
        seeds = frozenset(k for k in ("tf", "python", "numpy") if any(w.seeded()[k] for w in walks))
        runs.append(Run(entry, walks, anchor.path, anchor.first_import_line(), seeds))
    return runs


def module_names(path: str) -> list[str]:
    """The dotted names an import may reach a script by: its stem, then with each folder above it added
    (pkg/models.py: models, pkg.models; a package's __init__.py: its folder's)."""
    parts = path.replace("\\", "/").removesuffix(".envpin-fixed").removesuffix(".py").split("/")
    parts = [p for p in parts if p not in ("", ".")]
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return [".".join(parts[i:]) for i in range(len(parts) - 1, -1, -1) if parts[i:]]


def _relative(here: list[str], level: int, module: str | None) -> list[str]:
    """The absolute names `from .mod import x` (level dots) may stand for, from the script's own names."""
    out = []
    for name in here:
        package = name.split(".")[:-level] if level <= name.count(".") else []
        out.append(".".join([*package, *([module] if module else [])]))
    return [o for o in dict.fromkeys(out)]


def _root_name(node: ast.AST) -> str | None:
    """The name an attribute chain or a call's result starts from (`models.build` and `build()` -> models,
    build)."""
    while isinstance(node, (ast.Attribute, ast.Call)):
        node = node.value if isinstance(node, ast.Attribute) else node.func
    return node.id if isinstance(node, ast.Name) else None


def _trains_at(s: Script, c: Call) -> str | None:
    """Why this call runs training, in words, or None."""
    callee = c.last or (c.node.func.id if isinstance(c.node.func, ast.Name) else "")
    if c.attr in _TRAIN_METHODS:
        return f"calls {c.attr}()"
    if c.last == "GradientTape":
        return "records gradients with tf.GradientTape"
    if c.name and (
        (
            c.name.startswith(("keras.optimizers.", "tf.train.", "tf.compat.v1.train."))
            and c.last[:1].isupper()
            and "Optimizer" in c.last
        )
        or c.last == "AdamOptimizer"
    ):
        return f"makes the optimizer {c.name}"
    if c.name and c.name.startswith("tf.") and c.last.endswith("Estimator") and c.last[:1].isupper():
        return f"makes the estimator {c.name}"
    if c.name and c.name.startswith(("tf.estimator.", "tf.compat.v1.estimator.")) and c.last[:1].isupper():
        return f"makes {c.name}"
    if c.attr == "train" and any(k.arg in ("input_fn", "max_steps", "steps") for k in c.node.keywords):
        return "calls an Estimator's train(input_fn=...)"
    if callee in _TRAINER_CALLS:
        return f"starts a framework trainer ({callee})"
    handed = next((a.id for a in c.node.args if isinstance(a, ast.Name) and a.id in _STEP_FUNCTIONS), None)
    if callee in _STEP_FUNCTIONS or (c.attr == "run" and handed):
        return f"runs the training step {callee if callee in _STEP_FUNCTIONS else handed}"
    if c.attr == "run" and _session_made(s) and any(_is_train_op(a) for a in [*c.node.args[:1], *_fetches(c)]):
        return f"runs {ast.unparse(c.node.args[0]) if c.node.args else 'a train op'} in a TF1 Session"
    if c.attr == "compile" and is_model_compile(c):
        return "compiles a Keras model with a loss or an optimizer"
    return None


def _session_made(s: Script) -> bool:
    return any(c.name is not None and c.name.startswith("tf.") and c.last in _SESSIONS for c in s.calls)


def _fetches(c: Call) -> list[ast.expr]:
    f = c.kw("fetches")
    return [f] if f is not None else []


def _is_train_op(node: ast.expr) -> bool:
    """A fetch that names a train op: `train_op`, `model.opt_op`, or a list or dict holding one."""
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return any(_is_train_op(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return any(_is_train_op(v) for v in node.values if v is not None)
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else None
    return name is not None and bool(_TRAIN_OP.search(name))


@dataclass(slots=True)
class Call(Value):
    """One call: ``name`` its canonical dotted name, when the imports explain it; ``attr`` the method name of
    `obj.method(...)`, whatever obj is; ``alts`` the name under the other star-imported modules, when only star
    imports explain it (Names.star_alternatives)."""

    node: ast.Call
    name: str | None
    attr: str | None
    alts: tuple[str, ...] = ()

    def narrowed(self) -> list[Call]:
        """This call once per name it may have (itself when the imports name it one way)."""
        if not self.alts:
            return [self]
        return [Call(self.node, n, self.attr) for n in (self.name, *self.alts)]

    @property
    def last(self) -> str:
        return (self.name or self.attr or "").rsplit(".", 1)[-1]

    def kw(self, key: str) -> ast.expr | None:
        return next((k.value for k in self.node.keywords if k.arg == key), None)

    def given_seed(self) -> bool:
        """Whether a seeding call is given a seed: `random.seed()` and `numpy.random.seed(None)` take one from
        the OS (os.urandom, else the clock), a new one in every run."""
        args = [*self.node.args, *(k.value for k in self.node.keywords)]
        return bool(args) and not (len(args) == 1 and isinstance(args[0], ast.Constant) and args[0].value is None)


def _element(value: ast.expr, i: int) -> ast.expr:
    """`value[i]`, placed where `value` is (what a tuple target's i-th name is bound to)."""
    index = ast.copy_location(ast.Constant(i), value)
    return ast.copy_location(ast.Subscript(value=value, slice=index, ctx=ast.Load()), value)


def const(node: ast.AST | None) -> Any:
    return node.value if isinstance(node, ast.Constant) else Missing


class Missing:
    """Not a constant (or not given)."""


_ASSIGNS = frozenset({ast.Assign, ast.AnnAssign, ast.AugAssign})
_BINDERS = frozenset({ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})


class Script:
    """One walk over a script: what it calls, sets and assigns, and where."""

    def __init__(
        self, path: str, tree: ast.Module, target: ScriptTarget, peers: Mapping[str, Peer] | None = None
    ) -> None:
        self.path, self.tree, self.target = path, tree, target
        #: The other scripts of the run by module name (envpin.audit.python.audit.peers_of), for imports.
        self.peers: Mapping[str, Peer] = peers or {}
        self._peers_bound: dict[str, Peer] | None = None
        self._bindings: tuple[tuple[str, str, str], ...] = ()
        self._runs: list[Run] | None = None
        self._seeded: dict[str, bool] | None = None
        self._tf_line: int | bool | None = False  # not worked out yet
        #: What a family worked out once for this walk (a script of several runs is read for each).
        self.memo: dict[str, Any] = {}
        self._reason: str | bool | None = False  # not worked out yet
        # one walk; the nodes the rules read, sorted by type (a type test per node, not a chain of isinstance)
        calls: list[ast.Call] = []
        assigns: list[ast.AST] = []
        binders: list[ast.AST] = []  # imports and definitions: what Names reads
        withs: list[ast.With | ast.AsyncWith] = []  # the with blocks (a strategy's scope is one)
        for node in walk(tree):
            kind = type(node)
            if kind is ast.Call:
                calls.append(node)  # type: ignore[arg-type]
            elif kind in _ASSIGNS:
                assigns.append(node)
            elif kind in _BINDERS:
                binders.append(node)
            elif kind is ast.With or kind is ast.AsyncWith:
                withs.append(node)  # type: ignore[arg-type]
        self.names = Names(tree, binders, tf2=(major_minor(target.tf_version) or (0, 0))[0] >= 2)
        self.withs = withs
        self.calls: list[Call] = []
        self.env: list[tuple[int, str, str | None]] = []  # (line, name, value when a constant)
        self.assigned: dict[str, list[ast.expr]] = {}
        self.functions: dict[str, ast.AST] = {}
        self.option_sets: list[int] = []
        self.findings: list[Finding] = []
        resolve = self.names.resolve
        several_stars = len(set(self.names.star)) > 1
        for call in calls:
            func = call.func
            name = resolve(func)
            self.calls.append(
                Call(
                    call,
                    name,
                    func.attr if type(func) is ast.Attribute else None,
                    self.names.star_alternatives(func) if several_stars else (),
                )
            )
            if name is not None and name.startswith(("os.environ.", "os.putenv")):
                self._env_call(call, name)
            elif name is None and type(func) is ast.Attribute and func.attr == "run_line_magic":
                self._env_magic(call)
        for node in assigns:
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    self._assign(t, node.value, node.lineno)
            elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                self._assign(node.target, node.value, node.lineno)
        for node in binders:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[node.name] = node

    def with_peers(self, peers: Mapping[str, Peer]) -> Script:
        """The same walk seen with the other scripts of the run (what its imports reach), without walking again."""
        other = copy.copy(self)
        other.peers, other.findings, other.memo = peers, [], {}
        other._peers_bound, other._bindings, other._reason, other._runs = None, (), False, None
        return other

    def _assign(self, target: ast.expr, value: ast.expr, line: int) -> None:
        if isinstance(target, ast.Name):
            self.assigned.setdefault(target.id, []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            # `a, b = x, y` pairs them; `train, test = datasets()` binds each to that element of the value, an
            # index into it (value[0], value[1]) up to a starred name
            pairs = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
            for i, t in enumerate(target.elts):
                if isinstance(t, ast.Starred) or (pairs and isinstance(value.elts[i], ast.Starred)):  # type: ignore[attr-defined]
                    break
                part = value.elts[i] if pairs else _element(value, i)  # type: ignore[attr-defined]
                self._assign(t, part, line)
        elif isinstance(target, ast.Subscript) and self.names.resolve(target.value) == "os.environ":
            key = const(target.slice)
            if isinstance(key, str):
                self.env.append((line, key, _text(value)))
        elif (
            isinstance(target, ast.Attribute)
            and target.attr in ("deterministic", "experimental_deterministic")
            and const(value) is False
        ):
            self.option_sets.append(line)

    def _env_call(self, node: ast.Call, name: str | None) -> None:
        if name in ("os.environ.setdefault", "os.putenv") and len(node.args) >= 2:
            key = const(node.args[0])
            if isinstance(key, str):
                self.env.append((node.lineno, key, _text(node.args[1])))
        elif name == "os.environ.update":
            for k in node.keywords:
                if k.arg:
                    self.env.append((node.lineno, k.arg, _text(k.value)))
            for arg in node.args:
                if isinstance(arg, ast.Dict):
                    for key, value in zip(arg.keys, arg.values, strict=True):
                        if isinstance(const(key), str):
                            self.env.append((node.lineno, const(key), _text(value)))

    def _env_magic(self, node: ast.Call) -> None:
        """A notebook's `%env NAME=VALUE` (or `%set_env`), as nbconvert exports it to a script:
        get_ipython().run_line_magic('env', 'NAME=VALUE')."""
        owner = node.func.value  # type: ignore[attr-defined]
        if not (
            isinstance(owner, ast.Call)
            and isinstance(owner.func, ast.Name)
            and owner.func.id == "get_ipython"
            and len(node.args) >= 2
            and const(node.args[0]) in ("env", "set_env")
        ):
            return
        line = const(node.args[1])
        if isinstance(line, str):
            text = line.strip()
            key, sep, value = text.partition("=") if "=" in text else text.partition(" ")
            if sep and key.strip():
                self.env.append((node.lineno, key.strip(), value.strip()))

    # --- what the script is and does ----------------------------------------------------------------

    def uses_tf(self) -> bool:
        """Whether the script uses TensorFlow or Keras: itself (tensorpack counts), or through a module of the run
        it imports."""
        return (
            any(v.split(".", 1)[0] in ("tf", "keras") for v in self.names.alias.values())
            or any(s.split(".", 1)[0] in ("tf", "keras") for s in self.names.star)
            or self.names.uses("tensorpack")
            or any(p.uses_tf for p in self._imported_peers().values())
        )

    def is_test(self) -> bool:
        """A test module (test_*.py, *_test.py, or one that imports a test framework): it trains tiny models to
        check code, not to produce weights, so the switch and seed rules do not ask anything of it."""
        name = self.path.replace("\\", "/").rsplit("/", 1)[-1].lower().removesuffix(".envpin-fixed")
        return (
            name.startswith("test_")
            or name.endswith("_test.py")
            or name == "conftest.py"
            or any(self.names.uses(m) for m in ("unittest", "pytest", "absl.testing"))
        )

    def trains(self) -> bool:
        """Whether the script runs training (not only defines layers or loads data, and is not a test)."""
        return self.training_reason() is not None

    def training_reason(self) -> str | None:
        """Why the script is judged to train (the call and its line, which `envpin audit --explain` shows), or
        None: a call of its own that trains, else a call of a name it imports from a module of the run that
        trains."""
        if self._reason is not False:
            return self._reason  # type: ignore[return-value]
        reason = None
        if self.uses_tf() and not self.is_test():
            reason = self.own_training_reason() or self._peer_training_reason()
        self._reason = reason
        return reason

    def own_training_reason(self) -> str | None:
        """The first call of the script itself that trains, in words with its line."""
        for c in self.calls:
            why = _trains_at(self, c)
            if why is not None:
                return f"{why} (line {c.node.lineno})"
        return None

    def _imported_peers(self) -> dict[str, Peer]:
        """The modules of the run this script imports, by the local name each import binds (`from models import
        build`: build; `import trainer`: trainer), relative imports resolved against the script's package."""
        if self._peers_bound is not None:
            return self._peers_bound
        bound: dict[str, Peer] = {}
        names: list[tuple[int, str, str, str]] = []  # (line, local name, path, the name imported from it)
        if self.peers:
            here = module_names(self.path)
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Import):
                    for a in node.names:
                        peer = self.peers.get(a.name)
                        if peer is not None and peer.path != self.path:
                            local = a.asname or a.name.split(".", 1)[0]
                            bound[local] = peer
                            names.append((node.lineno, local, peer.path, ""))
                elif isinstance(node, ast.ImportFrom):
                    bases = [node.module or ""] if not node.level else _relative(here, node.level, node.module)
                    for a in node.names:
                        for base in bases:
                            whole = self.peers.get(f"{base}.{a.name}".strip("."))
                            peer = whole or self.peers.get(base)
                            if peer is not None and peer.path != self.path:
                                bound[a.asname or a.name] = peer
                                names.append((node.lineno, a.asname or a.name, peer.path, "" if whole else a.name))
                                break
        self._peers_bound = bound
        self._bindings = tuple((local, path, name) for _, local, path, name in sorted(names))
        return bound

    def bindings(self) -> tuple[tuple[str, str, str], ...]:
        """What the script's imports bind to scripts of the run, in the order of the imports (Peer.bound)."""
        self._imported_peers()
        return self._bindings

    def imported_paths(self) -> tuple[str, ...]:
        """The paths of the scripts of the run it imports, in the order of its imports (Peer.imports)."""
        return tuple(dict.fromkeys(path for _, path, _ in self.bindings()))

    def runs(self) -> list[Run]:
        """The training runs this script is part of: its own, where it trains and no other training script of
        the run imports it (directly or through another script), and those of the entry scripts that import
        it. A script alone (no other script of the run given) is a run of its own where it trains."""
        if self._runs is not None:
            return self._runs
        by_path = {p.path: p for p in self.peers.values()}
        mine = by_path.get(self.path)
        if mine is not None and mine.walk is not None:  # one of the scripts peers_of worked the runs out for
            self._runs = list(mine.member_of)
            return self._runs
        by_path[self.path] = Peer(
            self.path, self.uses_tf(), None, self.imported_paths(), self.trains(), self.bindings(), self
        )
        self._runs = [r for r in make_runs(by_path) if any(w is self for w in r.scripts)]
        return self._runs

    def anchored_runs(self) -> list[Run]:
        """The runs whose hazards of the whole run are reported in this script (Run.anchor)."""
        return [r for r in self.runs() if r.anchor == self.path]

    def run_seeded(self, key: str, runs: list[Run] | None = None) -> bool:
        """Whether every run this script is part of seeds the generator `key` (tf, python, numpy; Script.seeded)
        somewhere in its scripts (their imports run the module-level seeding before the run draws); the script's
        own seeding where it is in no run."""
        runs = self.runs() if runs is None else runs
        if not runs:
            return self.seeded()[key]
        return all(key in r.seeds for r in runs)

    def _peer_training_reason(self) -> str | None:
        """A call of a name bound from a module of the run that trains (`from trainer import run; run(cfg)`), or
        a training method of what such a name made (`model = models.build(); model.fit(...)`: the model is
        TensorFlow's through the module)."""
        peers = self._imported_peers()
        for c in self.calls:
            root = _root_name(c.node.func)
            peer = peers.get(root) if root is not None else None
            if peer is not None and peer.reason is not None:
                return (
                    f"calls {ast.unparse(c.node.func)} from {peer.path}, which trains: {peer.reason} "
                    f"(line {c.node.lineno})"
                )
        return None

    def first_import_line(self, roots: tuple[str, ...] = ("tf", "keras")) -> int:
        """The line of the script's first import of one of `roots` (canonical), else 1."""
        line = self.tf_import_line(roots)
        return 1 if line is None else line

    def tf_import_line(self, roots: tuple[str, ...] = ("tf", "keras")) -> int | None:
        """The line of the script's first import of one of `roots` (TensorFlow or Keras), None without one."""
        if roots == ("tf", "keras"):
            if self._tf_line is False:
                self._tf_line = self._import_line(roots)
            return self._tf_line
        return self._import_line(roots)

    def _import_line(self, roots: tuple[str, ...]) -> int | None:
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import) and any(canonical(a.name).split(".")[0] in roots for a in node.names):
                return node.lineno
            if isinstance(node, ast.ImportFrom) and node.module and canonical(node.module).split(".")[0] in roots:
                return node.lineno
        return None

    def env_value(self, name: str) -> tuple[int, str | None] | None:
        """Where the script sets `name` in its environment (the last setting) and the value, if constant."""
        found = [(line, value) for line, key, value in self.env if key == name]
        return found[-1] if found else None

    def seeded(self) -> dict[str, bool]:
        """Which global generators the script seeds: tf, python, numpy. A call of a function with 'seed' in its
        name that the imports do not explain (seed_everything(), utils.set_seeds()) counts for all three."""
        if self._seeded is not None:
            return self._seeded
        out = {"tf": False, "python": False, "numpy": False}
        for c in self.calls:
            name, last = c.name or "", c.last
            root = name.split(".", 1)[0]
            if root in ("tf", "keras") and last in ("set_seed", "set_random_seed"):
                out["tf"] = True
                if name.startswith("keras.utils."):
                    out["python"] = out["numpy"] = True
            elif name == "random.seed":
                out["python"] = out["python"] or c.given_seed()
            elif name == "np.random.seed":
                out["numpy"] = out["numpy"] or c.given_seed()
            elif last == "enable_determinism" or (
                "seed" in last.lower() and root not in ("tf", "keras", "np", "random")
            ):
                out = dict.fromkeys(out, True)
        self._seeded = out
        return out

    def keras_major(self) -> int | None:
        """The Keras the script runs: 3 from TensorFlow 2.16 (the recipe's keras3_no_auto_xla step) unless
        tf_keras is selected (TF_USE_LEGACY_KERAS, import tf_keras), else 2; None without a version."""
        records = self.target.records
        if records is None:
            return None
        if not any(st.step == "keras3_no_auto_xla" for st in records.steps):
            return 2
        legacy = self.env_value("TF_USE_LEGACY_KERAS")
        if (
            (legacy and legacy[1] not in ("0", "false", None))
            or self.target.image_env.get("TF_USE_LEGACY_KERAS") not in (None, "0", "false")
            or self.names.uses("tf_keras")
        ):
            return 2
        return 3

    def add(self, rule: Rule, line: int, message: str, fix: str, severity: str | None = None) -> None:
        self.findings.append(finding(rule, self.path, line, message, fix, severity))


def walk(tree: ast.AST) -> list[ast.AST]:
    """Every node, breadth first as ast.walk gives them, but without the expression contexts (Load, Store)
    and without ast.walk's generator per node: a third of the time of a 100k-line script went to ast.walk."""
    out: list[ast.AST] = [tree]
    append, AST = out.append, ast.AST
    i = 0
    while i < len(out):
        node = out[i]
        i += 1
        for name in node._fields:
            if name == "ctx":
                continue
            value = getattr(node, name, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, AST):
                        append(item)
            elif isinstance(value, AST):
                append(value)
    return out


def _text(node: ast.AST) -> str | None:
    """A constant's value as the environment would hold it ('1', 'true'), None when it is computed."""
    value = const(node)
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return str(value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "str" and node.args:
        inner = const(node.args[0])
        return str(inner) if isinstance(inner, (int, str)) else None
    return None


def is_model_compile(c: Call) -> bool:
    """model.compile(...) of Keras, not re.compile: a method of an object the imports do not name, given an
    optimizer or a loss."""
    if c.name is not None:
        return False
    keys = {k.arg for k in c.node.keywords}
    return bool(keys & {"optimizer", "loss", "metrics", "jit_compile"}) or (
        len(c.node.args) >= 1 and not (len(c.node.args) == 1 and isinstance(const(c.node.args[0]), str) and not keys)
    )
