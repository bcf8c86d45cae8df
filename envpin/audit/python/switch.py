"""The determinism switch: turned on where the script trains (py-determinism-switch-missing), and only one its
TensorFlow has (py-determinism-switch-unavailable). Whether determinism is on (determinism_on) is read by the
seeding and data families too.

The fix inserts the recipe's switch in the start-up block (envpin.audit.python.edits.Fixing.startup):
`enable_op_determinism()` after the TensorFlow import where the recipe has that step, else the environment
variables before TensorFlow is imported.
"""

from __future__ import annotations

from envpin.audit import facts
from envpin.audit.check import Finding
from envpin.audit.python.refs import FWR, HEAD, SCRIPTS, TABLE
from envpin.audit.python.script import Run, Script
from envpin.audit.rule import Rule
from envpin.errors import param
from envpin.knowledge import recipes
from envpin.knowledge.recipes import Recipe
from envpin.portable.versions import major_minor

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from envpin.audit.python.edits import Fix, Fixing, Startup

_SEEDED = (
    "import tensorflow as tf\n\ntf.keras.utils.set_random_seed(0)\ntf.config.experimental.enable_op_determinism()\n"
)
_ENABLE = (
    "tf.config.experimental.enable_op_determinism",
    "https://www.tensorflow.org/api_docs/python/tf/config/experimental/enable_op_determinism",
)


PY_SWITCH_MISSING = Rule(
    id="py-determinism-switch-missing",
    severity="warning",
    title="The training script turns no determinism switch on",
    finds="A script that trains (Keras `fit`/`compile`, `GradientTape`, `minimize`, an Estimator, a Session) "
    "where neither the script nor the image (a Dockerfile audited in the same run, or the lock) turns on "
    "the switch the recipe has for its TensorFlow: `tf.config.experimental.enable_op_determinism()` "
    "from 2.8, `TF_DETERMINISTIC_OPS=1` from 2.1 (and in NGC TF1), `TF_CUDNN_DETERMINISTIC=1` on stock "
    "1.14-2.0. `TF_CUDNN_DETERMINISTIC` on 2.1 and later is read but covers cuDNN only: it is no switch "
    "there, and the message says so. Scripts audited together are judged as runs: a script that trains and that "
    "no other training script imports is a run's entry, and the scripts it imports (directly or through each "
    "other) are part of its run. A switch anywhere in the run counts for it, and the finding is reported once, "
    "at the entry's TensorFlow or Keras import (where the entry imports neither: the first script of the run, "
    "in the order of the imports, that does); a module of the run gets none of its own.",
    why="Without the switch cuDNN picks convolution algorithms by timing and many GPU kernels accumulate with "
    "atomics: two runs of the same script give different weights.",
    bad=HEAD + "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\nmodel.compile(loss='mse')\n"
    "model.fit(tf.zeros((8, 4)), tf.zeros((8, 1)))\n",
    good=_SEEDED + "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\nmodel.compile(loss='mse')\n"
    "model.fit(tf.zeros((8, 4)), tf.zeros((8, 1)))\n",
    autofix="Inserts the recipe's switch after the script's imports (`enable_op_determinism()` from TF 2.8, "
    "else `os.environ['TF_DETERMINISTIC_OPS'] = '1'` before TensorFlow is imported). Safe: the switch "
    "only makes ops deterministic or makes them raise, which `py-op-raises` reports first.",
    references=(_ENABLE, FWR, SCRIPTS),
    fixable=True,
    language="python",
    example_tf="2.8",
)


PY_SWITCH_UNAVAILABLE = Rule(
    id="py-determinism-switch-unavailable",
    severity="error",
    title="The script uses a determinism switch its TensorFlow does not have",
    finds="`enable_op_determinism()` on TensorFlow before 2.8 (an AttributeError), or a determinism variable "
    "(`TF_DETERMINISTIC_OPS`, `TF_CUDNN_DETERMINISTIC`) set in `os.environ` that the recipe for the "
    "version does not list, so TensorFlow does not read it (`TF_DETERMINISTIC_OPS` before 2.1 on stock "
    "builds; `TF_CUDNN_DETERMINISTIC` before 1.14: from 1.14 on it is read, for cuDNN only).",
    why="The switch either crashes the script or does nothing, and training runs nondeterministically. Use the "
    "switch the recipe names for the version (envpin recipe --tf X.Y).",
    bad=HEAD + "tf.random.set_seed(0)\ntf.config.experimental.enable_op_determinism()\n",
    good="import os\n\nos.environ['TF_DETERMINISTIC_OPS'] = '1'\nimport tensorflow as tf\n\ntf.random.set_seed(0)\n",
    autofix="Comments the line with the switch for the version.",
    references=(_ENABLE, TABLE, SCRIPTS),
    language="python",
    example_tf="2.5",
)


RULES: tuple[Rule, ...] = (PY_SWITCH_MISSING, PY_SWITCH_UNAVAILABLE)


def _switch_env(recipe: Recipe | None) -> set[str]:
    """The determinism variables the recipe sets (TF_DETERMINISTIC_OPS, TF_CUDNN_DETERMINISTIC)."""
    return {e.name for e in facts.records(recipe).env if "DETERMINISTIC" in e.name} if recipe else set()


def _has_step(recipe: Recipe, step: str) -> bool:
    """Whether the recipe has the Python step `step` (enable_op_determinism: the switch from TF 2.8)."""
    return any(st.step == step for st in facts.records(recipe).steps)


def _truthy(value: str | None) -> bool:
    return value is None or value.strip().lower() in ("1", "true", "yes")


def switch_name(recipe: Recipe) -> str | None:
    if _has_step(recipe, "enable_op_determinism"):
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
    has_step = _has_step(recipe, "enable_op_determinism")
    return _switch_env(recipe) | ({"TF_DETERMINISTIC_OPS"} if has_step else set())


def determinism_on(s: Script, usable: bool = False) -> bool:
    """Whether the script or the image turns on the switch the script's recipe has (with no recipe: any switch).
    A variable the recipe does not use is no switch for it (TF_CUDNN_DETERMINISTIC on 2.1+: cuDNN only); with
    `usable`, neither is an enable_op_determinism() the version lacks (py-determinism-switch-unavailable)."""
    recipe, image = s.target.recipe, s.target.image_env
    lacks = usable and recipe is not None and not _has_step(recipe, "enable_op_determinism")
    calls = ("enable_determinism",) if lacks else ("enable_op_determinism", "enable_determinism")
    on = (
        any(c.last in calls for c in s.calls)
        or any(_truthy(v) for _, key, v in _env_switches(s) if recipe is None or key in _readable(recipe))
        or any(_truthy(image.get(n)) for n in _switch_env(recipe) if n in image)
    )
    if recipe is None and s.target.tf_version is None:
        on = on or any(n in image for n in ("TF_DETERMINISTIC_OPS", "TF_CUDNN_DETERMINISTIC"))
    return on


def _switched(s: Script) -> bool:
    """determinism_on, once per walk (a module of many runs is asked for each)."""
    if "switched" not in s.memo:
        s.memo["switched"] = determinism_on(s)
    return bool(s.memo["switched"])


def check_switch(s: Script) -> None:
    recipe, version = s.target.recipe, s.target.tf_version
    enables = [c for c in s.calls if c.last == "enable_op_determinism"]
    env_switches = _env_switches(s)
    if recipe is not None:
        has_step = _has_step(recipe, "enable_op_determinism")
        wanted = switch_name(recipe) or "none exists"
        if not has_step:
            for c in enables:
                s.add(
                    PY_SWITCH_UNAVAILABLE,
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
                    PY_SWITCH_UNAVAILABLE,
                    line,
                    f"TensorFlow {version} does not read {key} (recipe {recipe.id} does not list it)",
                    f"use the switch of recipe {recipe.id}: {wanted}",
                )
    runs = [r for r in s.anchored_runs() if not any(_switched(w) for w in r.scripts)]
    if not runs:
        return  # no run of its own, its run turns the switch on, or another script of the run reports it
    if recipe is not None and switch_name(recipe) is None:
        return  # no switch exists for this version: nothing to turn on
    where = f" for TensorFlow {version} ({s.target.label})" if version else ""
    if recipe is not None:
        fix = f"add {switch_name(recipe)} before training ({param('fix', command='audit')} inserts it)"
    elif version:  # a version the table has no recipe for: asking for --tf again would not help
        fix = (
            f"no recipe of envpin's table covers TensorFlow {version}: turn on the determinism switch that version has"
        )
    else:
        fix = (
            f"turn on the switch of your TensorFlow's recipe ({param('tf', command='recipe')} X.Y); "
            f"give {param('tf')} to judge it"
        )
    partial = next((line for line, key, v in env_switches if key == "TF_CUDNN_DETERMINISTIC" and _truthy(v)), None)
    aside = (
        f" (TF_CUDNN_DETERMINISTIC, line {partial}, only makes cuDNN convolution and pooling deterministic)"
        if partial is not None
        else ""
    )
    for run in runs:
        s.add(
            PY_SWITCH_MISSING,
            run.line,
            f"{run_words(s, run)} trains but turns no determinism switch on{where}{aside}, and the image does "
            "not either",
            fix,
        )


def run_words(s: Script, run: Run) -> str:
    """Who trains, in a finding of the whole run: the script, or the run of its entry (several scripts)."""
    if len(run.scripts) == 1:
        return "the script"
    others = ", ".join(w.path for w in run.scripts if w.path != s.path)
    return (
        f"the run of this script and the ones it imports ({others})"
        if run.entry == s.path
        else f"the run of {run.entry} (this script is the first of it to import TensorFlow or Keras)"
    )


def _cudnn_switch_read(version: str | None) -> bool:
    """Whether TensorFlow `version` reads TF_CUDNN_DETERMINISTIC: from the first version a recipe of the table sets
    it for (1.14) on. Later versions keep reading it, for cuDNN only (TensorFlow's own notes in
    tensorflow/python/kernel_tests/nn_ops/cudnn_deterministic_base.py: deprecated, "only makes ops using cuDNN
    deterministic"), which is why the recipes from 2.1 set TF_DETERMINISTIC_OPS instead."""
    firsts = [
        mm
        for row in recipes.book().rows
        if any(e.name == "TF_CUDNN_DETERMINISTIC" for e in row.env) and (mm := major_minor(row.tf_min)) is not None
    ]
    mine = major_minor(version)
    return mine is not None and bool(firsts) and mine >= min(firsts)


CHECKS = (check_switch,)


def _insert_switch(fix: Fixing, f: Finding) -> bool:
    """py-determinism-switch-missing: the start-up block, with the switch in it."""
    return fix.startup()


def _switch_lines(recipe: Recipe, version: str, tf: str) -> tuple[list[str], list[str], str] | None:
    """The switch's part of the start-up block: enable_op_determinism() after the import where the recipe has
    that step, else its determinism variables set before TensorFlow is imported; None when it has no switch."""
    name = switch_name(recipe)
    if name is None:
        return None
    if _has_step(recipe, "enable_op_determinism"):
        return [], [f"{tf}.config.experimental.enable_op_determinism()"], f"inserted the determinism switch ({name})"
    env = sorted(e.name for e in facts.records(recipe).env if "DETERMINISTIC" in e.name)
    before = ["import os", *(f'os.environ["{n}"] = "1"' for n in env)]
    return before, [], f"inserted the determinism switch ({name})"


FIXES: dict[str, Fix] = {PY_SWITCH_MISSING.id: _insert_switch}
FOLLOW_UPS: dict[str, Fix] = {}
STARTUP: dict[str, Startup] = {PY_SWITCH_MISSING.id: _switch_lines}
