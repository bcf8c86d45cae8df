"""Regression tests of the script audit against the recipe table's facts, through the CLI in-process: each false
alarm and miss a review of the rules against their sources found (envpin issue 38), judged by TensorFlow
version, device and determinism state from the table's structured fields (arguments, layer_call, methods,
unless_called, distribution, built_on conditions, harmful values, kept_order), and --fix of a Dockerfile with its
scripts computed on the fixed Dockerfile."""

from __future__ import annotations

from pathlib import Path

import pytest

from envpin.knowledge import recipes
from tests.conftest import Result

ON = "import tensorflow as tf\n\ntf.config.experimental.enable_op_determinism()\n"


def audit(cli, folder: Path, text: str, tf: str, *more: str) -> Result:  # type: ignore[no-untyped-def]
    (folder / "train.py").write_text(text, encoding="utf-8")
    return cli("audit", "train.py", "--tf", tf, "--fail-on", "info", "--format", "gcc", *more, cwd=folder)


def rules(res: Result) -> set[tuple[int, str]]:
    """(line, rule) of each gcc line: path:line:col: level: message [rule]."""
    out = set()
    for line in res.stdout.splitlines():
        if line.startswith("train.py:") and line.endswith("]"):
            out.add((int(line.split(":")[1]), line.rsplit("[", 1)[1][:-1]))
    return out


SEQUENCE = (
    "import numpy as np\nimport tensorflow as tf\n\ntf.random.set_seed(0)\n\n\n"
    "class Batches(tf.keras.utils.Sequence):\n    def __len__(self):\n        return 4\n\n"
    "    def __getitem__(self, i):\n        return BODY\n\n\n"
    "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\nmodel.compile(loss='mse')\n"
    "model.fit(Batches(), workers=4, use_multiprocessing=True)\n"
)


def test_a_keras_sequence_keeps_its_order_with_workers_unless_getitem_draws_from_a_global_generator(
    cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    ordered = audit(cli, tmp_path, SEQUENCE.replace("BODY", "np.ones((2, 1)) * i, np.ones((2, 1))"), "2.3")
    assert (17, "py-fit-multiprocessing") not in rules(ordered), ordered.stdout
    shared = audit(cli, tmp_path, SEQUENCE.replace("BODY", "np.random.rand(2, 1), np.ones((2, 1))"), "2.3")
    assert (17, "py-fit-multiprocessing") in rules(shared)
    assert "draws from np.random.rand (line 12)" in shared.stdout
    generator = SEQUENCE.replace("Batches()", "iter([])").replace("BODY", "0")
    assert (17, "py-fit-multiprocessing") in rules(audit(cli, tmp_path, generator, "2.3"))


@pytest.mark.parametrize(("value", "reported"), [("1", False), ("true", False), ("0", True), ("false", True)])
def test_tf_cudnn_use_autotune_is_reported_for_the_harmful_values_only(
    cli, tmp_path: Path, value: str, reported: bool
) -> None:  # type: ignore[no-untyped-def]
    [unset] = [u for u in recipes.book().unset if u.name == "TF_CUDNN_USE_AUTOTUNE"]
    assert unset.harmful == ("0", "false") and unset.default == "1"
    res = audit(cli, tmp_path, f"import os\n\nos.environ['TF_CUDNN_USE_AUTOTUNE'] = '{value}'\n", "2.8")
    assert ((3, "py-env-must-not-be-set") in rules(res)) is reported
    (tmp_path / "Dockerfile").write_text(f"FROM tensorflow/tensorflow:2.8.0-gpu\nENV TF_CUDNN_USE_AUTOTUNE={value}\n")
    docker = cli("audit", "Dockerfile", "--fail-on", "info", cwd=tmp_path)
    assert ("cudnn-autotune-set" in docker.stdout) is reported


@pytest.mark.parametrize(
    ("call", "tf", "want"),
    [
        ("tf.math.bincount(ids, weights=w)", "2.12", set()),  # UnsortedSegmentSum: deterministic up to 2.14
        ("tf.math.bincount(ids, w)", "2.12", set()),  # weights given by position
        ("tf.math.bincount(ids)", "2.12", {"py-op-raises"}),  # Bincount on GPU
        ("tf.math.bincount(ids, weights=w)", "2.15", {"py-op-raises", "py-op-nondeterministic"}),  # DenseBincount
        ("tf.math.bincount(ids)", "2.15", {"py-op-raises"}),
        ("tf.sparse.bincount(ids)", "2.12", {"py-op-raises"}),
    ],
)
def test_bincount_is_judged_by_weights_and_version(cli, tmp_path: Path, call: str, tf: str, want: set[str]) -> None:  # type: ignore[no-untyped-def]
    res = audit(cli, tmp_path, f"import tensorflow as tf\n\ny = {call}\n", tf)
    assert {r for _, r in rules(res)} == want, res.stdout


def test_map_with_deterministic_false_batched_directly_keeps_order_where_measured(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    [kept] = recipes.book().kept_order
    assert (kept.id, kept.tf_min) == ("tf-data-map-batch-fused", "2.21")
    text = (
        "import tensorflow as tf\n\nds = ds.map(f, num_parallel_calls=4, deterministic=False).batch(8)\n"
        "ds2 = ds.map(f, num_parallel_calls=4, deterministic=False).prefetch(2).batch(8)\n"
    )
    assert rules(audit(cli, tmp_path, text, "2.21")) == {(4, "py-data-nondeterministic")}
    assert rules(audit(cli, tmp_path, text, "2.6")) == {
        (3, "py-data-nondeterministic"),
        (4, "py-data-nondeterministic"),
    }


def test_sloppy_given_a_variable_is_asked_for(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    text = (
        "import tensorflow as tf\n\nds = ds.apply(tf.data.experimental.parallel_interleave(f, 2, sloppy=is_training))\n"
    )
    res = audit(cli, tmp_path, text, "2.6")
    assert rules(res) == {(3, "py-data-nondeterministic")} and "whenever is_training is true" in res.stdout
    assert rules(audit(cli, tmp_path, text.replace("is_training", "False"), "2.6")) == set()


@pytest.mark.parametrize(
    ("call", "line_rule", "severity"),
    [
        ("tf.nn.softmax_cross_entropy_with_logits_v2(labels=a, logits=b)", "py-op-nondeterministic", "warning"),
        (
            "tf.compat.v1.nn.softmax_cross_entropy_with_logits_v2(labels=a, logits=b)",
            "py-op-nondeterministic",
            "warning",
        ),
        ("tf.compat.v1.losses.softmax_cross_entropy(a, b)", "py-op-nondeterministic", "warning"),
        ("tf.keras.losses.CategoricalCrossentropy(from_logits=True)", "py-op-nondeterministic", "warning"),
        ("tf.keras.losses.CategoricalCrossentropy()", "py-op-nondeterministic", "note"),  # only from a softmax
    ],
)
def test_the_fused_softmax_cross_entropy_entry_covers_its_other_names(
    cli, tmp_path: Path, call: str, line_rule: str, severity: str
) -> None:  # type: ignore[no-untyped-def]
    res = audit(cli, tmp_path, f"import tensorflow as tf\n\ny = {call}\n", "2.5")
    assert rules(res) == {(3, line_rule)}, res.stdout
    assert f": {severity}: " in res.stdout
    assert rules(audit(cli, tmp_path, f"import tensorflow as tf\n\ny = {call}\n", "2.6")) == set()


@pytest.mark.parametrize(
    ("text", "raises"),
    [
        ("bn = tf.keras.layers.BatchNormalization()\ny = bn(x, training=False)\n", True),
        ("y = tf.keras.layers.BatchNormalization()(x, training=False)\n", True),
        ("bn = tf.keras.layers.BatchNormalization(trainable=False)\ny = bn(x, training=False)\n", False),
        ("bn = tf.keras.layers.BatchNormalization()\ny = bn(x, training=True)\n", False),
        ("y = tf.compat.v1.nn.fused_batch_norm(x, s, o, is_training=False)\n", True),
        ("y = tf.compat.v1.nn.fused_batch_norm(x, s, o)\n", False),
    ],
)
def test_batch_norm_called_with_training_off_while_trainable_raises(
    cli, tmp_path: Path, text: str, raises: bool
) -> None:  # type: ignore[no-untyped-def]
    res = audit(cli, tmp_path, "import tensorflow as tf\n\n" + text, "2.8")
    assert any(r == "py-op-raises" for _, r in rules(res)) is raises, res.stdout
    # Keras 3's BatchNormalization runs the unfused op: nothing to raise there
    assert not any(
        r == "py-op-raises"
        for _, r in rules(audit(cli, tmp_path, "import keras\n\n" + text.replace("tf.keras", "keras"), "2.16"))
    )


def test_bias_add_on_stock_1_14_to_2_0_unless_patched(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    text = "import tensorflow as tf\n\ny = tf.nn.bias_add(x, b)\n"
    assert rules(audit(cli, tmp_path, text, "1.15")) == {(3, "py-op-nondeterministic")}
    patched = (
        "from fwr13y.d9m.tensorflow import enable_determinism\nimport tensorflow as tf\n\n"
        "enable_determinism()\ny = tf.nn.bias_add(x, b)\n"
    )
    assert rules(audit(cli, tmp_path, patched, "1.15")) == set()
    assert rules(audit(cli, tmp_path, text, "2.1")) == set()
    # NGC's TF 1.15 covers it with TF_DETERMINISTIC_OPS: the entry is stock only
    assert all(e.distribution != "ngc" for e in recipes.select("1.15", "ngc", "20.02").records.silent)
    assert "tf.nn.bias_add" not in {a for e in recipes.select("1.15", "ngc", "20.02").records.silent for a in e.apis}


def test_determinism_on_and_fit_without_a_seed_is_an_error_from_2_7(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    text = ON + "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\nmodel.compile(loss='mse')\nmodel.fit(x, y)\n"
    res = audit(cli, tmp_path, text, "2.8")
    assert (1, "py-no-global-seed") in rules(res) and "error: " in res.stdout
    assert "fit() on line 6 raises (RuntimeError)" in res.stdout
    off = audit(cli, tmp_path, text.replace(ON, "import tensorflow as tf\n\n\n"), "2.8")
    assert ": warning: " in off.stdout and "RuntimeError" not in off.stdout  # no determinism: nothing raises
    unshuffled = audit(cli, tmp_path, text.replace("fit(x, y)", "fit(x, y, shuffle=False)"), "2.8")
    assert "RuntimeError" not in unshuffled.stdout


DOCKERFILE = "FROM tensorflow/tensorflow:2.4.1-gpu@sha256:" + "0" * 64 + "\n"
HOROVOD = (
    "import horovod.tensorflow.keras as hvd\nimport tensorflow as tf\n\ntf.random.set_seed(0)\nhvd.init()\n"
    "model = tf.keras.Sequential([tf.keras.layers.Dense(1)])\nmodel.compile(loss='mse')\nmodel.fit(x, y)\n"
)


def test_fix_of_a_dockerfile_and_its_script_is_computed_on_the_fixed_dockerfile(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "Dockerfile").write_text(DOCKERFILE)
    (tmp_path / "train.py").write_text(HOROVOD)
    res = cli("audit", "--fix", "--no-resolve", "Dockerfile", "train.py", "--fail-on", "info", cwd=tmp_path)
    assert res.code == 0, res.stdout + res.stderr
    assert "left in the fixed files: no findings in 2 files" in res.stdout
    fixed = (tmp_path / "train.py.envpin-fixed").read_text()
    assert fixed == HOROVOD  # the fixed Dockerfile sets TF_DETERMINISTIC_OPS: no second switch in the script
    fresh = cli("audit", "Dockerfile.envpin-fixed", "train.py.envpin-fixed", "--fail-on", "info", cwd=tmp_path)
    assert fresh.code == 0 and "no findings in 2 files" in fresh.stdout
