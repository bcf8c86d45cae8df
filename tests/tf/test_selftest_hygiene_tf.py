"""Seed hygiene for NumPy and TensorFlow RNGs, in real fresh processes."""

from __future__ import annotations

import os
from pathlib import Path

from envpin.probe import hygiene


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = "0"
    return env


def _run(tmp_path: Path, body: str) -> dict[str, dict]:
    script = tmp_path / "train.py"
    script.write_text(body)
    return {f["check"]: f for f in hygiene.run_hygiene(str(script), environ=_env())}


def test_unseeded_tensorflow_and_numpy_are_found(tmp_path: Path) -> None:
    found = _run(
        tmp_path, "import numpy as np\nimport tensorflow as tf\nnp.random.rand(3)\nprint(tf.random.uniform([3]))\n"
    )
    assert found["numpy-random"]["status"] == "finding"
    assert found["tensorflow-random"]["status"] == "finding"
    assert "global seed is not set" in found["tensorflow-random"]["message"]
    assert "tf.random.set_seed(SEED)" in found["tensorflow-random"]["fix"]
    assert found["python-random"]["status"] == "ok"


def test_unseeded_default_rng_is_found(tmp_path: Path) -> None:
    # a library that makes an unseeded generator while it is imported (SciPy 1.17 renders docstring
    # examples so) is not the program drawing unseeded numbers: only the script's own call counts
    (tmp_path / "docs_lib.py").write_text("import numpy as np\nEXAMPLE = np.random.default_rng(None).normal()\n")
    found = _run(
        tmp_path,
        "import numpy as np\nimport docs_lib\nrng = np.random.default_rng()\nrng.normal(size=3)\n"
        "np.random.default_rng(7).normal()\n",
    )
    assert found["numpy-random"]["status"] == "finding"
    assert "default_rng() was called without a seed 1 time(s)" in found["numpy-random"]["message"]


def test_keras_set_random_seed_makes_everything_ok(tmp_path: Path) -> None:
    found = _run(
        tmp_path,
        "import random\nimport numpy as np\nimport tensorflow as tf\n"
        "tf.keras.utils.set_random_seed(3)\nrandom.random(); np.random.rand(2)\n"
        "tf.keras.initializers.GlorotUniform()(shape=(2, 2))\n",
    )
    for check in ("PYTHONHASHSEED", "python-random", "numpy-random", "tensorflow-random", "keras-initializers"):
        assert found[check]["status"] == "ok", found[check]


def test_envpin_recipe_seeds_every_rng() -> None:
    found = {f["check"]: f for f in hygiene.run_hygiene(environ=_env())}
    for check in ("python-random", "numpy-random", "tensorflow-random", "keras-initializers"):
        assert found[check]["status"] == "ok", found[check]
