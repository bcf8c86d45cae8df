"""Seeding Python's ``random``, NumPy and TensorFlow: the one place that knows how each TensorFlow, 1.12 to
2.21, takes a seed (standard library only, Python 3.6+).

The runtime helper (`envpin.enable_determinism`, a recipe's seeding steps), the run hook of `envpin study`,
`cost` and `bisect` (ENVPIN_SEED, in the user's own Python, which finds this module in envpin.pyz beside the
hook), the golden training run and the self-test all seed through `seed`, so a TensorFlow that one of them
can seed, all of them can.

TensorFlow's global seed has had three homes: ``tf.random.set_seed`` (2.x), ``tf.compat.v1.set_random_seed``
(1.13 to 1.15) and ``tf.set_random_seed`` (every 1.x; 1.12, NGC 19.01's TensorFlow, has ``tf.compat`` but no
``tf.compat.v1``). In TF 1.x graph mode the seed belongs to the default graph: seed inside ``graph.as_default()``
for a graph of your own. ``tf.keras.utils.set_random_seed`` (2.7 and later) seeds all three at once and, in
Keras 3, Keras's own seed generator; a recipe asks for it as its own step.
"""

import sys

TYPE_CHECKING = False  # typing's without importing it; annotations naming its types are quoted (3.6 evaluates them)
if TYPE_CHECKING:
    from types import ModuleType
    from typing import List, Optional, Sequence, Tuple

#: Every seeding step, by the names the recipe table (envpin/data/recipes.json) gives them, in the order `seed`
#: applies them.
STEPS = ("seed_python", "seed_numpy", "seed_tf", "keras_set_random_seed")
#: What a training script that seeds itself does: Python, NumPy and TensorFlow's global seed.
EVERYTHING = ("seed_python", "seed_numpy", "seed_tf")


def seed(
    value: "Optional[int]", tf: "Optional[ModuleType]" = None, steps: "Sequence[str]" = EVERYTHING
) -> "Tuple[List[str], List[str]]":
    """Seed what `steps` name (a subset of STEPS, applied in STEPS' order) with `value`; `tf` is the imported
    tensorflow module (default: the one this process imported, if any). A `value` of None clears TensorFlow's
    global seed and reseeds Python and NumPy from the operating system (what a script that forgot its seed
    gets); Keras's step needs a number.

    Returns the steps applied and, for each step left out, "step: why" (NumPy not installed, TensorFlow not
    imported, a Keras without set_random_seed). A TensorFlow that takes no seed in any known way raises
    AttributeError: it is not one this module knows."""
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        raise ValueError("unknown seeding step %r (known: %s)" % (unknown[0], ", ".join(STEPS)))
    if tf is None:
        tf = sys.modules.get("tensorflow")
    applied: "List[str]" = []
    skipped: "List[str]" = []
    for step in STEPS:
        if step not in steps:
            continue
        why = _apply(step, value, tf)
        if why is None:
            applied.append(step)
        else:
            skipped.append("%s: %s" % (step, why))
    return applied, skipped


def _apply(step: str, value: "Optional[int]", tf: "Optional[ModuleType]") -> "Optional[str]":
    """One step; None when done, else why it was left out."""
    if step == "seed_python":
        import random  # here, not at the top: `envpin audit` loads the runtime helper and never seeds

        random.seed(value)
        return None
    if step == "seed_numpy":
        try:
            import numpy
        except ImportError:
            return "NumPy is not installed"
        numpy.random.seed(value)
        return None
    if tf is None:
        return "TensorFlow is not imported"
    if step == "seed_tf":
        _tf_seed(tf, value)
        return None
    setter = getattr(getattr(getattr(tf, "keras", None), "utils", None), "set_random_seed", None)
    if setter is None:
        return "this TensorFlow's Keras has no utils.set_random_seed (TensorFlow 2.7 and later)"
    setter(value)
    return None


def _tf_seed(tf: "ModuleType", value: "Optional[int]") -> None:
    """TensorFlow's global seed (in TF 1.x graph mode, the default graph's); None clears it."""
    set_seed = getattr(getattr(tf, "random", None), "set_seed", None)
    if set_seed is not None:  # TF 2.x
        set_seed(value)
        return
    v1 = getattr(getattr(tf, "compat", None), "v1", None)  # 1.13 to 1.15; 1.12 has tf.compat without v1
    setter = getattr(v1, "set_random_seed", None) or tf.set_random_seed
    setter(value)
