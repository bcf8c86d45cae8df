"""Script rules whose verdict the recipe table makes version-aware: what op determinism overrides in tf.data (from
TF 2.7), unseeded random ops that raise under determinism (from 2.7), the XLA MaxPool gradient's tf.nn APIs (from
2.8), and the TF1 seeding `--fix` inserts (tf.compat.v1 exists from 1.13)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from envpin.audit import audit_script, target_for
from envpin.errors import RecipeError
from envpin.knowledge import recipes
from tests.conftest import Result

#: The `cli` fixture: envpin.cli.main run in-process on these arguments.
Cli = Callable[..., Result]

SWITCH = "tf.keras.utils.set_random_seed(0)\ntf.config.experimental.enable_op_determinism()\n"
DATA = (
    "\n\ndef aug(x):\n    return tf.image.random_flip_left_right(x)\n\n\n"
    "ds = tf.data.Dataset.range(8).map(lambda x: x + 1, num_parallel_calls=4, deterministic=False)\n"
    "ds2 = tf.data.Dataset.from_tensors(tf.zeros((4, 4, 3))).map(aug, num_parallel_calls=8)\n"
    "opts = tf.data.Options()\nopts.experimental_deterministic = False\n"
)


def _data(text: str, tf: str, image_env: dict[str, str] | None = None) -> dict[tuple[int, str], object]:
    target = target_for(tf, "stock", None, f"--tf {tf}", image_env)
    return {
        (f.line, f.rule): f
        for f in audit_script(text, "train.py", target)
        if f.rule in ("py-data-nondeterministic", "py-data-random-map")
    }


def test_the_table_says_what_determinism_overrides_in_tf_data_and_from_which_version() -> None:
    book = recipes.book()
    assert {o.id for o in book.overridden_on("2.8")} == {
        "tf-data-deterministic-false",
        "tf-data-stateful-map-serial",
    }
    assert {o.id for o in book.overridden_on("2.7.4")} == {o.id for o in book.overridden_on("2.21")}
    assert book.overridden_on("2.6") == () and book.overridden_on("1.15") == ()
    for o in book.overridden_on("2.8"):
        assert "irrespective of its setting" in book.sources[o.source]["title"]
        assert o.range_source in book.sources


def test_with_determinism_on_where_the_table_overrides_it_the_cost_is_speed_not_results() -> None:
    found = _data("import tensorflow as tf\n\n" + SWITCH + DATA, "2.8")
    assert set(found) == {
        (11, "py-data-nondeterministic"),
        (12, "py-data-random-map"),
        (14, "py-data-nondeterministic"),
    }
    for f in found.values():
        assert f.severity == "info" and "on TensorFlow 2.8 with determinism on" in f.message  # type: ignore[attr-defined]
    assert "keep their input order" in found[(11, "py-data-nondeterministic")].message  # type: ignore[attr-defined]
    assert "serially" in found[(12, "py-data-random-map")].message  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "tf, head, image_env, note",
    [
        ("2.8", "tf.keras.utils.set_random_seed(0)\n", None, "is not switched on"),  # no switch
        (
            "2.6",
            SWITCH.replace("tf.config.experimental.enable_op_determinism()\n", ""),
            {"TF_DETERMINISTIC_OPS": "1"},
            None,
        ),  # determinism on, but 2.6 does not override deterministic=False
        ("2.7", SWITCH, None, "is not switched on"),  # enable_op_determinism() does not exist on 2.7
    ],
)
def test_where_determinism_does_not_override_the_order_the_finding_stays_a_warning(
    tf: str, head: str, image_env: dict[str, str] | None, note: str | None
) -> None:
    found = _data("import tensorflow as tf\n\n" + head + DATA, tf, image_env)
    assert found and all(f.severity == "warning" for f in found.values())  # type: ignore[attr-defined]
    messages = [f.message for f in found.values()]  # type: ignore[attr-defined]
    assert all("in the order they finish" in m or "depend on scheduling" in m for m in messages)
    assert all((note in m) if note else ("override" not in m and "serially" not in m) for m in messages)


def test_an_image_that_sets_the_switch_counts_on_2_7() -> None:
    text = "import tensorflow as tf\n\ntf.random.set_seed(0)\n" + DATA
    found = _data(text, "2.7", {"TF_DETERMINISTIC_OPS": "1"})
    assert found and all(f.severity == "info" for f in found.values())  # type: ignore[attr-defined]


UNSEEDED = "import tensorflow as tf\n\n{switch}noise = tf.random.uniform((4,))\nok = tf.random.normal((4,), seed=3)\n"


def _seed_findings(text: str, tf: str) -> list:  # type: ignore[type-arg]
    target = target_for(tf, "stock", None, f"--tf {tf}")
    return [f for f in audit_script(text, "script.py", target) if f.rule == "py-no-global-seed"]


def test_a_script_that_turns_determinism_on_and_calls_an_unseeded_random_op_is_told_it_raises() -> None:
    switch = "tf.config.experimental.enable_op_determinism()\n"
    for tf in ("2.8", "2.15", "2.21"):
        (f,) = _seed_findings(UNSEEDED.format(switch=switch), tf)
        assert f.severity == "error" and "turns determinism on but sets no global TensorFlow seed" in f.message
        assert (
            f"on TensorFlow {tf} the table says an unseeded tf.random.uniform raises (RuntimeError): line 4"
            in f.message
        )
    # no switch and no training: nothing raises, nothing to say; a global seed, or an op seed only: no finding
    assert _seed_findings(UNSEEDED.format(switch=""), "2.8") == []
    assert _seed_findings(UNSEEDED.format(switch=switch + "tf.random.set_seed(1)\n"), "2.8") == []
    assert _seed_findings(UNSEEDED.format(switch=switch).replace("uniform((4,))", "uniform((4,), seed=1)"), "2.8") == []


def test_the_unseeded_random_op_entry_starts_at_2_7_as_read_in_the_wheels() -> None:
    book = recipes.book()
    entry = next(e for e in book.raises if e.context == "no_global_seed" and "tf.random.uniform" in e.apis)
    assert entry.tf_min == "2.7" and entry.exception == "RuntimeError"
    assert "2.6.5" in book.sources[entry.source]["title"]
    text = "import os\n\nos.environ['TF_DETERMINISTIC_OPS'] = '1'\n" + UNSEEDED.format(switch="")
    assert [f.severity for f in _seed_findings(text, "2.7")] == ["error"]
    assert [f.severity for f in _seed_findings(text, "2.6")] == []  # 2.6 does not refuse it: no training, no seed rule


@pytest.mark.parametrize(
    "call, severity",
    [
        ("tf.nn.max_pool2d(x, 2, 2, 'VALID')", "error"),
        ("tf.nn.max_pool1d(x, 2, 2, 'VALID')", "error"),
        ("tf.compat.v1.nn.max_pool(x, [1, 2, 2, 1], [1, 2, 2, 1], 'VALID')", "error"),
        ("tf.compat.v1.nn.max_pool_v2(x, [1, 2, 2, 1], [1, 2, 2, 1], 'VALID')", "error"),
        ("tf.nn.max_pool(x, 2, 2, 'VALID')", "warning"),  # raises only on a rank-3/4 input
        ("tf.nn.max_pool3d(x, 2, 2, 'VALID')", "warning"),  # MaxPool3DGrad compiles: no raiser, the plain XLA warning
    ],
)
def test_tf_nn_max_pool_under_xla_raises_from_2_8(call: str, severity: str) -> None:
    text = f"import tensorflow as tf\n\n\n@tf.function(jit_compile=True)\ndef step(x):\n    return {call}\n"
    for tf, want in (("2.8", severity), ("2.7", "warning")):
        found = [
            f
            for f in audit_script(text, "m.py", target_for(tf, "stock", None, f"--tf {tf}"))
            if f.rule == "py-jit-compile"
        ]
        assert [f.severity for f in found] == [want], (tf, call)
        raises = "then raises under determinism" in found[0].message
        assert raises == (tf == "2.8" and "max_pool3d" not in call)
        assert ("only when the input has rank 3 or 4" in found[0].message) == (
            tf == "2.8" and call.startswith("tf.nn.max_pool(")
        )


@pytest.mark.parametrize(
    "tf, seeding",
    [
        ("1.12", "tf.set_random_seed(0)\n"),
        ("1.10", "tf.set_random_seed(0)\n"),
        ("1.13", "tf.compat.v1.set_random_seed(0)\n"),
        ("1.15", "tf.compat.v1.set_random_seed(0)\n"),
    ],
)
def test_fix_seeds_tf1_with_the_name_that_version_has(cli: Cli, tmp_path: Path, tf: str, seeding: str) -> None:
    (tmp_path / "train.py").write_text("import tensorflow as tf\n\nopt = tf.train.AdamOptimizer()\nopt.minimize(l)\n")
    res = cli("audit", "--tf", tf, "--fix", "train.py", cwd=tmp_path)
    fixed = (tmp_path / "train.py.envpin-fixed").read_text()
    assert seeding in fixed, (res.stdout, res.stderr)
    assert ("compat.v1" in fixed) == (seeding.startswith("tf.compat")), fixed


def test_the_compat_v1_advice_covers_exactly_1_0_to_1_12() -> None:
    ids = lambda tf: {a.id for a in recipes.select(tf, "stock").records.advice}  # noqa: E731
    assert "compat-v1-before-1-13" in ids("1.12") and "compat-v1-before-1-13" not in ids("1.13")
    bad = recipes.table()
    bad = {**bad, "overridden_under_determinism": [{**bad["overridden_under_determinism"][0], "extra": 1}]}
    with pytest.raises(RecipeError, match="overridden_under_determinism"):
        recipes.validate(bad)
