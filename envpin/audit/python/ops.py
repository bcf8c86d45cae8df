"""Ops that raise or stay nondeterministic under determinism, as the recipe table lists them for the script's
TensorFlow: py-op-raises, py-op-nondeterministic.

Which ops, on which versions, under which names, with which escape hatches and conditions, and which library
APIs run them inside (`built_on`), are read from the recipe table (envpin.knowledge.recipes) through
envpin.audit.python.table: this module holds no list of ops. Neither rule has a mechanical fix: replacing an
op changes the model.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from envpin.audit import facts
from envpin.audit.python.names import canonical
from envpin.audit.python.refs import HEAD, SCRIPTS, STATUS, TABLE
from envpin.audit.python.script import Call, Script, const, is_model_compile
from envpin.audit.python.table import (
    Entry,
    apis_of,
    built_on,
    condition,
    holds,
    layer_calls,
    matches,
    meetable,
    only,
    short,
    tf_range,
)
from envpin.audit.rule import Rule
from envpin.knowledge import recipes
from envpin.knowledge.recipes import Recipe
from envpin.portable.versions import major_minor

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from envpin.audit.python.edits import Fix, Startup
    from envpin.knowledge.recipebook import BuiltOn
    from envpin.knowledge.reciperecords import OpEntry

PY_OP_RAISES = Rule(
    id="py-op-raises",
    severity="error",
    title="An op the script calls raises under determinism on this TensorFlow",
    finds="A call of a TensorFlow op or a Keras class that the recipe table lists as raising once determinism is "
    "on, for the TensorFlow version the script runs on (`tf.math.unsorted_segment_sum` on 2.5-2.6, "
    "`tf.nn.sparse_softmax_cross_entropy_with_logits` on 2.6, `tf.image.crop_and_resize` from 2.6, Keras "
    "`DepthwiseConv2D` on 2.7-2.9, ...), or a Keras/TF1 API the table says is built on one (Keras' sparse "
    "categorical cross-entropy on 2.6). Names are resolved through imports and aliases. The message names "
    "the exception and the version range; the fix, the first version that no longer raises and the "
    "work-around and escape hatch the table gives (`TF_DISABLE_SEGMENT_REDUCTION_OP_DETERMINISM_EXCEPTIONS` "
    "for segment sums). Where the table says the op raises only under a condition a script cannot show "
    '(`tf.linalg.svd` from 2.11: one-column matrices), the finding says "only when ..." and is a warning.',
    why="With determinism enabled TensorFlow refuses ops that have no deterministic GPU kernel on that version: "
    "training stops with UnimplementedError (or another exception) at the first step that runs the op. "
    "Use a TensorFlow version where the op is deterministic, replace the op, or take the recipe's escape hatch.",
    bad=HEAD + "def pool(data, ids, n):\n    return tf.math.unsorted_segment_sum(data, ids, num_segments=n)\n",
    good=HEAD + "def pool(data, ids, n):\n    return tf.matmul(tf.one_hot(ids, n), data, transpose_a=True)\n",
    autofix="Comments the line with the version range and the escape hatch; replacing an op is a change of the "
    "model, left to you.",
    references=(STATUS, TABLE, SCRIPTS),
    language="python",
    example_tf="2.5",
)


PY_OP_NONDETERMINISTIC = Rule(
    id="py-op-nondeterministic",
    severity="warning",
    title="An op the script calls stays nondeterministic on this TensorFlow",
    finds="A call of a TensorFlow op that the recipe table lists as nondeterministic even with determinism on, "
    "for the script's TensorFlow version (segment sums and `tf.gather` gradients before 2.5, "
    "`tf.nn.softmax_cross_entropy_with_logits` before 2.6, `tf.math.bincount` with weights on CPU, ...); "
    "and an op that would raise, where the script or the image sets the entry's escape hatch "
    "(`TF_DISABLE_SEGMENT_REDUCTION_OP_DETERMINISM_EXCEPTIONS=1`), which turns the exception off.",
    why="These ops give different results from run to run without any error: the determinism switch does not "
    "cover them on this version. Move to a version where they are deterministic or replace the op.",
    bad=HEAD + "def loss(labels, logits):\n    return tf.nn.softmax_cross_entropy_with_logits(labels, logits)\n",
    good=HEAD + "def loss(labels, logits):\n    return -tf.reduce_sum(labels * tf.nn.log_softmax(logits), -1)\n",
    autofix="Comments the line.",
    references=(STATUS, TABLE, SCRIPTS),
    language="python",
    example_tf="2.4",
)


RULES: tuple[Rule, ...] = (PY_OP_RAISES, PY_OP_NONDETERMINISTIC)


def _condition_holds(s: Script, c: Call, item: OpEntry) -> bool:
    """The entry's conditions on the call, as the table states them (OpEntry.arguments: a seed not given, weights
    given, interpolation left at 'nearest'), on the arguments of the layer the call makes (OpEntry.layer_call:
    a BatchNormalization called with training=False), and the patches that take it away (unless_called)."""
    if item.arguments and not holds(c.node, item.arguments):
        return False
    if item.unless_called and _patched(s, item.unless_called):
        return False
    return not item.layer_call or any(holds(call, item.layer_call) for call in layer_calls(s, c.node))


def _patched(s: Script, patches: tuple[str, ...]) -> bool:
    """Whether the script calls one of `patches` (dotted names, however the script imported them)."""
    wanted = {canonical(p) for p in patches}
    return any(c.name in wanted for c in s.calls)


#: id(entry) -> (the entry, its way out); the entry is kept so that its id is not reused while it is here.
_HATCHES: dict[int, tuple[OpEntry, str]] = {}
#: Entries kept at most (a run meets a few dozen; a library caller judging many versions would add more).
_HATCHES_KEPT = 4096


def _hatch(item: OpEntry, recipe: Recipe) -> str:
    """The way out of an entry, worked out once per run (a script may call the op often; the records of a
    recipe are the same objects for every script, envpin.audit.facts)."""
    kept = _HATCHES.get(id(item))
    if kept is None:
        if len(_HATCHES) >= _HATCHES_KEPT:
            _HATCHES.clear()
        kept = _HATCHES[id(item)] = (item, _way_out(item, recipe))
    return kept[1]


def _way_out(item: OpEntry, recipe: Recipe) -> str:
    """The way out the table gives: the version that no longer raises, and the entry's escape hatch (the
    setting that turns the exception off, with its source)."""
    parts = []
    hi = major_minor(item.tf_max)
    if hi is not None:
        major, minor = hi
        mine = set(apis_of(item))
        later = [
            e
            for e in recipes.book().raises
            if set(apis_of(e)) & mine
            and (major_minor(e.tf_min) or (0, 0)) > hi  # an open start: from the first version on
            and e.build_condition is None
            and e.platform in (None, "linux")
        ]
        if not later:
            parts.append(f"TensorFlow {major}.{minor + 1} and later do not raise here")
    work = item.work_around
    if work:
        parts.append(f"{work.text} ({recipe.source_url(work.source)})")
    hatch = item.escape_hatch
    if hatch:
        parts.append(f"escape hatch: {hatch.name}={hatch.value} {hatch.effect} ({recipe.source_url(hatch.source)})")
    return "; ".join(parts) or "replace the op or run it outside the determinism scope"


def check_ops(s: Script) -> None:
    recipe = s.target.recipe
    if recipe is None:
        return
    keras, records = s.keras_major(), facts.records(recipe)
    raises, silent = meetable(records.raises, keras), meetable(records.silent, keras)
    all_apis = [a for e in raises + silent for a in e.apis]
    compat = {a.rsplit(".", 1)[-1] for a in all_apis if "compat.v1" in a}
    plain = {a.rsplit(".", 1)[-1] for a in all_apis if "compat.v1" not in a}
    split = frozenset(compat & plain)
    # the last name component each entry can match: a call is compared with those entries only
    lasts = {a.rsplit(".", 1)[-1] for a in all_apis}
    wanted = {last for last in lasts if not last.endswith("*")}
    prefixes = tuple(last[:-1] for last in lasts if last.endswith("*"))
    version = s.target.tf_version
    for c, shown, built_when in _uses(s, keras):
        last = c.name.rsplit(".", 1)[-1] if c.name else ""
        if last not in wanted and not (prefixes and last.startswith(prefixes)):
            continue
        for item, when in _applying(s, c, raises, split, built_when):
            hatch = _hatch_set(s, item)
            if hatch:  # the exception is turned off: the op runs its nondeterministic kernel instead
                s.add(
                    PY_OP_NONDETERMINISTIC,
                    c.node.lineno,
                    f"{shown} would raise {item.exception} under determinism on TensorFlow {version}, but "
                    f"{hatch} turns the exception off: it runs nondeterministically{only(when)} "
                    f"({short(item.op, last)}; the table lists {tf_range(item)}, {item.devices})",
                    _hatch(item, recipe),
                    severity="info" if when else None,
                )
                continue
            s.add(
                PY_OP_RAISES,
                c.node.lineno,
                f"{shown} raises {item.exception} under determinism on TensorFlow {version}{only(when)} "
                f"({short(item.op, last)}; the table lists {tf_range(item)}, {item.devices})",
                _hatch(item, recipe),
                severity="warning" if when else None,
            )
        for item, when in _applying(s, c, silent, split, built_when):
            s.add(
                PY_OP_NONDETERMINISTIC,
                c.node.lineno,
                f"{shown} stays nondeterministic on TensorFlow {version} even with determinism on"
                f"{only(when)} ({short(item.op, last)}, {tf_range(item)}): {item.why}",
                "use a TensorFlow version where the op is deterministic, or replace it",
                severity="info" if when else None,
            )


def _hatch_set(s: Script, item: OpEntry) -> str | None:
    """Where the entry's escape hatch is set to its value (the script's environment, else the image's), if it is."""
    hatch = item.escape_hatch
    if not hatch:
        return None
    mine = s.env_value(hatch.name)
    value = mine[1] if mine else s.target.image_env.get(hatch.name)
    accepted = {hatch.value.lower()} | ({"true"} if hatch.value == "1" else set())  # a bool
    if value is None or value.strip().lower() not in accepted:
        return None
    return f"{hatch.name}={value} (" + (f"line {mine[0]})" if mine else "set in the image)")


def _applying(
    s: Script, c: Call, entries: list[Entry], split: frozenset[str], built_when: str | None = None
) -> Iterator[tuple[OpEntry, str | None]]:
    """(table item, the condition the script leaves open, else None) of each entry, outside XLA, that the call `c`
    is an API of and whose condition the call does not rule out; `built_when`: the condition under which the
    library API called runs the entry's op (BuiltOn.condition), when the call does not show it."""
    for e in entries:
        if not e.xla and any(matches(c, a, split) for a in e.apis) and _condition_holds(s, c, e.item):
            yield e.item, condition(s, e.item, c) or built_when


def _uses(s: Script, keras: int | None) -> Iterator[tuple[Call, str, str | None]]:
    """Each call of a TensorFlow or Keras name, as the name the table's entries are matched against (a library
    function the table says is built on a listed op counts as that op, for the Keras it names), the words the
    message shows, and the condition under which the library function runs the op, unless the call shows it
    (BuiltOn.condition, .arguments); a loss named by string in compile() counts as a call of keras.losses.<name>
    (Keras resolves it so) on compile's line."""
    built = built_on(keras)

    def when(b: BuiltOn, node: ast.Call | None) -> str | None:
        if b.condition is None or (node is not None and b.arguments and holds(node, b.arguments)):
            return None
        return b.condition

    for c in (n for call in s.calls for n in call.narrowed()):
        if c.name and c.name.startswith(("tf.", "keras.")):
            b = built.get(c.name)
            if b is None:
                yield c, c.name, None
            else:
                yield Call(c.node, b.calls, c.attr), f"{c.name} (built on {b.calls})", when(b, c.node)
        elif c.attr == "compile" and is_model_compile(c):
            loss = const(c.kw("loss"))
            b = built.get(f"keras.losses.{loss}") if isinstance(loss, str) else None
            if b is not None:
                yield Call(c.node, b.calls, c.attr), f"compile(loss={loss!r}) (built on {b.calls})", when(b, None)


CHECKS = (check_ops,)
FIXES: dict[str, Fix] = {}
FOLLOW_UPS: dict[str, Fix] = {}
STARTUP: dict[str, Startup] = {}
