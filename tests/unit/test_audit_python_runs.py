"""Scripts audited together as training runs, and the names and layers the script rules resolve (the defects the
held-out corpus cases showed, docs/audit.md "How well it finds"): a hazard of the whole run reported once, at the
entry script; NumPy's global generator in a module the training script imports; the first draw by line; unseeded
shuffles in a tuple a function returns and in a function of another script of the run; keras.applications models
built on MaxPooling; TF 2's tf.losses alias; Keras 3's compile(jit_compile=True) reported once. Through the CLI
in-process; each case was missed or reported wrongly before."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Result

Found = set[tuple[str, int, str]]


def audit(cli, folder: Path, tf: str, *args: str) -> tuple[Result, Found]:  # type: ignore[no-untyped-def]
    """The audit of `folder` (as a whole) against TensorFlow `tf`: the result and (file, line, rule) of each finding,
    the file relative to the folder."""
    res = cli("audit", ".", "--tf", tf, "--fail-on", "info", "--format", "json", *args, cwd=folder)
    found = {
        (Path(f["file"]).as_posix().removeprefix("./"), f["line"], f["rule"])
        for f in json.loads(res.stdout)["findings"]
    }
    return res, found


def write(folder: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text, encoding="utf-8")
    return folder


RUN = ("py-determinism-switch-missing", "py-no-global-seed")

#: An Estimator package: the entry builds the Estimator, a module holds the model_fn (which builds the optimizer:
#: it trains by itself), another the input, which draws from NumPy's global generator.
ESTIMATOR = {
    "train.py": "import argparse\n\nimport tensorflow as tf\n\n"
    "from model.data import input_fn\nfrom model.net import model_fn\n\n"
    "est = tf.estimator.Estimator(model_fn=model_fn)\nest.train(input_fn=input_fn, max_steps=10)\n",
    "model/__init__.py": "",
    "model/net.py": "import tensorflow as tf\n\n\ndef model_fn(features, labels, mode):\n"
    "    loss = tf.reduce_mean(tf.layers.dense(features, 1))\n"
    "    op = tf.train.AdamOptimizer(0.1).minimize(loss)\n"
    "    return tf.estimator.EstimatorSpec(mode, loss=loss, train_op=op)\n",
    "model/data.py": "import numpy as np\nimport tensorflow as tf\n\n\ndef input_fn():\n"
    "    x = np.random.rand(8, 2).astype('float32')\n    return tf.data.Dataset.from_tensors(x)\n",
}


def test_the_runs_switch_and_seed_once_at_the_entry_not_in_the_module_that_builds_the_optimizer(
    cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    _, found = audit(cli, write(tmp_path, ESTIMATOR), "1.15")
    assert {(f, r) for f, _, r in found if r in RUN} == {("train.py", r) for r in RUN}, found
    assert {("train.py", 3, r) for r in RUN} <= found  # the entry's TensorFlow import
    # the data module's draw is the run's, which seeds NumPy nowhere
    assert ("model/data.py", 6, "py-unseeded-random") in found, found


def test_a_seed_and_a_switch_anywhere_in_the_run_count_for_it(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    files = dict(ESTIMATOR)
    files["model/net.py"] = (
        "import os\n\nos.environ['TF_CUDNN_DETERMINISTIC'] = '1'\nimport numpy as np\nimport tensorflow as tf\n\n"
        "tf.set_random_seed(0)\nnp.random.seed(0)\n" + files["model/net.py"].split("\n", 1)[1]
    )
    _, found = audit(cli, write(tmp_path, files), "1.15")
    assert not {r for _, _, r in found} & {*RUN, "py-unseeded-random"}, found


def test_an_entry_that_imports_no_tensorflow_gets_the_runs_findings_at_the_runs_first_keras_import(
    cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    files = {
        "run.py": "import pandas as pd\n\nfrom nets.unet import build\nfrom feed.gen import batches\n\n"
        "model = build()\nmodel.fit(batches(pd.read_csv('t.csv')), epochs=2)\n",
        "nets/__init__.py": "",
        "nets/unet.py": '"""The model."""\nfrom keras import models\nfrom keras.layers import Dense\n\n\n'
        "def build():\n    m = models.Sequential([Dense(1)])\n"
        "    m.compile(optimizer='adam', loss='mse')\n    return m\n",
        "feed/__init__.py": "",
        "feed/gen.py": "import numpy as np\n\n\ndef batches(table):\n    while True:\n"
        "        yield np.random.choice(table['x'], size=4), None\n",
    }
    _, found = audit(cli, write(tmp_path, files), "2.8")
    assert {(f, n, r) for f, n, r in found if r in RUN} == {("nets/unet.py", 2, r) for r in RUN}, found
    assert ("feed/gen.py", 6, "py-unseeded-random") in found
    # --fix inserts the switch and the seeding there, and the fixed run has neither finding left (nor the draw:
    # Keras' set_random_seed seeds NumPy too)
    res, left = audit(cli, tmp_path, "2.8", "--fix")
    assert res.code == 0 and not {r for _, _, r in left} & {*RUN, "py-unseeded-random"}, left
    assert "enable_op_determinism()" in (tmp_path / "nets/unet.py.envpin-fixed").read_text()


def test_the_first_draw_of_numpys_global_generator_by_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    text = (
        "import numpy as np\nimport tensorflow as tf\n\n\ndef gen():\n"
        "    image = np.random.random_sample((4, 4)).astype(np.float32)\n    label = np.random.randint(0, 9)\n"
        "    yield image, label\n\n\nmodel = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
        "model.compile(loss='mse')\n"
        "model.fit(tf.data.Dataset.from_generator(gen, output_types=(tf.float32, tf.int32)))\n"
    )
    _, found = audit(cli, write(tmp_path, {"train.py": text}), "2.5")
    assert {(n, r) for _, n, r in found if r == "py-unseeded-random"} == {(6, "py-unseeded-random")}, found


MIRRORED = (
    "import tensorflow as tf\n\nstrategy = tf.distribute.MirroredStrategy()\n\n\ndef datasets():\n"
    "    train = tf.data.Dataset.range(100).shuffle(100).batch(8)\n"
    "    test = tf.data.Dataset.range(10).shuffle(10).batch(8)\n    return train, test\n\n\n"
    "with strategy.scope():\n    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n"
    "    model.compile(loss='mse', optimizer='sgd')\ntrain_ds, test_ds = datasets()\nmodel.fit(train_ds)\n"
)


def test_an_unseeded_shuffle_in_the_element_of_a_returned_tuple_given_to_fit(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, found = audit(cli, write(tmp_path, {"train.py": MIRRORED}), "2.10")
    # the training set's shuffle; the test set's reaches no fit()
    assert {n for _, n, r in found if r == "py-dist-unseeded-shuffle"} == {7}, found
    res, _ = audit(cli, tmp_path, "2.10", "--fix")
    assert "shuffle(100, seed=0)" in (tmp_path / "train.py.envpin-fixed").read_text(), res.stdout


def test_an_unseeded_shuffle_in_a_function_of_another_module_of_the_run(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    files = {
        "setup_data.py": "import tensorflow as tf\n\n\ndef dataset(batch):\n"
        "    return tf.data.Dataset.range(100).shuffle(100).repeat().batch(batch)\n\n\n"
        "def plain(batch):\n    return tf.data.Dataset.range(10).shuffle(10).batch(batch)\n",
        "worker.py": "import tensorflow as tf\n\nimport setup_data\nfrom setup_data import dataset as make\n\n"
        "strategy = tf.distribute.MultiWorkerMirroredStrategy()\nds = make(64)\nwith strategy.scope():\n"
        "    model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\n    model.compile(loss='mse', optimizer='sgd')\n"
        "model.fit(ds, epochs=1, steps_per_epoch=5)\nextra = setup_data.plain(4)\n",
    }
    _, found = audit(cli, write(tmp_path, files), "2.10")
    assert {(f, n) for f, n, r in found if r == "py-dist-unseeded-shuffle"} == {("setup_data.py", 5)}, found
    assert {(f, n) for f, n, r in found if r in RUN} == {("worker.py", 1)}


KERAS3 = (
    "import keras\n\nkeras.utils.set_random_seed(1)\nimport tensorflow as tf\n\n"
    "tf.config.experimental.enable_op_determinism()\n"
)


def test_a_keras_application_built_on_maxpooling_makes_keras_3_compile_raise(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    body = "model = keras.applications.{}(weights=None, classes=10)\nmodel.compile(optimizer='adam', loss='mse')\n"
    _, found = audit(cli, write(tmp_path, {"train.py": KERAS3 + body.format("ResNet50")}), "2.16")
    assert ("train.py", 8, "py-keras3-auto-xla") in found, found
    # MobileNetV2 has no MaxPooling2D layer (only GlobalMaxPooling2D, with pooling='max'): nothing to say
    _, clean = audit(cli, write(tmp_path, {"train.py": KERAS3 + body.format("MobileNetV2")}), "2.16")
    assert not {r for _, _, r in clean} & {"py-keras3-auto-xla"}, clean
    # the module path Keras also exports it under
    text = KERAS3 + "from keras.applications.vgg16 import VGG16\n\nm = VGG16(weights=None)\nm.compile(loss='mse')\n"
    _, vgg = audit(cli, write(tmp_path, {"train.py": text}), "2.16")
    assert ("train.py", 10, "py-keras3-auto-xla") in vgg, vgg


def test_tf2s_tf_losses_is_keras_losses_and_tf1s_stays_its_own(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    text = "import tensorflow as tf\n\nloss = tf.losses.SparseCategoricalCrossentropy()\n"
    res, found = audit(cli, write(tmp_path, {"train.py": text}), "2.2")
    assert found == {("train.py", 3, "py-op-nondeterministic")}, found
    assert "keras.losses.SparseCategoricalCrossentropy (built on" in res.stdout
    tf1 = "import tensorflow as tf\n\nloss = tf.losses.sparse_softmax_cross_entropy(labels, logits)\n"
    _, old = audit(cli, write(tmp_path, {"train.py": tf1}), "1.15")
    assert old == {("train.py", 3, "py-op-nondeterministic")}, old


def test_keras_3_compile_jit_compile_true_with_maxpooling_is_one_finding(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    text = KERAS3 + (
        "model = keras.Sequential([keras.layers.MaxPooling2D(), keras.layers.Dense(1)])\n"
        "model.compile(optimizer='adam', loss='mse', jit_compile=True)\nmodel.fit(x, y)\n"
    )
    res, found = audit(cli, write(tmp_path, {"train.py": text}), "2.16")
    assert found == {("train.py", 8, "py-jit-compile")}, found
    [f] = json.loads(res.stdout)["findings"]
    assert f["severity"] == "error" and "then raises under determinism" in f["message"]
