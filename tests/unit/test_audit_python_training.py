"""Whether a script trains, as real codebases spell it (envpin issue 38): a TF1 Session running an attribute, an
Estimator's train(), tensorpack's trainers, a custom train_step, TPUEstimator, and a model or trainer imported
from another script of the same run (a package passed as a folder is audited as a whole); `--explain` says why.
Through the CLI in-process; each case was missed before."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import Result


def explain(cli, folder: Path, *paths: str) -> Result:  # type: ignore[no-untyped-def]
    return cli("audit", *paths, "--tf", "2.8", "--fail-on", "info", "--explain", cwd=folder)


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (
            "import tensorflow as tf\nfrom model import Model\n\nm = Model()\nsess = tf.compat.v1.Session()\n"
            "for _ in range(9):\n    sess.run(m.opt_op)\n",
            "runs m.opt_op in a TF1 Session (line 7)",
        ),
        (
            "import tensorflow as tf\n\nest = tf.compat.v1.estimator.tpu.TPUEstimator(model_fn=f, use_tpu=False)\n",
            "makes the estimator tf.compat.v1.estimator.tpu.TPUEstimator (line 3)",
        ),
        (
            "import tensorflow as tf\nfrom models import make_estimator\n\nest = make_estimator()\n"
            "est.train(input_fn=train_input, max_steps=100)\n",
            "calls an Estimator's train(input_fn=...) (line 5)",
        ),
        (
            "import tensorflow as tf\nfrom tensorpack import TrainConfig, SimpleTrainer, launch_train_with_config\n\n"
            "launch_train_with_config(TrainConfig(model=Net()), SimpleTrainer())\n",
            "starts a framework trainer (launch_train_with_config) (line 4)",
        ),
        (
            "import tensorflow as tf\n\n\n@tf.function\ndef train_step(x):\n    return x\n\n\n"
            "for batch in data:\n    train_step(batch)\n",
            "runs the training step train_step (line 10)",
        ),
        (
            "import tensorflow as tf\n\nstrategy = tf.distribute.MirroredStrategy()\n"
            "for batch in data:\n    strategy.run(train_step, args=(batch,))\n",
            "runs the training step train_step (line 5)",
        ),
    ],
)
def test_training_the_script_does_through_names_it_does_not_define(cli, tmp_path: Path, text: str, why: str) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "train.py").write_text(text)
    res = explain(cli, tmp_path, "train.py")
    assert f"train.py: trains: {why}" in res.stdout, res.stdout
    assert "py-determinism-switch-missing" in res.stdout  # judged as a training run now


def test_a_package_folder_is_audited_as_a_whole_and_a_model_imported_from_it_counts(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    pkg = tmp_path / "src" / "proj"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "trainer.py").write_text(
        "import keras\n\n\ndef build():\n    return keras.Sequential([keras.layers.Dense(1)])\n\n\n"
        "def train(model, x, y):\n    model.compile(optimizer='sgd', loss='mse')\n    model.fit(x, y)\n"
    )
    (pkg / "main.py").write_text("from .trainer import build, train\n\nmodel = build()\ntrain(model, 1, 2)\n")
    res = explain(cli, tmp_path, "src")
    main = str(Path("src/proj/main.py"))
    assert f"{main}: trains: calls build from {Path('src/proj/trainer.py')}, which trains" in res.stdout, res.stdout
    # main.py imports no Keras: the run's switch is asked for once, at the first Keras import of the run
    trainer = str(Path("src/proj/trainer.py"))
    assert f"{trainer}:1 py-determinism-switch-missing" in res.stdout
    assert f"{main}:1 py-determinism-switch-missing" not in res.stdout
    assert f"{Path('src/proj/__init__.py')}: does not train" in res.stdout
    alone = explain(cli, tmp_path, str(pkg / "main.py"))  # without the module it imports, nothing says it trains
    assert "does not train: it uses neither TensorFlow nor Keras" in alone.stdout


def test_a_keras_3_model_defined_in_another_module_of_the_run(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "nets.py").write_text(
        "import keras\n\n\ndef resnet():\n    return keras.Sequential([keras.layers.Dense(1)])\n"
    )
    (tmp_path / "run.py").write_text("import nets\n\nmodel = nets.resnet()\nmodel.fit(x, y, epochs=3)\n")
    res = explain(cli, tmp_path, "run.py", "nets.py")
    assert "run.py: trains: calls fit() (line 4)" in res.stdout, res.stdout
    assert "nets.py: does not train" in res.stdout


def test_explain_keeps_machine_formats_parseable_and_a_folder_without_scripts_is_one_error(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import json

    (tmp_path / "train.py").write_text("import tensorflow as tf\n\nmodel.fit(x)\n")
    res = cli("audit", "train.py", "--tf", "2.8", "--explain", "--format", "json", cwd=tmp_path)
    json.loads(res.stdout)
    assert "train.py: trains: calls fit() (line 3)" in res.stderr
    (tmp_path / "empty").mkdir()
    bad = cli("audit", "empty", cwd=tmp_path)
    assert bad.code == 2 and bad.stdout == ""
    assert bad.stderr.splitlines() == [
        "error: empty: is a folder with no Python script in it",
        "hint: name the scripts or Dockerfiles",
    ]
