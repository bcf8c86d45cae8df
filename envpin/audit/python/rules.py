"""The rules for Python training scripts: one Rule record per hazard (the checks are in checks.py).

The facts of which op raises or stays nondeterministic on which TensorFlow are not here: they are read from the
recipe table (envpin/data/recipes.json) through envpin.knowledge.recipes at run time.
"""

from __future__ import annotations

from envpin.audit.rule import Rule

_HEAD = "import tensorflow as tf\n\n"
_SEEDED = (
    "import tensorflow as tf\n\ntf.keras.utils.set_random_seed(0)\ntf.config.experimental.enable_op_determinism()\n"
)
_FWR = (
    "NVIDIA/framework-reproducibility: TensorFlow determinism",
    "https://github.com/NVIDIA/framework-reproducibility/blob/master/doc/d9m/tensorflow.md",
)
_STATUS = (
    "NVIDIA/framework-reproducibility: TensorFlow determinism status",
    "https://github.com/NVIDIA/framework-reproducibility/blob/master/doc/d9m/tensorflow_status.md",
)
_ENABLE = (
    "tf.config.experimental.enable_op_determinism",
    "https://www.tensorflow.org/api_docs/python/tf/config/experimental/enable_op_determinism",
)
_TABLE = (
    "The recipe table (envpin/data/recipes.json)",
    "https://github.com/envpin/envpin/blob/main/envpin/data/recipes.json",
)
_SCRIPTS = ("Python training scripts", "#python-training-scripts")

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
    bad=_HEAD + "def pool(data, ids, n):\n    return tf.math.unsorted_segment_sum(data, ids, num_segments=n)\n",
    good=_HEAD + "def pool(data, ids, n):\n    return tf.matmul(tf.one_hot(ids, n), data, transpose_a=True)\n",
    autofix="Comments the line with the version range and the escape hatch; replacing an op is a change of the "
    "model, left to you.",
    references=(_STATUS, _TABLE, _SCRIPTS),
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
    bad=_HEAD + "def loss(labels, logits):\n    return tf.nn.softmax_cross_entropy_with_logits(labels, logits)\n",
    good=_HEAD + "def loss(labels, logits):\n    return -tf.reduce_sum(labels * tf.nn.log_softmax(logits), -1)\n",
    autofix="Comments the line.",
    references=(_STATUS, _TABLE, _SCRIPTS),
    language="python",
    example_tf="2.4",
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
    "there, and the message says so.",
    why="Without the switch cuDNN picks convolution algorithms by timing and many GPU kernels accumulate with "
    "atomics: two runs of the same script give different weights.",
    bad=_HEAD + "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\nmodel.compile(loss='mse')\n"
    "model.fit(tf.zeros((8, 4)), tf.zeros((8, 1)))\n",
    good=_SEEDED + "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\nmodel.compile(loss='mse')\n"
    "model.fit(tf.zeros((8, 4)), tf.zeros((8, 1)))\n",
    autofix="Inserts the recipe's switch after the script's imports (`enable_op_determinism()` from TF 2.8, "
    "else `os.environ['TF_DETERMINISTIC_OPS'] = '1'` before TensorFlow is imported). Safe: the switch "
    "only makes ops deterministic or makes them raise, which `py-op-raises` reports first.",
    references=(_ENABLE, _FWR, _SCRIPTS),
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
    bad=_HEAD + "tf.random.set_seed(0)\ntf.config.experimental.enable_op_determinism()\n",
    good="import os\n\nos.environ['TF_DETERMINISTIC_OPS'] = '1'\nimport tensorflow as tf\n\ntf.random.set_seed(0)\n",
    autofix="Comments the line with the switch for the version.",
    references=(_ENABLE, _TABLE, _SCRIPTS),
    language="python",
    example_tf="2.5",
)

PY_NO_GLOBAL_SEED = Rule(
    id="py-no-global-seed",
    severity="warning",
    title="The training script sets no global TensorFlow seed",
    finds="A script that trains but never calls `tf.random.set_seed`, `tf.compat.v1.set_random_seed` / "
    "`tf.set_random_seed`, or `keras.utils.set_random_seed`; and a script that turns determinism on (itself "
    "or its image) without a global seed and calls a random op the recipe table lists as raising then "
    "(`tf.random.uniform` without a `seed` from TF 2.7).",
    why="Initializers, Dropout and shuffles without a seed draw from a fresh random state in every run, so the "
    "weights differ from the first step; from TF 2.7 such ops even raise RuntimeError under determinism (the "
    "finding is then an error and names the first unseeded op or layer the recipe table lists).",
    bad=_HEAD + "model = tf.keras.Sequential([tf.keras.layers.Dense(1), tf.keras.layers.Dropout(0.5)])\n"
    "model.compile(loss='mse')\n",
    good=_HEAD + "tf.keras.utils.set_random_seed(0)\n"
    "model = tf.keras.Sequential([tf.keras.layers.Dense(1), tf.keras.layers.Dropout(0.5)])\n"
    "model.compile(loss='mse')\n",
    autofix="Inserts the global seeding after the imports (`tf.keras.utils.set_random_seed(0)` from TF 2.7, "
    "else `random.seed(0)`, `numpy.random.seed(0)` and TensorFlow's global seed). Safe: seeding only fixes "
    "what was random.",
    references=(
        ("tf.random.set_seed", "https://www.tensorflow.org/api_docs/python/tf/random/set_seed"),
        _FWR,
        _SCRIPTS,
    ),
    fixable=True,
    language="python",
)

PY_UNSEEDED_RANDOM = Rule(
    id="py-unseeded-random",
    severity="warning",
    title="Python's or NumPy's global random generator is used without a seed",
    finds="In a script that trains: calls of `random.*` or `numpy.random.*` (shuffle, choice, randint, ...) with "
    "no `random.seed` / `numpy.random.seed` (or `keras.utils.set_random_seed`) anywhere in the script; "
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
    references=(("Python: random.seed", "https://docs.python.org/3/library/random.html#random.seed"), _FWR, _SCRIPTS),
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
    bad=_HEAD + "import time\n\ntf.random.set_seed(int(time.time()))\n",
    good=_HEAD + "tf.random.set_seed(1234)\n",
    autofix="Comments the line.",
    references=(_FWR, _SCRIPTS),
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
        _SCRIPTS,
    ),
    language="python",
)

PY_DATA_NONDETERMINISTIC = Rule(
    id="py-data-nondeterministic",
    severity="warning",
    title="tf.data is asked for nondeterministic order",
    finds="`deterministic=False` given to a call (`Dataset.map`, `interleave`, `batch`, ...), "
    "`options.deterministic = False` or `options.experimental_deterministic = False`, and "
    "`parallel_interleave(..., sloppy=True)`.",
    why="The pipeline then hands out elements in the order they finish, which changes from run to run, and "
    "so does the order of training batches. Where the recipe table says op determinism overrides the request "
    "(TF 2.7 and later) and the script or its image turns determinism on, the order is kept and only speed is "
    "lost: the finding is then info.",
    bad=_HEAD + "ds = tf.data.Dataset.range(8).map(lambda x: x + 1, num_parallel_calls=4, deterministic=False)\n",
    good=_HEAD + "ds = tf.data.Dataset.range(8).map(lambda x: x + 1, num_parallel_calls=4)\n",
    autofix="Removes `deterministic=False` from the call (the default order is the deterministic one); option "
    "assignments and `sloppy=True` are commented. Costs some input-pipeline throughput.",
    references=(
        ("tf.data.Options.deterministic", "https://www.tensorflow.org/api_docs/python/tf/data/Options#deterministic"),
        _FWR,
        _SCRIPTS,
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
    bad=_HEAD + "def augment(x):\n    return tf.image.random_flip_left_right(x)\n\n"
    "ds = tf.data.Dataset.from_tensors(tf.zeros((4, 4, 3))).map(augment, num_parallel_calls=8)\n",
    good=_HEAD + "def augment(x):\n    return tf.image.stateless_random_flip_left_right(x, seed=(1, 2))\n\n"
    "ds = tf.data.Dataset.from_tensors(tf.zeros((4, 4, 3))).map(augment, num_parallel_calls=8)\n",
    autofix="Comments the line.",
    references=(
        _FWR,
        ("tf.random: stateless random numbers", "https://www.tensorflow.org/guide/random_numbers#stateless_rngs"),
        _SCRIPTS,
    ),
    language="python",
)

PY_FIT_MULTIPROCESSING = Rule(
    id="py-fit-multiprocessing",
    severity="warning",
    title="Keras fit/evaluate with several worker processes",
    finds="`fit`, `fit_generator`, `evaluate` or `predict` with `use_multiprocessing=True` and `workers` other "
    "than 1 (or not given as a constant).",
    why="Worker processes fill the batch queue in the order they finish, so batches reach the model in a "
    "different order in every run (and each worker's random state is its own). Use workers=1, or a "
    "tf.data pipeline.",
    bad=_HEAD + "def train(model, seq):\n    model.fit(seq, epochs=2, workers=8, use_multiprocessing=True)\n",
    good=_HEAD + "def train(model, seq):\n    model.fit(seq, epochs=2)\n",
    autofix="Comments the line.",
    references=(
        ("Keras Sequence (use_multiprocessing)", "https://www.tensorflow.org/api_docs/python/tf/keras/utils/Sequence"),
        _SCRIPTS,
    ),
    language="python",
)

PY_KERAS3_AUTO_XLA = Rule(
    id="py-keras3-auto-xla",
    severity="error",
    title="Keras 3 compiles a model with MaxPooling through XLA",
    finds="On a TensorFlow for which the recipe table lists Keras 3's automatic XLA compilation as raising "
    "(TF 2.16-2.19, which allow Keras 3.0-3.6), a script that uses a layer the entry names (MaxPooling) and "
    "calls `compile()` without `jit_compile=False`. Scripts on `tf_keras` (`TF_USE_LEGACY_KERAS`, "
    "`import tf_keras`) are not Keras 3.",
    why="Keras 3 before 3.7 compiles with XLA by default (jit_compile='auto') and XLA's MaxPool gradient has no "
    "deterministic GPU implementation: the first training step raises. Pass jit_compile=False.",
    bad=_HEAD + "model = tf.keras.Sequential([tf.keras.layers.MaxPooling2D(), tf.keras.layers.Flatten()])\n"
    "model.compile(optimizer='adam', loss='mse')\n",
    good=_HEAD + "model = tf.keras.Sequential([tf.keras.layers.MaxPooling2D(), tf.keras.layers.Flatten()])\n"
    "model.compile(optimizer='adam', loss='mse', jit_compile=False)\n",
    autofix="Adds `jit_compile=False` to the `compile()` call (the other arguments and lines stay as they are). "
    "Safe: the model runs as without XLA, possibly slower.",
    references=(
        ("TensorFlow issue 69417", "https://github.com/tensorflow/tensorflow/issues/69417"),
        ("Keras PR 20315", "https://github.com/keras-team/keras/pull/20315"),
        _SCRIPTS,
    ),
    fixable=True,
    language="python",
    example_tf="2.16",
)

PY_JIT_COMPILE = Rule(
    id="py-jit-compile",
    severity="warning",
    title="The script turns XLA compilation on",
    finds="`jit_compile=True` (`compile()`, `tf.function`), `experimental_compile=True`, "
    "`tf.config.optimizer.set_jit(True)`, and `TF_XLA_FLAGS` with `--tf_xla_auto_jit` set in `os.environ`. "
    "An error when the script also uses an op whose XLA gradient raises on its TensorFlow (MaxPool from "
    "2.8: Keras MaxPooling layers, `tf.nn.max_pool1d`/`max_pool2d`; a warning for `tf.nn.max_pool`, "
    "which raises only on rank-3/4 inputs).",
    why="XLA's kernels are not covered by TensorFlow's determinism before 2.8 (Scatter, reductions before "
    "2.2), and from 2.8 some of them raise instead (MaxPool's gradient).",
    bad=_HEAD + "@tf.function(jit_compile=True)\ndef step(x):\n    return x * 2\n",
    good=_HEAD + "@tf.function\ndef step(x):\n    return x * 2\n",
    autofix="Comments the line (XLA was asked for on purpose); where it is Keras 3's `compile(jit_compile=True)` "
    "that `--fix` turns to `jit_compile=False` for py-keras3-auto-xla, that fixes this finding too.",
    references=(_FWR, _STATUS, _SCRIPTS),
    language="python",
    example_tf="2.8",
)

PY_ENV_UNSET = Rule(
    id="py-env-must-not-be-set",
    severity="error",
    title="The script sets an environment variable the recipe says must not be set",
    finds='`os.environ` (or `os.putenv`) setting a variable the recipe table lists under "unset" '
    "(`TF_CUDNN_USE_AUTOTUNE`).",
    why="Setting TF_CUDNN_USE_AUTOTUNE at all, even to 0, together with the determinism switch thwarts the "
    "deterministic cuDNN algorithm selection. Remove the line.",
    bad="import os\n\nos.environ['TF_CUDNN_USE_AUTOTUNE'] = '0'\n",
    good="import os\n\nos.environ['TF_DETERMINISTIC_OPS'] = '1'\n",
    autofix="Comments the line.",
    references=(("TensorFlow PR 24747", "https://github.com/tensorflow/tensorflow/pull/24747"), _SCRIPTS),
    language="python",
)

PY_ENV_NO_EFFECT = Rule(
    id="py-env-no-effect",
    severity="warning",
    title="The script sets an environment variable TensorFlow never reads",
    finds="`os.environ` setting a variable the recipe table lists as having no effect (the misspelt "
    "`TF_USE_CUDNN_AUTOTUNE`).",
    why="TensorFlow never reads the name, so the line does nothing but suggest it does; the name it does read, "
    "TF_CUDNN_USE_AUTOTUNE, must not be set either. Remove the line.",
    bad="import os\n\nos.environ['TF_USE_CUDNN_AUTOTUNE'] = '0'\n",
    good="import os\n\nos.environ['TF_DETERMINISTIC_OPS'] = '1'\n",
    autofix="Comments the line.",
    references=(
        (
            "TensorFlow source: use_cudnn.cc",
            "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/util/use_cudnn.cc",
        ),
        _SCRIPTS,
    ),
    language="python",
)

PY_HOROVOD_FUSION = Rule(
    id="py-horovod-fusion",
    severity="warning",
    title="Horovod is used but HOROVOD_FUSION_THRESHOLD is not 0",
    finds="A script that imports Horovod where neither the script (`os.environ`) nor the image (a Dockerfile "
    "audited in the same run, or the lock) sets `HOROVOD_FUSION_THRESHOLD` to the recipe's `0`.",
    why="Horovod's Tensor Fusion batches allreduces in an order that can vary from run to run. Set "
    "HOROVOD_FUSION_THRESHOLD=0 in the image (or before hvd.init()).",
    bad="import horovod.tensorflow.keras as hvd\n\nhvd.init()\n",
    good="import os\n\nos.environ['HOROVOD_FUSION_THRESHOLD'] = '0'\nimport horovod.tensorflow.keras as hvd\n\n"
    "hvd.init()\n",
    autofix="Comments the import.",
    references=(
        _FWR,
        ("Horovod: Tensor Fusion", "https://horovod.readthedocs.io/en/stable/tensor-fusion_include.html"),
        _SCRIPTS,
    ),
    language="python",
)

RULES: tuple[Rule, ...] = (
    PY_OP_RAISES,
    PY_OP_NONDETERMINISTIC,
    PY_SWITCH_MISSING,
    PY_SWITCH_UNAVAILABLE,
    PY_NO_GLOBAL_SEED,
    PY_UNSEEDED_RANDOM,
    PY_SEED_FROM_CLOCK,
    PY_HASHSEED_RUNTIME,
    PY_DATA_NONDETERMINISTIC,
    PY_DATA_RANDOM_MAP,
    PY_FIT_MULTIPROCESSING,
    PY_KERAS3_AUTO_XLA,
    PY_JIT_COMPILE,
    PY_ENV_UNSET,
    PY_ENV_NO_EFFECT,
    PY_HOROVOD_FUSION,
)
#: The family has no Dockerfile checks: envpin.audit.python.checks runs these rules over scripts.
CHECKS: tuple[object, ...] = ()
RUN_RULES: tuple[type, ...] = ()
