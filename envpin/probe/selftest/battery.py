"""The battery itself, run inside a fresh child process with determinism already set up."""

import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from envpin.probe import tfchild
from envpin.probe.runtime import load_table, ngc_release
from envpin.probe.selftest.compare import compare_outputs, finish_check, pack
from envpin.probe.selftest.expect import SILENT, SILENT_COMPARISONS, expected, surprise
from envpin.probe.selftest.ops import select
from envpin.probe.selftest.trial import Check, Trial

# A trial = fresh upstream gradients; within a trial the op runs at least `runs` times on identical inputs
# and every run is compared with the trial's first (NVIDIA's tests: 5 trials x 2 runs). Cheap checks then
# keep running until the check has used `budget` seconds (at most `max_runs` per trial): some kernels
# differ only now and then (measured here: weighted Bincount on CPU in 2 to 35 of 50 runs), and a few
# dozen runs catch those where 2 would not. Full: 3 x >= 2 runs; --quick: 1 x >= 2 runs, short budget.
TYPE_CHECKING = False  # typing's TypedDict is 3.8+: only its type checker sees it
if TYPE_CHECKING:
    from typing import TypedDict  # novermin (type checking only)

    class Plan(TypedDict):
        """How hard the battery tries: trials per check, runs per trial (at least; more within `budget`
        seconds, up to `max_runs`)."""

        trials: int
        runs: int
        budget: float
        max_runs: int


FULL: "Plan" = {"trials": 3, "runs": 2, "budget": 0.25, "max_runs": 40}
QUICK: "Plan" = {"trials": 1, "runs": 2, "budget": 0.05, "max_runs": 10}


class Evaluator(object):
    """Runs a check's tensors to NumPy: directly in eager mode (TF2); in a fresh graph and Session per run
    in graph mode (TF1 1.15: written against the TF1 API, untested here)."""

    def __init__(self, tf: Any, np: Any, eager: bool) -> None:
        self.tf, self.np, self.eager = tf, np, eager

    def _is_dataset(self, obj: Any) -> bool:
        return isinstance(obj, self.tf.data.Dataset)

    def __call__(self, compute: Callable[[], List[Any]]) -> List[Dict[str, Any]]:
        np = self.np
        if self.eager:
            outs = []
            for o in compute():
                if self._is_dataset(o):
                    outs.append(np.asarray([tfchild.to_numpy(e) for e in o]))
                else:
                    outs.append(tfchild.to_numpy(o))
            return [pack(np.asarray(o)) for o in outs]
        tf = self.tf
        v1 = tf.compat.v1
        graph = tf.Graph()
        with graph.as_default():
            built = compute()
            with v1.Session(graph=graph) as sess:
                outs = []
                for o in built:
                    if self._is_dataset(o):
                        nxt = v1.data.make_one_shot_iterator(o).get_next()
                        items = []
                        while True:
                            try:
                                items.append(sess.run(nxt))
                            except tf.errors.OutOfRangeError:
                                break
                        outs.append(np.asarray(items))
                    else:
                        outs.append(np.asarray(sess.run(o)))
        return [pack(o) for o in outs]


def run_check(
    check: Check,
    tf: Any,
    np: Any,
    evaluate: Evaluator,
    determinism: bool,
    trials: int,
    runs: int,
    budget: float = 0.0,
    max_runs: int = 0,
    until_differs: int = 0,
) -> Dict[str, Any]:
    """Run one check in `trials` trials of at least `runs` runs (more while within `budget` seconds, up to
    `max_runs` per trial) and compare every run with its trial's first run, bitwise. `until_differs`: keep
    comparing, up to that many comparisons in all, until one differs (a check the recipe table lists as
    nondeterministic here: its nondeterminism must get the chance to show, however loaded the machine)."""
    started = time.time()
    comparisons: List[Dict[str, Any]] = []
    done = 0
    per_trial = -(-until_differs // trials) if until_differs else 0
    shown = False
    try:
        for trial in range(trials):
            compute = check.build(Trial(tf, np, evaluate.eager, check.name, trial, determinism))
            first = evaluate(compute)
            done += 1
            n = 1
            deadline = started + budget * (trial + 1) / trials
            while n < runs or (n < max_runs and time.time() < deadline) or (not shown and n <= per_trial):
                found = compare_outputs(first, evaluate(compute))
                comparisons.append(found)
                shown = shown or bool(found["differing_elements"] or found["notes"])
                done += 1
                n += 1
    except Exception as exc:  # an op without a deterministic kernel must not stop the battery
        return finish_check(
            check.name,
            check.op,
            comparisons,
            time.time() - started,
            exc=(type(exc).__name__, str(exc)),
            determinism=determinism,
            runs=done,
        )
    return finish_check(check.name, check.op, comparisons, time.time() - started, determinism=determinism, runs=done)


def battery(
    determinism: bool = True, quick: bool = False, names: Optional[Sequence[str]] = None, rounds: int = 1
) -> Dict[str, Any]:
    """The battery in this process (which must be fresh, with the environment prepared by the parent)."""
    try:
        tf, info = tfchild.import_tensorflow(determinism)
    except Exception as exc:
        return {"skipped": "TensorFlow cannot be imported: %s: %s" % (type(exc).__name__, exc)}
    import numpy as np

    plan = QUICK if quick else FULL
    eager = tfchild.is_eager(tf)
    evaluate = Evaluator(tf, np, eager)
    version = getattr(tf, "__version__", None)
    table = load_table() if determinism else None
    gpu = bool(_gpus(tf))
    checks = []
    ngc = ngc_release()
    for _ in range(rounds):
        for check in select(names, quick):
            # Before the check, without Keras's version (importing it is the Keras checks' own cost): entries
            # with a Keras range then do not count here, and the final expectation below reads them.
            listed = (
                table is not None
                and expected(check.name, version, gpu, table, None, ngc_release())["verdict"] == SILENT
            )
            checks.append(
                run_check(
                    check,
                    tf,
                    np,
                    evaluate,
                    determinism,
                    plan["trials"],
                    plan["runs"],
                    plan["budget"],
                    plan["max_runs"],
                    SILENT_COMPARISONS if listed else 0,
                )
            )
    keras = keras_version(tf)  # after the checks: the Keras ones have imported it by now
    if table is not None:
        for result in checks:
            result["expected"] = expected(result["name"], version, gpu, table, keras, ngc)
            note = surprise(result)
            if note:
                result["surprise"] = note
    return {
        "tf_version": getattr(tf, "__version__", "unknown"),
        "keras_version": keras,
        "build": "ngc %s" % ngc if ngc else "stock",
        "numpy_version": np.__version__,
        "python": tfchild.python_info(),
        "eager": eager,
        "device": "gpu" if gpu else "cpu",
        "determinism": info,
        "trials": plan["trials"],
        "runs_per_trial": plan["runs"],
        "checks": checks,
    }


def _gpus(tf: Any) -> List[Any]:
    """The GPUs TensorFlow sees (the expectations of GPU-only entries apply only there)."""
    config = getattr(tf, "config", None)
    lister = getattr(config, "list_physical_devices", None) or getattr(
        getattr(config, "experimental", None), "list_physical_devices", None
    )
    return list(lister("GPU")) if lister is not None else []


def keras_version(tf: Any) -> Optional[str]:
    """The Keras tf.keras is (2.x up to TF 2.15, Keras 3 from 2.16 unless TF_USE_LEGACY_KERAS), or None."""
    try:  # the package tf.keras's layers come from: keras, tf_keras, or TensorFlow's own copy (before 2.6)
        package = tf.keras.layers.Dropout.__module__.split(".")[0]
        version = getattr(sys.modules.get(package), "__version__", None)
    except Exception:  # no tf.keras, or Keras fails to import: entries with a Keras range then do not apply
        return None
    return str(version) if version else None
