"""The recipe table's entries as a script's calls meet them: which entries a script can meet at a call, whether a
call is of an entry's API, and the words a finding quotes from an entry (its op, its versions, the condition
the script cannot show). The families that judge calls against the table read it through here: ops (what
raises or stays nondeterministic), seeding (unseeded random ops), data (random ops in a parallel map) and xla.

Which ops raise or stay nondeterministic, on which versions, under which names (`apis`), with which conditions,
is read from the recipe table (envpin.knowledge.recipes): this module holds no list of ops.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from envpin.audit.python.names import canonical
from envpin.audit.python.script import Call, Script
from envpin.knowledge import recipes
from envpin.portable.versions import major_minor
from envpin.record import Value

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from envpin.knowledge.recipebook import BuiltOn
    from envpin.knowledge.reciperecords import Note, OpEntry


@dataclass(frozen=True, slots=True)
class Entry(Value):
    """A table entry as calls meet it: ``apis`` its canonical names (envpin.audit.python.names), as a script's
    calls are resolved; ``xla`` whether it is about XLA compilation (judged by the jit rules, not per call)."""

    item: OpEntry
    apis: tuple[str, ...]
    xla: bool


def apis_of(item: OpEntry | Note) -> tuple[str, ...]:
    """The Python names an op entry (or a common caveat) is about, canonical (envpin.audit.python.names)."""
    return tuple(dict.fromkeys(canonical(a) for a in item.apis))


def meetable(items: tuple[OpEntry, ...], keras: int | None = None, context: str | None = None) -> list[Entry]:
    """The entries a script can meet at a call: not those for another platform than Linux (images are Linux), nor
    those for a Keras major version other than the script's (`keras`: 2 or 3, None when unknown), nor those that
    depend on how TensorFlow was built; only those of `context` (the table's), none of another context."""
    out = []
    for item in items:
        if item.build_condition is not None or item.platform not in (None, "linux"):
            continue  # a condition on how TensorFlow was built or where it runs: nothing in a script tells
        if item.context != context or (keras is not None and not _keras_in(item, keras)):
            continue
        out.append(Entry(item, apis_of(item), item.xla))
    return out


def _keras_in(item: OpEntry, major: int) -> bool:
    """Whether the entry's Keras range (MAJOR.MINOR bounds, either open) admits Keras `major`."""
    lo, hi = major_minor(item.keras_min), major_minor(item.keras_max)
    return not ((lo is not None and lo[0] > major) or (hi is not None and hi[0] < major))


def built_on(keras: int | None) -> dict[str, BuiltOn]:
    """The table's library APIs built on an op entry's API (`built_on`), by canonical name, for the script's Keras
    (`keras`: 2 or 3, None when unknown: every one)."""
    return {canonical(a): b for b in recipes.book().built_on if keras is None or _admits(b, keras) for a in b.apis}


def _admits(b: BuiltOn, major: int) -> bool:
    lo, hi = major_minor(b.keras_min), major_minor(b.keras_max)
    return not ((lo is not None and lo[0] > major) or (hi is not None and hi[0] < major))


def matches(c: Call, api: str, compat_split: frozenset[str]) -> bool:
    """Whether a call is of a (canonical) API of the table. TensorFlow exports an op under several modules
    (tf.unsorted_segment_sum, tf.math..., tf.compat.v1...), so tf. names match on their last component, raw_ops
    only raw_ops, tf.sparse only tf.sparse, and compat.v1 only compat.v1 where both spellings are listed apart;
    Keras names match on the class and the kind of module (keras.layers.experimental.preprocessing.RandomFlip is
    a layer)."""
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
    if (".sparse." in api) != (".sparse." in name):  # tf.sparse.bincount is not tf.math.bincount
        return False
    return not (last in compat_split and ("compat.v1" in api) != ("compat.v1" in name))


def short(op: str, called: str = "") -> str:
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


def tf_range(item: OpEntry) -> str:
    lo, hi = item.tf_min, item.tf_max
    return f"TF {lo}-{hi}" if hi and hi != lo else (f"TF {lo}" if hi else f"TF {lo} and later")


#: Calls that make a trainable variable: a gradient flows into what they return.
_VARIABLES = frozenset({"Variable", "get_variable", "add_weight"})


def condition(s: Script, item: OpEntry, c: Call) -> str | None:
    """The condition a script cannot show under which the entry holds for this call: the entry's own, or the
    one it gives for the API called (tf.gather: only when a gradient flows into the gathered tensor), unless the
    script shows it holds (the first argument is a variable it made)."""
    if item.condition is not None:
        return item.condition
    apis = item.apis
    split = frozenset(
        {a.rsplit(".", 1)[-1] for a in apis if "compat.v1" in a}
        & {a.rsplit(".", 1)[-1] for a in apis if "compat.v1" not in a}
    )
    for api, text in item.api_conditions.items():
        if matches(c, canonical(api), split):
            first = c.node.args[0] if c.node.args else c.kw("params")
            made = s.assigned.get(first.id, []) if isinstance(first, ast.Name) else []
            if any(
                isinstance(v, ast.Call) and (s.names.resolve(v.func) or "").rsplit(".", 1)[-1] in _VARIABLES
                for v in made
            ):
                return None
            return text
    return None


def only(condition: str | None) -> str:
    return f" only when {condition} (the script does not show whether it does)" if condition else ""


def argument(node: ast.Call, name: str, position: int | None = None) -> ast.expr | None:
    """The expression a call passes as argument `name` (by keyword, or at `position` among its positional
    arguments), None when it leaves it out."""
    given = next((k.value for k in node.keywords if k.arg == name), None)
    if (
        given is None
        and position is not None
        and len(node.args) > position
        and not any(isinstance(a, ast.Starred) for a in node.args[: position + 1])
    ):
        given = node.args[position]
    return given


def holds(node: ast.Call, conditions: dict[str, dict[str, object]]) -> bool:
    """Whether a call meets the table's conditions on its arguments (OpEntry.arguments, BuiltOn.arguments): each
    named argument given or left out (`given`), or its constant value, its `default` when left out, one of `in`.
    An argument the script computes may be anything: it is taken to meet its condition."""
    for name, cond in conditions.items():
        position = cond.get("position")
        value = argument(node, name, position if isinstance(position, int) else None)
        if "given" in cond and (value is not None) is not cond["given"]:
            return False
        if "in" in cond:
            if value is None:
                got: object = cond.get("default")
            elif isinstance(value, ast.Constant):
                got = value.value
            else:
                continue  # computed: it may have any value
            allowed = cond["in"]
            if not any(got == v and type(got) is type(v) for v in allowed):  # type: ignore[attr-defined]
                return False
    return True


def layer_calls(s: Script, made: ast.Call) -> list[ast.Call]:
    """The calls of the layer a constructor call makes: `Layer(...)(x, ...)`, and through the name or attribute it
    is assigned to (`bn = Layer()` then `bn(x, ...)`; `self.bn = Layer()` then `self.bn(x, ...)`)."""
    names: set[str] = set()
    attrs: set[str] = set()
    for node in ast.walk(s.tree):
        if isinstance(node, ast.Assign) and node.value is made:
            for t in node.targets:
                if isinstance(t, ast.Name):
                    names.add(t.id)
                elif isinstance(t, ast.Attribute):
                    attrs.add(t.attr)
    out = []
    for c in s.calls:
        f = c.node.func
        if (
            f is made
            or (isinstance(f, ast.Name) and f.id in names)
            or (isinstance(f, ast.Attribute) and f.attr in attrs)
        ):
            out.append(c.node)
    return out
