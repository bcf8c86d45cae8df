"""What a name in a script stands for: imports, aliases and star imports resolved to one canonical dotted name,
so a rule fires on what the code calls (`tf.math.unsorted_segment_sum` however it was imported), not on a word.

Canonical roots: `tf` (tensorflow, tensorflow.compat.v2), `keras` (keras, tf.keras, tensorflow.keras, tf_keras,
tensorflow.python.keras), `np` (numpy), and every other module by its own name (`random`, `os`, `time`).
"""

from __future__ import annotations

import ast

#: Module prefixes and the canonical root they stand for, longest first.
_ROOTS: tuple[tuple[str, str], ...] = (
    ("tensorflow.python.keras", "keras"),
    ("tensorflow.compat.v1.keras", "keras"),
    ("tensorflow.compat.v2.keras", "keras"),
    ("tensorflow.keras", "keras"),
    ("tensorflow.compat.v2", "tf"),
    ("tensorflow", "tf"),
    ("tf_keras", "keras"),
    ("keras", "keras"),
    ("numpy", "np"),
)


def canonical(dotted: str) -> str:
    """tensorflow.keras.layers.Dense -> keras.layers.Dense; tensorflow.math.x -> tf.math.x; numpy.random -> np.random.
    A name already under tf. is normalised the same way (tf.keras.layers -> keras.layers)."""
    if dotted == "tf" or dotted.startswith("tf."):
        dotted = "tensorflow" + dotted[2:]
    for prefix, root in _ROOTS:
        if dotted == prefix or dotted.startswith(prefix + "."):
            return root + dotted[len(prefix) :]
    return dotted


#: TensorFlow 2's module aliases of Keras modules: its top-level package sets `tf.losses = keras.losses`, and so for
#: metrics, optimizers and initializers ("Add module aliases" in tensorflow/api_template.__init__.py, TF 2.x;
#: `_KerasLazyLoader(..., submodule="losses")` in the TF 2.16+ one). TensorFlow 1's modules of these names are its
#: own (tf.losses.sparse_softmax_cross_entropy), so the aliases are resolved only for a TensorFlow 2 target.
TF2_KERAS_ALIASES = ("losses", "metrics", "optimizers", "initializers")

#: Star imports from these roots are resolved (what `from tensorflow.keras.layers import *` brings in).
_STAR_ROOTS = ("tf", "keras", "np", "random", "os", "time")
#: Standard-library modules whose names the rules read (os.environ, random.seed, time.time, ...).
_STDLIB = frozenset({"os", "random", "time", "datetime", "uuid", "secrets"})


class Names:
    """The script's imports: local name -> canonical dotted name, and the modules star-imported."""

    def __init__(self, tree: ast.Module, nodes: list[ast.AST] | None = None, tf2: bool = False) -> None:
        """`nodes`: the tree's imports and definitions (in ast.walk order), when the caller has walked it
        already; module-level assignments are read from the tree's body. `tf2`: the script runs TensorFlow 2, where
        tf.losses, tf.metrics, tf.optimizers and tf.initializers are Keras' modules (TF2_KERAS_ALIASES)."""
        self.tf2 = tf2
        self.alias: dict[str, str] = {}
        self.star: list[str] = []
        #: Names the script binds itself (def, class, assignment): a star import does not reach them.
        self.local: set[str] = set()
        #: Every module the script imports (canonical), for "does it use Horovod / tf_keras".
        self.modules: set[str] = set()
        for node in ast.walk(tree) if nodes is None else nodes:
            if isinstance(node, ast.Import):
                self._import(node)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                self._import_from(node.module, node.names)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.local.add(node.name)
        self._module_level(tree)

    def _import(self, node: ast.Import) -> None:
        """`import a.b` binds a (the first import of it wins), `import a.b as c` binds c to a.b."""
        for a in node.names:
            self.modules.add(a.name)
            if a.asname:
                self.alias[a.asname] = canonical(a.name)
            else:
                top = a.name.split(".", 1)[0]
                self.alias.setdefault(top, canonical(top))

    def _import_from(self, module: str, names: list[ast.alias]) -> None:
        """`from module import x [as y]` binds y to module.x; a star import of a root the rules read is kept."""
        self.modules.add(module)
        base = canonical(module)
        for a in names:
            if a.name == "*":
                if base.split(".", 1)[0] in _STAR_ROOTS:
                    self.star.append(base)
            else:
                self.alias[a.asname or a.name] = f"{base}.{a.name}"

    def _module_level(self, tree: ast.Module) -> None:
        """The names the module level assigns: local to the script, and an alias where bound once to a name."""
        bound: dict[str, list[ast.expr]] = {}
        for node in tree.body:
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name):
                        self.local.add(t.id)
                        bound.setdefault(t.id, []).append(node.value)
        # `keras = tf.keras`, `layers = keras.layers`: a module-level name bound once to a TensorFlow, Keras or
        # NumPy name stands for it as an import would (resolved in the order the script binds them)
        for name, values in bound.items():
            if len(values) == 1 and type(values[0]) in (ast.Attribute, ast.Name) and name not in self.alias:
                meant = self.resolve(values[0])
                if meant is not None and meant.split(".", 1)[0] in ("tf", "keras", "np"):
                    self.alias[name] = meant

    def resolve(self, node: ast.AST) -> str | None:
        """The canonical dotted name an expression names (`tf.nn.relu`, `Dense`), or None (a call result, a
        subscript, a name the imports do not explain)."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        base = self.alias.get(node.id)
        if base is None:
            if self.star and node.id not in self.local:
                base = f"{self.star[-1]}.{node.id}"
            elif node.id in _STDLIB and node.id not in self.local:
                base = node.id  # used without its import (an import further down, or one --fix adds): still it
            else:
                return None
        name = canonical(".".join([base, *reversed(parts)]))
        if self.tf2 and name.startswith("tf.") and name.split(".", 2)[1] in TF2_KERAS_ALIASES:
            return "keras." + name[3:]  # tf.losses.SparseCategoricalCrossentropy is keras.losses' on TF 2
        return name

    def star_alternatives(self, node: ast.AST) -> tuple[str, ...]:
        """For a name only star imports explain (`Dense(...)`, `MaxPooling2D.x`) while several modules were
        star-imported (`from keras.layers import *` then `from keras.models import *`): the name under each
        earlier one. resolve() names it under the last; Python binds it from the last that exports it, which the
        script does not show, so a rule asks whether any of them is what it looks for."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or len(set(self.star)) < 2 or node.id in self.alias or node.id in self.local:
            return ()
        rest = ".".join([node.id, *reversed(parts)])
        return tuple(
            dict.fromkeys(canonical(f"{base}.{rest}") for base in reversed(self.star[:-1]) if base != self.star[-1])
        )

    def uses(self, package: str) -> bool:
        """Whether the script imports `package` or one of its modules."""
        return any(m == package or m.startswith(package + ".") for m in self.modules)
