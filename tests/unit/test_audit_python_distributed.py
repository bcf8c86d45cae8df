"""Edge cases of the distributed family: py-dist-mwms-communication (missing, AUTO as a name or a string, pinned,
computed, the experimental and compat.v1 strategies, the versions without the setting), py-dist-generator (under the
scope or not, the raising versions, a shared generator in strategy.run, split is no draw), py-dist-sample-from-
datasets (only where the script distributes; choose_from_datasets as info), py-dist-unseeded-shuffle (through
variables, chains over lines, functions, fit under a scope; info under a global seed), py-dist-parameter-server
(only with determinism on), and their --fix (RING added or AUTO replaced, seed=0 added, idempotent)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from envpin.knowledge import recipes
from tests.unit.test_audit_python_families import findings, fix_twice, seen

HEAD = "import tensorflow as tf\n\n"
MWMS = "tf.distribute.MultiWorkerMirroredStrategy"
RING = "tf.distribute.experimental.CommunicationImplementation.RING"
OPTIONS = f"communication_options=tf.distribute.experimental.CommunicationOptions(implementation={RING})"


# --- py-dist-mwms-communication ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "fires"),
    [
        (f"{MWMS}()", True),
        (f"{MWMS}(resolver)", True),  # the cluster resolver alone
        (f"{MWMS}({OPTIONS})", False),
        (f"{MWMS}(communication_options=tf.distribute.experimental.CommunicationOptions())", True),  # AUTO
        (f"{MWMS}({OPTIONS.replace('RING', 'AUTO')})", True),
        (f"{MWMS}({OPTIONS.replace('RING', 'NCCL')})", False),
        (
            f"{MWMS}(communication_options=tf.distribute.experimental.CommunicationOptions(implementation='ring'))",
            False,
        ),
        (f"{MWMS}(communication_options=tf.distribute.experimental.CommunicationOptions(implementation='auto'))", True),
        (f"{MWMS}(resolver, tf.distribute.experimental.CommunicationOptions(0, None, {RING}))", False),  # positional
        (f"{MWMS}(communication_options=make_options())", False),  # computed: not judged
        ("tf.distribute.experimental.MultiWorkerMirroredStrategy()", True),
        (
            "tf.distribute.experimental.MultiWorkerMirroredStrategy(tf.distribute.experimental.CollectiveCommunication.RING)",
            False,
        ),
        (
            "tf.distribute.experimental.MultiWorkerMirroredStrategy(communication=tf.distribute.experimental.CollectiveCommunication.AUTO)",
            True,
        ),
        ("tf.compat.v1.distribute.experimental.MultiWorkerMirroredStrategy()", True),
        ("tf.distribute.MirroredStrategy()", False),
    ],
)
def test_mwms_needs_a_pinned_implementation(tmp_path: Path, call: str, fires: bool) -> None:
    got = seen(tmp_path, HEAD + f"strategy = {call}\n", "2.18")
    assert ((3, "py-dist-mwms-communication") in got) is fires


def test_mwms_options_through_a_variable(tmp_path: Path) -> None:
    pinned = f"opts = tf.distribute.experimental.CommunicationOptions(implementation={RING})\n"
    auto = "opts = tf.distribute.experimental.CommunicationOptions()\n"
    call = f"strategy = {MWMS}(communication_options=opts)\n"
    assert "py-dist-mwms-communication" not in {r for _, r in seen(tmp_path, HEAD + pinned + call, "2.18")}
    assert (4, "py-dist-mwms-communication") in seen(tmp_path, HEAD + auto + call, "2.18")


@pytest.mark.parametrize(("tf", "fires"), [("2.3", False), ("2.4", True), ("2.21", True), (None, True)])
def test_mwms_versions_follow_the_tables_setting(tmp_path: Path, tf: str | None, fires: bool) -> None:
    """CommunicationOptions exists from 2.4 (the table's mwms-communication): on 2.3 the non-experimental
    strategy does not exist, so nothing is asked of it; no version: judged as the newest."""
    assert ((3, "py-dist-mwms-communication") in seen(tmp_path, HEAD + f"s = {MWMS}()\n", tf)) is fires
    part = recipes.book().distributed
    assert part is not None and part.setting("mwms-communication") is not None


def test_the_experimental_strategy_on_2_2(tmp_path: Path) -> None:
    text = HEAD + "s = tf.distribute.experimental.MultiWorkerMirroredStrategy()\n"
    assert seen(tmp_path, text, "2.2") == {(3, "py-dist-mwms-communication")}
    assert seen(tmp_path, text, "1.15") == set()  # not read for TF1: the table has no setting there


def test_fix_adds_ring_or_replaces_auto_once(tmp_path: Path) -> None:
    text = (
        HEAD + f"a = {MWMS}()\n"
        f"b = {MWMS}(resolver,)\n"
        "c = tf.distribute.experimental.MultiWorkerMirroredStrategy(\n"
        "    communication=tf.distribute.experimental.CollectiveCommunication.AUTO)\n"
        f"d = {MWMS}(communication_options=tf.distribute.experimental.CommunicationOptions(implementation='auto'))\n"
        "e = tf.distribute.experimental.MultiWorkerMirroredStrategy()\n"
    )
    once, twice, _ = fix_twice(tmp_path, text, "2.18")
    assert twice == once
    ast.parse(once)
    lines = once.splitlines()
    assert f"a = {MWMS}({OPTIONS})" in lines
    assert f"b = {MWMS}(resolver,{OPTIONS})" in lines  # after a trailing comma, no second comma
    assert "    communication=tf.distribute.experimental.CollectiveCommunication.RING)" in lines
    assert any('implementation="RING"' in line for line in lines)
    assert (
        "e = tf.distribute.experimental.MultiWorkerMirroredStrategy("
        "communication=tf.distribute.experimental.CollectiveCommunication.RING)" in lines
    )
    assert "py-dist-mwms-communication" not in {f.rule for f in findings(tmp_path, once, "2.18")}


def test_fix_comments_where_tensorflow_has_no_name(tmp_path: Path) -> None:
    text = "from tensorflow.distribute import MultiWorkerMirroredStrategy\n\ns = MultiWorkerMirroredStrategy()\n"
    once, twice, first = fix_twice(tmp_path, text, "2.18")
    assert twice == once and "# envpin audit: py-dist-mwms-communication: pin RING or NCCL" in once
    assert [f.rule for f in first.fixed[0].outcome.commented] == ["py-dist-mwms-communication"]


# --- py-dist-generator ---------------------------------------------------------------------------------------

STRATEGY = HEAD + "strategy = tf.distribute.MirroredStrategy()\n"


@pytest.mark.parametrize(
    "make",
    [
        "tf.random.Generator.from_seed(1)",
        "tf.random.Generator.from_non_deterministic_state()",
        "tf.random.experimental.Generator.from_seed(1)",
        "tf.random.Generator(state=[0, 0, 1], alg=tf.random.Algorithm.PHILOX)",
    ],
)
def test_a_generator_made_under_the_scope(tmp_path: Path, make: str) -> None:
    text = STRATEGY + f"with strategy.scope():\n    g = {make}\n"
    got = [f for f in findings(tmp_path, text, "2.18") if f.rule == "py-dist-generator"]
    assert [(f.line, f.severity) for f in got] == [(5, "warning")]
    assert "replica id" in got[0].message


def test_the_raising_versions_are_an_error(tmp_path: Path) -> None:
    text = STRATEGY + "with strategy.scope():\n    g = tf.random.Generator.from_seed(1)\n"
    [f] = [f for f in findings(tmp_path, text, "2.4") if f.rule == "py-dist-generator"]
    assert f.severity == "error" and "ValueError" in f.message
    assert [f for f in findings(tmp_path, text, "2.1") if f.rule == "py-dist-generator"] == []  # not read


@pytest.mark.parametrize(
    "scope",
    [
        "with tf.distribute.MirroredStrategy().scope():\n",
        "with self_strategy.scope():\n",  # a name that says strategy
        "with mirrored.scope(), tf.device('/cpu:0'):\n",
    ],
)
def test_what_counts_as_a_strategys_scope(tmp_path: Path, scope: str) -> None:
    text = HEAD + "mirrored = tf.distribute.MirroredStrategy()\n" + scope + "    g = tf.random.Generator.from_seed(1)\n"
    assert {r for _, r in seen(tmp_path, text, "2.18")} >= {"py-dist-generator"}


def test_outside_the_scope_or_another_scope_is_not_a_finding(tmp_path: Path) -> None:
    outside = STRATEGY + "g = tf.random.Generator.from_seed(1)\nwith strategy.scope():\n    m = 1\n"
    other = HEAD + "with tf.name_scope('x'):\n    g = tf.random.Generator.from_seed(1)\n"
    assert "py-dist-generator" not in {r for _, r in seen(tmp_path, outside, "2.18")}
    assert "py-dist-generator" not in {r for _, r in seen(tmp_path, other, "2.18")}


def test_a_shared_generator_drawn_in_strategy_run(tmp_path: Path) -> None:
    text = STRATEGY + (
        "g = tf.random.Generator.from_seed(1)\n"
        "def step(x):\n"
        "    a = tf.random.get_global_generator().normal([1])\n"
        "    b = g.uniform([1])\n"
        "    parts = g.split(2)\n"
        "    return x + a + b\n"
        "@tf.function\n"
        "def train(x):\n"
        "    return strategy.run(step, args=(x,))\n"
        "def other(x):\n"
        "    return g.normal([1])\n"
    )
    got = sorted(line for line, r in seen(tmp_path, text, "2.18") if r == "py-dist-generator")
    assert got == [6, 7]  # not split (no draw), not a function strategy.run does not run
    assert "py-dist-generator" not in {r for _, r in seen(tmp_path, text, "2.4")}  # 2.2-2.4 not measured


def test_a_lambda_given_to_run(tmp_path: Path) -> None:
    text = STRATEGY + "g = tf.random.Generator.from_seed(1)\nout = strategy.run(lambda: g.normal([2]))\n"
    assert (5, "py-dist-generator") in seen(tmp_path, text, "2.18")


# --- py-dist-sample-from-datasets ----------------------------------------------------------------------------

SAMPLE = "mixed = tf.data.Dataset.sample_from_datasets([a, b], seed=1)\n"


def test_sample_from_datasets_only_where_the_script_distributes(tmp_path: Path) -> None:
    [f] = [f for f in findings(tmp_path, STRATEGY + SAMPLE, "2.18") if f.rule == "py-dist-sample-from-datasets"]
    assert (f.line, f.severity) == (4, "warning") and "several GPUs" in f.message
    assert "py-dist-sample-from-datasets" not in {r for _, r in seen(tmp_path, HEAD + SAMPLE, "2.18")}
    one = HEAD + "strategy = tf.distribute.OneDeviceStrategy('/gpu:0')\n" + SAMPLE
    assert "py-dist-sample-from-datasets" not in {r for _, r in seen(tmp_path, one, "2.18")}


def test_sample_versions_and_the_experimental_name(tmp_path: Path) -> None:
    text = STRATEGY + "m = tf.data.experimental.sample_from_datasets([a, b])\n"
    assert (4, "py-dist-sample-from-datasets") in seen(tmp_path, text, "2.4")
    assert "py-dist-sample-from-datasets" not in {r for _, r in seen(tmp_path, text, "2.3")}  # reported on 2.4.1


def test_choose_from_datasets_is_info(tmp_path: Path) -> None:
    text = STRATEGY + "c = tf.data.Dataset.choose_from_datasets([a, b], choice)\n"
    [f] = [f for f in findings(tmp_path, text, "2.18") if f.rule == "py-dist-sample-from-datasets"]
    assert f.severity == "info" and "no report names choose_from_datasets" in f.message


# --- py-dist-unseeded-shuffle --------------------------------------------------------------------------------


def test_an_unseeded_shuffle_through_variables_and_a_chain_over_lines(tmp_path: Path) -> None:
    text = STRATEGY + (
        "ds = tf.data.Dataset.range(100)\n"
        "ds = (ds.map(lambda x: x)\n"
        "      .shuffle(100)\n"
        "      .batch(8))\n"
        "dist = strategy.experimental_distribute_dataset(ds)\n"
    )
    [f] = [f for f in findings(tmp_path, text, "2.18") if f.rule == "py-dist-unseeded-shuffle"]
    assert (f.line, f.severity) == (6, "warning")  # the line of .shuffle, not of the chain's start


@pytest.mark.parametrize("shuffle", ["shuffle(100, seed=3)", "shuffle(100, 3)", "shuffle(buffer_size=100, seed=SEED)"])
def test_a_seeded_shuffle_is_no_finding(tmp_path: Path, shuffle: str) -> None:
    text = STRATEGY + f"ds = tf.data.Dataset.range(100).{shuffle}\nd = strategy.experimental_distribute_dataset(ds)\n"
    assert "py-dist-unseeded-shuffle" not in {r for _, r in seen(tmp_path, text, "2.18")}


def test_a_shuffle_in_the_dataset_function_and_in_functions_it_calls(tmp_path: Path) -> None:
    text = STRATEGY + (
        "def files():\n"
        "    return tf.data.Dataset.range(10).shuffle(10)\n"
        "def dataset_fn(ctx):\n"
        "    return files().batch(ctx.get_per_replica_batch_size(8))\n"
        "dist = strategy.distribute_datasets_from_function(dataset_fn)\n"
    )
    assert (5, "py-dist-unseeded-shuffle") in seen(tmp_path, text, "2.18")


def test_fit_distributes_only_under_a_scope(tmp_path: Path) -> None:
    data = "ds = tf.data.Dataset.range(10).shuffle(10).batch(2)\n"
    scoped = STRATEGY + data + "with strategy.scope():\n    model = make()\nmodel.fit(ds, epochs=1)\n"
    plain = HEAD + data + "model = make()\nmodel.fit(ds, epochs=1)\n"
    assert (4, "py-dist-unseeded-shuffle") in seen(tmp_path, scoped, "2.18")
    assert "py-dist-unseeded-shuffle" not in {r for _, r in seen(tmp_path, plain, "2.18")}


def test_a_global_seed_makes_it_info(tmp_path: Path) -> None:
    text = STRATEGY + (
        "tf.random.set_seed(1)\nds = tf.data.Dataset.range(10).shuffle(10)\n"
        "d = strategy.experimental_distribute_dataset(ds)\n"
    )
    [f] = [f for f in findings(tmp_path, text, "2.18") if f.rule == "py-dist-unseeded-shuffle"]
    assert f.severity == "info" and "a global seed is set" in f.message


def test_other_shuffles_are_not_datasets(tmp_path: Path) -> None:
    text = STRATEGY + (
        "import random\nitems = [1, 2]\nrandom.shuffle(items)\nx = tf.random.shuffle(tf.range(3))\n"
        "d = strategy.experimental_distribute_dataset(tf.data.Dataset.from_tensor_slices(x))\n"
    )
    assert "py-dist-unseeded-shuffle" not in {r for _, r in seen(tmp_path, text, "2.18")}


def test_fix_adds_seed_zero_once(tmp_path: Path) -> None:
    text = STRATEGY + (
        "ds = (tf.data.Dataset.range(100)\n"
        "      .shuffle(100)\n"
        "      .batch(8))\n"
        "other = tf.data.Dataset.range(9).shuffle(buffer_size=9,\n"
        ")\n"
        "d = strategy.experimental_distribute_dataset(ds.concatenate(other))\n"
    )
    once, twice, _ = fix_twice(tmp_path, text, "2.18")
    assert twice == once and "      .shuffle(100, seed=0)\n" in once
    assert "shuffle(buffer_size=9,\nseed=0)" in once
    assert "py-dist-unseeded-shuffle" not in {f.rule for f in findings(tmp_path, once, "2.18")}


# --- py-dist-parameter-server --------------------------------------------------------------------------------

PSS = "strategy = tf.distribute.ParameterServerStrategy(resolver)\n"


@pytest.mark.parametrize(
    "switch",
    [
        "tf.config.experimental.enable_op_determinism()\n",
        "import envpin\nenvpin.enable_determinism(seed=1)\n",
    ],
)
def test_parameter_server_under_determinism(tmp_path: Path, switch: str) -> None:
    text = HEAD + switch + PSS
    got = [f for f in findings(tmp_path, text, "2.18") if f.rule == "py-dist-parameter-server"]
    assert len(got) == 1 and "outside the determinism guarantee" in got[0].message


def test_parameter_server_in_the_images_determinism(tmp_path: Path) -> None:
    assert "py-dist-parameter-server" in {
        r for _, r in seen(tmp_path, HEAD + PSS, "2.18", image={"TF_DETERMINISTIC_OPS": "1"})
    }


@pytest.mark.parametrize(
    "name",
    [
        "tf.distribute.experimental.ParameterServerStrategy",
        "tf.compat.v1.distribute.experimental.ParameterServerStrategy",
    ],
)
def test_parameter_server_names(tmp_path: Path, name: str) -> None:
    text = HEAD + f"tf.config.experimental.enable_op_determinism()\ns = {name}(resolver)\n"
    assert (4, "py-dist-parameter-server") in seen(tmp_path, text, "2.18")


def test_parameter_server_without_determinism_is_not_this_rule(tmp_path: Path) -> None:
    assert "py-dist-parameter-server" not in {r for _, r in seen(tmp_path, HEAD + PSS, "2.18")}


# --- the table the rules read --------------------------------------------------------------------------------


def test_every_hazard_and_setting_the_rules_name_is_in_the_table() -> None:
    from envpin.audit.python import distributed

    part = recipes.book().distributed
    assert part is not None
    source = Path(distributed.__file__).read_text(encoding="utf-8")
    named = {h.id for h in part.hazards} | {c.id for c in part.code}
    for gid in ("mwms-communication", "mwms-communication-experimental", *distributed._IN_SCOPE):
        assert gid in named and f'"{gid}"' in source
    for gid in ("shared-generator-in-replica", "sample-from-datasets", "choose-from-datasets"):
        assert gid in named
    assert {"unseeded-shuffle-distributed", "parameter-server-strategy"} <= named


def test_a_function_of_the_script_that_maps_to_auto(tmp_path: Path) -> None:
    """tensorflow/models' pattern: a flag mapped to CollectiveCommunication, AUTO for the default; a function
    that names no AUTO is taken as pinned."""
    mapping = (
        "def comm(alg):\n"
        "    return {None: tf.distribute.experimental.CollectiveCommunication.AUTO,\n"
        "            'ring': tf.distribute.experimental.CollectiveCommunication.RING}[alg]\n"
    )
    call = "s = tf.distribute.experimental.MultiWorkerMirroredStrategy(communication=comm(flag))\n"
    [f] = [f for f in findings(tmp_path, HEAD + mapping + call, "2.12") if f.rule == "py-dist-mwms-communication"]
    assert f.line == 6 and "may ask for AUTO (AUTO through comm()" in f.message
    pinned = mapping.replace(".AUTO", ".NCCL")
    assert "py-dist-mwms-communication" not in {r for _, r in seen(tmp_path, HEAD + pinned + call, "2.12")}
    once, twice, first = fix_twice(tmp_path, HEAD + mapping + call, "2.12")
    assert twice == once and once.count("CollectiveCommunication.AUTO") == 1  # the mapping is the user's: commented
    assert [x.rule for x in first.fixed[0].outcome.commented] == ["py-dist-mwms-communication"]


def test_a_generator_made_in_the_function_run_runs(tmp_path: Path) -> None:
    """Strategy.run runs its function in the strategy's scope (TensorFlow's random-numbers guide)."""
    text = STRATEGY + "def f():\n    return tf.random.Generator.from_seed(1).normal([])\nstrategy.run(f)\n"
    assert (5, "py-dist-generator") in seen(tmp_path, text, "2.18")
    [f] = [f for f in findings(tmp_path, text, "2.4") if f.rule == "py-dist-generator"]
    assert f.severity == "error"


def test_the_older_name_of_distribute_datasets_from_function(tmp_path: Path) -> None:
    text = STRATEGY + (
        "def fn(ctx):\n    return tf.data.Dataset.range(8).shuffle(8)\n"
        "d = strategy.experimental_distribute_datasets_from_function(fn)\n"
    )
    assert (5, "py-dist-unseeded-shuffle") in seen(tmp_path, text, "2.4")
