"""The data tables' JSON Schemas (envpin/data/*.schema.json): valid Draft 2020-12 schemas that the shipped tables
satisfy, checked with the `jsonschema` package (envpin.knowledge.schema, the one validator); broken tables fail in
one line naming the place; and the names the code keeps beside the schemas are the schemas' names."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envpin.errors import CatalogError, RecipeError, shown
from envpin.knowledge import catalogcheck, imageconfig, recipes, schema, stock
from envpin.knowledge.fields import FIELDS, IMAGE_SOURCE
from envpin.probe import runtime
from tests.props import examples

TABLES = schema.TABLES
CHECKS = {"catalog": catalogcheck.validate, "stock": stock.validate, "recipes": recipes.validate}


def _data(table: str) -> Any:
    return json.loads(schema.shipped_data_path(f"{table}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("table", TABLES)
def test_each_schema_is_a_draft_2020_12_schema_the_shipped_table_satisfies(table: str) -> None:
    jsonschema.Draft202012Validator.check_schema(schema.load(table))
    data = _data(table)
    assert list(schema.validator(table).iter_errors(data)) == []
    CHECKS[table](data, table)  # the cross-field rules too
    # The table names its schema for editors, a file beside it in the package.
    assert data["$schema"] == f"{table}.schema.json" and (schema.schema_path(table).parent / data["$schema"]).is_file()


def _patterns(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in ([v] if k == "pattern" else _patterns(v))]
    return [p for v in node for p in _patterns(v)] if isinstance(node, list) else []


@pytest.mark.parametrize("table", TABLES)
def test_a_pattern_anchored_at_the_end_refuses_a_final_newline_as_ecma_262_does(table: str) -> None:
    """Python's `$` (jsonschema's re) also matches before a final newline, ECMA-262's (an editor's) does not: every
    pattern that ends in `$` is followed by a lookahead that refuses the newline, so both read it alike."""
    ended = [p for p in _patterns(schema.load(table)) if "$" in p]
    assert ended and all(p.endswith("$(?!\\n)") for p in ended), ended
    for pattern in ended:
        fits = [text for text in _FITTING if re.search(pattern, text)]
        assert fits and not any(re.search(pattern, text + "\n") for text in fits), pattern


#: A value of each anchored pattern's kind: a release, a version, a variable, an API, a date.
_FITTING = ("20.02", "2.1", "TF_DETERMINISTIC_OPS", "tf.nn.relu", "2020-01-01")


# -- broken tables: the schema refuses them, and the loader says where in one line ------------------------------
BROKEN = [
    ("catalog", lambda d: d.__setitem__("schema", "2"), CatalogError, "schema: must be 2, not '2'"),
    ("catalog", lambda d: d.pop("notes"), CatalogError, "needs 'notes'"),
    ("catalog", lambda d: d["releases"]["20.03"].__setitem__("flavors", {}), CatalogError, "flavors: needs at least 1"),
    ("catalog", lambda d: d["missing_months"].__setitem__("2020.4", {"reason": "r"}), CatalogError, "key '2020.4'"),
    (
        "catalog",
        lambda d: d["releases"]["20.03"]["fields"]["cuda"].__setitem__("value", ["10.2"]),
        CatalogError,
        "fields.cuda.value: must be a string or null",
    ),
    (
        "catalog",
        lambda d: d["releases"]["20.03"]["fields"]["driver_compat"].__setitem__("value", "418"),
        CatalogError,
        "fields.driver_compat.value: must be a list or null",
    ),
    ("catalog", lambda d: d["releases"]["20.03"]["fields"].__setitem__("gpu", {"value": None}), CatalogError, "'gpu'"),
    ("stock", lambda d: d.__setitem__("image_repository", "tensorflow/tensorflow"), CatalogError, "image_repository"),
    ("stock", lambda d: d["tags"]["2.20.0-gpu"]["fields"].pop("cudnn"), CatalogError, "fields: needs 'cudnn'"),
    ("stock", lambda d: d["tags"]["2.20.0-gpu"].__setitem__("published", []), CatalogError, "needs at least 1 item"),
    (
        "stock",
        lambda d: d["tags"]["2.20.0-gpu"]["fields"]["cuda"].__setitem__("also", ["x", "x"]),
        CatalogError,
        "twice",
    ),
    ("recipes", lambda d: d["recipes"][0]["match"].__setitem__("distribution", "conda"), RecipeError, "'conda'"),
    ("recipes", lambda d: d["recipes"][0]["steps"][0].__setitem__("step", "pray"), RecipeError, "'pray' is not one of"),
    ("recipes", lambda d: d["common"]["env"][0].__setitem__("value", 0), RecipeError, "value: must be a string"),
    ("recipes", lambda d: d["advice"][0].__setitem__("tf_max", "2"), RecipeError, "'2' is not a version MAJOR.MINOR"),
    ("recipes", lambda d: d["advice"][0].__setitem__("tf_max", "2.1\n"), RecipeError, "tf_max: '2.1\\\\n' is not a"),
    (
        "catalog",
        lambda d: d["missing_months"].__setitem__("20.04\n", d["missing_months"].pop("20.04")),
        CatalogError,
        "missing_months: key '20.04\\\\n' is not an NGC release YY.MM",
    ),
]


@pytest.mark.parametrize("table, mutate, error, message", BROKEN)
def test_a_broken_table_fails_the_schema_and_the_loader_says_where_in_one_line(  # type: ignore[no-untyped-def]
    table: str, mutate, error: type[Exception], message: str
) -> None:
    data = copy.deepcopy(_data(table))
    mutate(data)
    assert not schema.validator(table).is_valid(data)  # the schema refuses it, not a cross-field rule
    with pytest.raises(error) as caught:
        CHECKS[table](data)
    text = caught.value.message  # type: ignore[attr-defined]
    assert message in text and "\n" not in text, text
    assert caught.value.hint and f"{table}.schema.json" in caught.value.hint  # type: ignore[attr-defined]


def _paths(node: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON document (dict keys and list indexes), the root included."""
    out = [at]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*at, key))
    elif isinstance(node, list):
        for n, value in enumerate(node):
            out += _paths(value, (*at, n))
    return out


_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from(["", "2.1", "2.1\n", "x", "20.02", "https://a", "usage", "\x1b[2J" * 40]),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(["value", "source", "x"]), inner, max_size=2)
    ),
    max_leaves=4,
)


def _release() -> Any:
    """One release of the catalog (a whole catalog takes 0.05 s to check), with an image object in a flavor."""
    rel = copy.deepcopy(_data("catalog")["releases"]["20.03"])
    rel["flavors"]["tf2"]["image"] = {
        "digest": "sha256:" + "a" * 64,
        "created": None,
        "registry": "nvcr.io/nvidia/tensorflow",
        "declared": {"cuda": "10.2.89", "driver_compat": ["418"]},
        "source": IMAGE_SOURCE,
    }
    return rel


#: (table, where in its schema, document): small enough to change and check 150 times.
_DOCS = {
    "stock": ("stock", "#", _data("stock")),
    "recipes": ("recipes", "#", _data("recipes")),
    "catalog release": ("catalog", "#/$defs/releaseEntry", _release()),
}
_PLACES = {name: _paths(doc) for name, (_, _, doc) in _DOCS.items()}


@settings(max_examples=examples(150), deadline=None)
@given(
    name=st.sampled_from(sorted(_DOCS)),
    choice=st.data(),
    value=_JSON,
    change=st.sampled_from(["replace", "drop", "empty", "repeat"]),
)
def test_every_problem_jsonschema_finds_is_one_short_line_naming_its_place(
    name: str, choice: st.DataObject, value: Any, change: str
) -> None:
    """Any one change to a shipped table (a value replaced, a key or item removed, a text emptied, a list's first
    item repeated): envpin reports a problem exactly when jsonschema finds one, each as one printable line that
    starts with the place jsonschema's error names."""
    table, ref, doc = _DOCS[name]
    data = copy.deepcopy(doc)
    place = choice.draw(st.sampled_from(_PLACES[name]))
    parent = {"": data}
    key: Any = ""
    for step in place:
        parent, key = parent[key], step
    if change == "drop" and place:
        del parent[key]
    elif change == "empty" and isinstance(parent[key], str):
        parent[key] = ""
    elif change == "repeat" and isinstance(parent[key], list) and parent[key]:
        parent[key].append(copy.deepcopy(parent[key][0]))
    else:
        parent[key] = value
    data = parent[key] if not place else data
    errors = list(schema.validator(table, ref).iter_errors(data))
    found = list(schema.problems(data, table, ref))
    assert bool(found) == bool(errors)
    for problem in found:
        assert problem.isprintable() and len(problem) < 600, problem
    first = errors[0] if errors else None
    if first is not None and first.absolute_path:
        at = ""
        for step in first.absolute_path:
            at = schema.where(at, step)
        assert found[0].startswith(at + ": "), (found[0], at)


def test_a_keyword_the_schemas_do_not_use_keeps_jsonschemas_message() -> None:
    (error,) = jsonschema.Draft202012Validator({"maxLength": 1}).iter_errors("abc")
    assert schema._phrase(error) == shown(error.message, 200)


# -- the names the code keeps beside the schemas ------------------------------------------------------------------
def test_the_code_and_the_schemas_name_the_same_things() -> None:
    cat, stk, rec = (schema.load(t) for t in TABLES)
    fields = cat["$defs"]["fields"]["properties"]
    assert tuple(fields) == FIELDS  # display order too
    assert {n for n, s in fields.items() if s["$ref"].endswith("listFact")} == {"driver_compat"}
    assert set(cat["$defs"]["source"]["properties"]["kind"]["enum"]) == catalogcheck.SOURCE_KINDS
    image = cat["$defs"]["image"]["properties"]
    assert image["source"]["const"] == IMAGE_SOURCE
    assert {*imageconfig.ENV_KEYS, "cuda_min"} <= set(image["declared"]["properties"])
    assert stk["$defs"]["source"]["properties"]["kind"]["enum"] == [*stock.KINDS, "usage"]
    assert tuple(stk["$defs"]["tag"]["properties"]["fields"]["required"]) == stock.RECORDED
    match = rec["properties"]["recipes"]["items"]["properties"]["match"]["properties"]
    assert tuple(match["distribution"]["enum"]) == recipes.DISTRIBUTIONS


class _AnyModule:
    """Stands in for TensorFlow and Keras: every attribute exists and every call does nothing."""

    def __getattr__(self, name: str) -> _AnyModule:
        return _AnyModule()

    def __call__(self, *args: object, **kwargs: object) -> None:
        return None


def test_every_step_the_schema_allows_is_one_the_runtime_helper_performs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The runtime helper refuses a step it does not know (ValueError); it knows every one the schema allows."""
    import random
    import sys

    steps = schema.load("recipes")["properties"]["recipes"]["items"]["properties"]["steps"]["items"]
    for module in ("numpy", "fwr13y", "keras"):  # not imported here: each step says it is missing
        monkeypatch.setitem(sys.modules, module, None)
    state = random.getstate()
    try:
        with pytest.raises(ValueError, match="unknown"):
            runtime._step("pray", 7, _AnyModule(), {"applied": [], "skipped": [], "warnings": []})
        for name in steps["properties"]["step"]["enum"]:
            runtime._step(name, 7, _AnyModule(), {"applied": [], "skipped": [], "warnings": []})
    finally:
        random.setstate(state)
