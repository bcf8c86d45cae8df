"""Determinism recipes: the table, the selection rule, and the in-image runtime helper."""

from __future__ import annotations

import json
import re

import pytest

from envpin.errors import RecipeError
from envpin.knowledge import recipes
from envpin.probe import runtime
from tests.conftest import REPO, make_unreadable


@pytest.mark.parametrize(
    "tf, dist, rel, rid, env, steps",
    [
        ("1.14", "stock", None, "stock-1.14-2.0", {"TF_CUDNN_DETERMINISTIC": "1"}, {"fwr13y_enable_determinism"}),
        ("2.0", "stock", None, "stock-1.14-2.0", {"TF_CUDNN_DETERMINISTIC": "1"}, {"fwr13y_enable_determinism"}),
        ("2.1", "stock", None, "stock-2.1-2.4", {"TF_DETERMINISTIC_OPS": "1"}, {"seed_tf"}),
        ("2.6", "stock", None, "stock-2.5-2.7", {"TF_CUDNN_USE_FRONTEND": "1"}, {"seed_tf"}),
        ("2.8", "stock", None, "stock-2.8-2.15", {"TF_DETERMINISTIC_OPS": "1"}, {"enable_op_determinism"}),
        ("2.15.1", "stock", None, "stock-2.8-2.15", {}, {"keras_set_random_seed", "enable_op_determinism"}),
        ("2.16", "stock", None, "stock-2.16-2.19", {}, {"enable_op_determinism", "keras3_no_auto_xla"}),
        ("2.19.1", "stock", None, "stock-2.16-2.19", {}, {"enable_op_determinism", "keras3_no_auto_xla"}),
        ("2.20", "stock", None, "stock-2.20-2.21", {}, {"enable_op_determinism", "keras3_no_auto_xla"}),
        ("2.21.0", "stock", None, "stock-2.20-2.21", {}, {"keras_set_random_seed", "keras3_no_auto_xla"}),
        ("1.13.1", "ngc", "19.05", "ngc-before-19.06", {}, {"seed_tf"}),
        ("1.14", "ngc", "19.10", "ngc-tf1", {"TF_DETERMINISTIC_OPS": "1"}, {"seed_tf"}),
        ("2.0", "ngc", "19.11", "ngc-tf2.0-2.4", {"TF_DETERMINISTIC_OPS": "1"}, {"seed_tf"}),
        ("2.5", "ngc", "21.06", "ngc-tf2.5-2.7", {"TF_CUDNN_USE_FRONTEND": "1"}, {"seed_tf"}),
        ("2.8", "ngc", "22.03", "ngc-tf2.8-2.15", {"TF_DETERMINISTIC_OPS": "1"}, {"enable_op_determinism"}),
        ("2.17.0", "ngc", "25.02", "ngc-tf2.16-plus", {"TF_DETERMINISTIC_OPS": "1"}, {"keras3_no_auto_xla"}),
    ],
)
def test_selection(tf: str, dist: str, rel: str | None, rid: str, env: dict[str, str], steps: set[str]) -> None:
    r = recipes.select(tf, dist, rel)
    assert r.id == rid
    assert env.items() <= r.env_dict().items()
    assert steps <= {s["step"] for s in r.steps}
    assert r.env_dict()["PYTHONHASHSEED"] == "0" and r.env_dict()["HOROVOD_FUSION_THRESHOLD"] == "0"
    assert [u["name"] for u in r.unset] == ["TF_CUDNN_USE_AUTOTUNE"]
    assert [(u["name"], u["instead"]) for u in r.no_effect] == [("TF_USE_CUDNN_AUTOTUNE", "TF_CUDNN_USE_AUTOTUNE")]
    assert "TF_CUDNN_USE_AUTOTUNE" not in r.env_dict()
    for item in [*r.env, *r.unset, *r.no_effect, *r.steps, *r.caveats, *r.raises]:
        assert r.source_url(item["source"]).startswith("https://")


def test_cudnn_deterministic_only_for_stock_1_14_to_2_0() -> None:
    for tf in ("1.13", "2.1", "2.4", "2.5", "2.8", "2.17"):
        assert "TF_CUDNN_DETERMINISTIC" not in recipes.select(tf, "stock").env_dict()
    assert "TF_CUDNN_DETERMINISTIC" not in recipes.select("1.15", "ngc", "20.02").env_dict()


def test_raises_listed_per_version() -> None:
    # Linux builds (the Windows-only entry for native Windows 2.7-2.10 has its own test)
    ops = lambda tf: {r["op"] for r in recipes.select(tf, "stock").raises if "platform" not in r}  # noqa: E731
    assert ops("2.4") == set()
    assert any("segment_sum" in o for o in ops("2.5"))
    assert any("bincount" in o for o in ops("2.7")) and not any("segment_sum" in o for o in ops("2.7"))
    # From 2.10 depthwise backprop to filter raises only with cuDNN older than 7.6.3: TensorFlow's own text.
    depthwise = [r for r in recipes.select("2.10", "stock").raises if "depthwise" in r["op"]]
    assert [r["message"] for r in depthwise] == [
        "A deterministic GPU implementation of DepthwiseConvBackpropFilter is not available with this version of "
        "cuDNN. Please build with cuDNN version 7.6.3 or later."
    ]
    # TensorFlow's real segment messages (2.5-2.6), not a paraphrase.
    assert {r["message"] for r in recipes.select("2.5", "stock").raises if r["devices"] == "gpu"} == {
        "Deterministic GPU implementation of sorted segment reduction op not available.",
        "Deterministic GPU implementation of unsorted segment reduction op not available.",
    }
    fake = [r for r in recipes.select("2.8", "stock").raises if "fake_quant" in r["op"]]
    assert fake and all(
        r["message"].startswith("Determinism is not yet supported in GPU implementation of FakeQuant") for r in fake
    )
    assert all(r["exception"] and r["devices"] in ("gpu", "any") for r in recipes.select("2.21", "stock").raises)


def test_hash_is_stable_and_distinguishes() -> None:
    a, b = recipes.select("2.5", "ngc", "21.06"), recipes.select("2.5", "ngc", "21.06")
    assert a.hash == b.hash and a.hash.startswith("sha256:")
    assert a.hash != recipes.select("2.4", "ngc", "21.02").hash


@pytest.mark.parametrize(
    "args, message",
    [
        (("2", "stock"), "MAJOR.MINOR"),
        (("2.1", "ngc", None), "NGC release"),
        (("0.9", "stock"), "no determinism recipe"),
    ],
)
def test_select_errors(args: tuple, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(RecipeError, match=message):
        recipes.select(*args)


def test_runtime_and_library_share_one_rule() -> None:
    table = runtime.load_table()
    for tf, dist, rel in [("2.1", "ngc", "20.02"), ("2.21", "stock", None), ("1.15.5", "ngc", "23.03")]:
        # The row, env and steps come from the one rule; the host adds NGC overrides (which drop the stock
        # entries they replace) and the advice lines, which the in-image helper has no use for.
        in_image, host = runtime.resolve(table, tf, dist, rel), recipes.select(tf, dist, rel).to_dict()
        assert set(host) - set(in_image) == {"ngc_overrides", "advice"}
        lists = ("raises_under_determinism", "nondeterministic_under_determinism")
        assert {k: host[k] for k in in_image if k not in lists} == {k: v for k, v in in_image.items() if k not in lists}
        for key in lists:
            assert all(e in in_image[key] for e in host[key])
            if dist == "stock":
                assert host[key] == in_image[key]


def test_check_environment() -> None:
    r = recipes.select("2.5", "ngc", "21.06").to_dict()
    good = {e["name"]: e["value"] for e in r["env"]}
    assert runtime.check_environment(r, good) == []
    bad = {**good, "TF_CUDNN_USE_AUTOTUNE": "0", "TF_USE_CUDNN_AUTOTUNE": "0"}
    bad.pop("TF_DETERMINISTIC_OPS")
    problems = runtime.check_environment(r, bad)
    assert any(p.startswith("TF_DETERMINISTIC_OPS should be 1") for p in problems)
    assert any(p.startswith("TF_CUDNN_USE_AUTOTUNE must not be set") for p in problems)
    assert any(p.startswith("TF_USE_CUDNN_AUTOTUNE has no effect") for p in problems)


def test_frontend_work_around_is_marked_unverified_only_on_ngc() -> None:
    ngc = next(e for e in recipes.select("2.5", "ngc", "21.06").env if e["name"] == "TF_CUDNN_USE_FRONTEND")
    stock = next(e for e in recipes.select("2.5", "stock").env if e["name"] == "TF_CUDNN_USE_FRONTEND")
    assert ngc["unverified"].startswith("on NGC builds") and "unverified" not in stock


@pytest.mark.parametrize(
    ("keras", "warned"),
    [("3.0.5", True), ("3.6.0", True), ("3.7.0", False), ("3.15.1", False), ("2.15.0", False), (None, False)],
)
def test_keras3_auto_xla_step_warns_only_before_keras_3_7(
    keras: str | None, warned: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Keras 3 before 3.7 compiles with XLA under determinism (jit_compile='auto'); 3.7+ keeps it off while
    op determinism is on, and Keras 2 never defaulted to XLA. The version is read from tf.keras; without one
    there, from a standalone Keras, and here none is importable (the installed one would bring TensorFlow)."""
    import sys
    import types

    from envpin.probe import runtime

    monkeypatch.setitem(sys.modules, "keras", None)  # `import keras` raises ImportError

    tf = types.SimpleNamespace(keras=types.SimpleNamespace(__version__=keras) if keras else types.SimpleNamespace())
    report: dict[str, list[str]] = {"applied": [], "skipped": [], "warnings": []}
    runtime._step("keras3_no_auto_xla", 42, tf, report)
    if warned:
        assert report["applied"] == [] and len(report["warnings"]) == 1
        assert "jit_compile=False" in report["warnings"][0] and keras in report["warnings"][0]
    else:
        assert report == {"applied": ["keras3_no_auto_xla"], "skipped": [], "warnings": []}


def test_recipe_for_keras3_tensorflow_names_the_step(cli) -> None:  # type: ignore[no-untyped-def]
    """`envpin recipe` for an image with TF 2.16 or later (NGC 25.02: TF 2.17) names the Keras 3 step."""
    res = cli("recipe", "--ngc", "25.02")
    assert res.code == 0, res.stderr
    assert "keras3_no_auto_xla" in res.stdout and "jit_compile=False" in res.stdout


def test_stock_rows_end_at_the_last_release_read() -> None:
    """Stock rows run through TF 2.21 (the newest release whose requirements were read); a later version has
    no recipe rather than a guessed one."""
    with pytest.raises(RecipeError, match="no determinism recipe"):
        recipes.select("2.22", "stock")


def test_ngc_overrides_replace_the_stock_facts_they_speak_of() -> None:
    """NGC 20.03+ has NVIDIA's deterministic bilinear resize backprop (stock only from 2.4); NGC 21.04+ its own
    sparse_dense_matmul kernel instead of stock's exception (flawed, so still listed as nondeterministic)."""
    stock = recipes.select("2.1", "stock")
    assert any("BILINEAR" in e["op"] for e in stock.silent) and stock.ngc_overrides == ()
    before = recipes.select("2.1", "ngc", "20.02")
    after = recipes.select("2.1", "ngc", "20.03")
    assert any("BILINEAR" in e["op"] for e in before.silent)
    assert not any("BILINEAR" in e["op"] for e in after.silent)
    assert [o["verdict"] for o in after.ngc_overrides if "BILINEAR" in o["op"]] == ["deterministic"]
    assert any("sparse_dense_matmul" in e["op"] for e in recipes.select("2.6", "stock").raises)
    ngc = recipes.select("2.6", "ngc", "21.09")
    assert not any("sparse_dense_matmul" in e["op"] for e in ngc.raises)
    assert [o["verdict"] for o in ngc.ngc_overrides] == ["nondeterministic"]
    for r in (after, ngc):
        assert all(r.source_url(o["source"]).startswith("https://") for o in r.ngc_overrides)


def test_windows_segment_entry_and_unverified_boundaries() -> None:
    win = [e for e in recipes.select("2.8", "stock").raises if e.get("platform") == "windows"]
    assert len(win) == 1 and "segment_sum" in win[0]["op"] and win[0]["source"] == "tf-issue-54276"
    assert not any(e.get("platform") for e in recipes.select("2.11", "stock").raises)
    argmax = next(e for e in recipes.select("2.21", "stock").raises if "max_pool_with_argmax" in e["op"])
    assert "would settle" in argmax["unverified"]


def test_advice_is_shown_only_where_it_applies() -> None:
    ids = lambda tf: {a["id"] for a in recipes.select(tf, "stock").advice}  # noqa: E731
    assert "enable-op-determinism-before-2-8" in ids("2.4") and "enable-op-determinism-before-2-8" not in ids("2.8")
    assert {"pythonhashseed-in-script", "tf-use-cudnn-autotune"} <= ids("1.15") & ids("2.21")
    assert "jit-compile-true-keras3" in ids("2.16") and "jit-compile-true-keras3" not in ids("2.15")
    docs = (REPO / "docs" / "common-advice.md").read_text(encoding="utf-8")
    for a in recipes.table()["advice"]:
        anchor = a["doc"].split("#", 1)[1]
        assert a["doc"].startswith("docs/common-advice.md#") and f"#{anchor}" in _anchors(docs), a["id"]


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    import re

    out = set()
    for line in markdown.splitlines():
        if line.startswith("#"):
            text = line.lstrip("#").strip().lower()
            out.add("#" + re.sub(r"[^\w\- ]", "", text).replace(" ", "-"))
    return out


@pytest.mark.parametrize(
    "mutate, message",
    [
        (
            lambda d: d["raises_under_determinism"][0].update(platform="amiga"),
            "raises_under_determinism[0].platform: 'amiga' is not one of windows, linux, darwin",
        ),
        (
            lambda d: d["raises_under_determinism"][0].update(keras_min="3"),
            "raises_under_determinism[0].keras_min: '3' is not a version MAJOR.MINOR (null: open)",
        ),
        (
            lambda d: d["raises_under_determinism"][0].update(colour="red"),
            "raises_under_determinism[0]: unknown key 'colour'",
        ),
        (
            lambda d: d["ngc_overrides"][0].update(verdict="better"),
            "ngc_overrides[0].verdict: 'better' is not one of deterministic, nondeterministic, raises",
        ),
        (
            lambda d: d["ngc_overrides"][0].update(ngc_min="2020.3"),
            "ngc_overrides[0].ngc_min: '2020.3' is not an NGC release YY.MM (null: open)",
        ),
        (
            lambda d: d["advice"][0].update(doc="https://elsewhere"),
            "advice[0].doc: 'https://elsewhere' is not a page under docs/",
        ),
        (
            lambda d: d["advice"].append(dict(d["advice"][0])),
            "advice[8].id: 'enable-op-determinism-before-2-8' is the id of another advice or overridden",
        ),
        (lambda d: d["raises_under_determinism"][0].pop("apis"), "raises_under_determinism[0]: needs 'apis'"),
        (
            lambda d: d["raises_under_determinism"][0].update(apis="tf.math.segment_sum"),
            "raises_under_determinism[0].apis: must be a list",
        ),
        (
            lambda d: d["raises_under_determinism"][0].update(apis=["segment_sum"]),
            "raises_under_determinism[0].apis[0]: 'segment_sum' is not a Python name under tf. or keras",
        ),
        (
            lambda d: d["nondeterministic_under_determinism"][0].update(escape_hatch={}),
            "nondeterministic_under_determinism[0]: unknown key 'escape_hatch'",
        ),
        (
            lambda d: d["raises_under_determinism"][0]["escape_hatch"].update(colour="red"),
            "raises_under_determinism[0].escape_hatch: unknown key 'colour'",
        ),
        (
            lambda d: d["raises_under_determinism"][0]["escape_hatch"].update(name="not a var"),
            "raises_under_determinism[0].escape_hatch.name: 'not a var' is not an environment variable ",
        ),
        (
            lambda d: d["raises_under_determinism"][0]["escape_hatch"].update(source="nowhere"),
            "raises_under_determinism[0].escape_hatch.source: unknown source 'nowhere'",
        ),
        (
            lambda d: d["raises_under_determinism"][0].update(condition=1),
            "raises_under_determinism[0].condition: must be a string",
        ),
        (
            lambda d: d["raises_under_determinism"][0].update(xla="yes"),
            "raises_under_determinism[0].xla: must be true or false",
        ),
        (
            lambda d: d["raises_under_determinism"][0].update(context="somewhere"),
            "raises_under_determinism[0].context: 'somewhere' is not one of no_global_seed, parallel_ma",
        ),
        (
            lambda d: d["raises_under_determinism"][0].update(range_source="nowhere"),
            "raises_under_determinism[0].range_source: unknown source 'nowhere'",
        ),
        (
            lambda d: d["raises_under_determinism"][1]["work_around"].update(source="nowhere"),
            "raises_under_determinism[1].work_around.source: unknown source 'nowhere'",
        ),
        (
            lambda d: d["raises_under_determinism"][1]["work_around"].update(colour="red"),
            "raises_under_determinism[1].work_around: unknown key 'colour'",
        ),
        (
            lambda d: d["raises_under_determinism"][1]["api_conditions"].update({"tf.nn.relu": "x"}),
            "raises_under_determinism[1].api_conditions: names an API the entry does not list in apis",
        ),
        (
            lambda d: d["nondeterministic_under_determinism"][0].update(work_around={}),
            "nondeterministic_under_determinism[0]: unknown key 'work_around'",
        ),
        (
            lambda d: d["built_on"][0].update(calls="tf.nn.relu"),
            "built_on[0].calls: 'tf.nn.relu' is no API an op entry lists",
        ),
        (lambda d: d["built_on"][0].update(colour="red"), "built_on[0]: unknown key 'colour'"),
        (lambda d: d["common"]["caveats"][0].update(colour="red"), "common.caveats[0]: unknown key 'colour'"),
        (
            lambda d: d["sources"].update({"unused": {"title": "t", "url": "https://x"}}),
            "sources: defined but cited by nothing: ['unused']",
        ),
    ],
)
def test_schema_refuses_bad_new_entries(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    import copy

    data = copy.deepcopy(recipes.table())
    mutate(data)
    with pytest.raises(RecipeError, match="^recipes.json is invalid: " + re.escape(message)) as caught:
        recipes.validate(data)
    assert caught.value.hint and "recipes.schema.json" in caught.value.hint


def test_every_source_is_cited_and_the_structured_facts_have_sources() -> None:
    data = recipes.table()
    text = json.dumps({k: v for k, v in data.items() if k != "sources"})
    for sid in data["sources"]:
        assert f'"{sid}"' in text, sid
    raises = data["raises_under_determinism"]
    hatches = [e for e in raises if "escape_hatch" in e]
    assert hatches and all(e["escape_hatch"]["source"] in data["sources"] for e in hatches)
    segment = next(e for e in raises if "tf.math.unsorted_segment_sum" in e["apis"] and e["tf_min"] == "2.5")
    assert segment["escape_hatch"]["name"] == "TF_DISABLE_SEGMENT_REDUCTION_OP_DETERMINISM_EXCEPTIONS"
    svd = [e for e in raises if e["apis"] == ["tf.linalg.svd"]]
    assert [("condition" in e) for e in svd] == [False, True]
    assert {"tf.keras.layers.Embedding", "keras.layers.Embedding"} <= set(segment["apis"])
    assert {b["calls"] for b in recipes.built_on()} == {
        "tf.nn.sparse_softmax_cross_entropy_with_logits",
        "tf.nn.softmax_cross_entropy_with_logits",
        "keras.layers.MaxPooling2D",  # the keras.applications models that hold MaxPooling2D layers (Keras 3)
    }
    [apps] = [b for b in recipes.built_on() if b["calls"] == "keras.layers.MaxPooling2D"]
    assert "keras.applications.ResNet50" in apps["apis"] and apps["keras_min"] == "3.0"
    assert not any("MobileNet" in a or "EfficientNet" in a for a in apps["apis"])  # GlobalMaxPooling2D only
    assert "keras.losses.SparseCategoricalCrossentropy" in recipes.built_on()[0]["apis"]
    assert [c.get("context") for c in data["common"]["caveats"]].count("parallel_map") == 1


@pytest.mark.parametrize("kind", ["fifo", "folder", "broken"])
def test_an_unreadable_recipe_table_is_one_recipe_error_never_a_wait(kind: str, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from envpin.knowledge import schema

    make_unreadable(tmp_path / "recipes.json", kind)
    monkeypatch.setattr(schema, "shipped_data_path", lambda name: tmp_path / name)
    recipes.table.cache_clear()
    try:
        with pytest.raises(RecipeError, match="cannot be read" if kind != "broken" else "recipe table"):
            recipes.table()
    finally:
        recipes.table.cache_clear()
