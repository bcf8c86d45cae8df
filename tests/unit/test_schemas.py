"""The data tables' JSON Schemas (envpin/data/*.schema.json): valid Draft 2020-12 schemas that the shipped tables
satisfy, checked with the `jsonschema` package; the loaders' own reading of them (envpin.knowledge.schema) gives
the same verdict on broken tables; and the names the code keeps beside them are the schemas' names."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from referencing import Registry, Resource

from envpin.errors import CatalogError, RecipeError
from envpin.knowledge import catalogcheck, imageconfig, recipes, schema, stock
from envpin.knowledge.fields import FIELDS, IMAGE_SOURCE
from envpin.probe import runtime

TABLES = ("catalog", "stock", "recipes")


def _registry() -> Registry:  # type: ignore[type-arg]
    """Every schema by its file name, so `catalog.schema.json#/$defs/textFact` resolves as an editor does."""
    return Registry().with_resources((f"{t}.schema.json", Resource.from_contents(schema.load(t))) for t in TABLES)


def _validator(table: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema.load(table), registry=_registry())


def _data(table: str) -> Any:
    return json.loads(schema.shipped_data_path(f"{table}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("table", TABLES)
def test_each_schema_is_a_draft_2020_12_schema_the_shipped_table_satisfies(table: str) -> None:
    jsonschema.Draft202012Validator.check_schema(schema.load(table))
    data = _data(table)
    assert list(_validator(table).iter_errors(data)) == []
    assert list(schema.problems(data, table)) == []
    # The table names its schema for editors, a file beside it in the package.
    assert data["$schema"] == f"{table}.schema.json" and (schema.schema_path(table).parent / data["$schema"]).is_file()


def test_the_schemas_use_only_the_keywords_envpin_reads() -> None:
    for table in TABLES:
        used = schema._keywords(schema.load(table))
        assert used <= schema.KEYWORDS | schema.ANNOTATIONS, table


def test_a_schema_with_a_keyword_envpin_does_not_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A keyword this module does not check would be ignored silently: loading such a schema is an error."""
    bad = {"$schema": schema.DIALECT, "type": "object", "dependentRequired": {"a": ["b"]}}
    (tmp_path / "t.schema.json").write_text(json.dumps(bad), encoding="utf-8")
    monkeypatch.setattr(schema, "shipped_data_path", lambda name: tmp_path / name)
    schema.load.cache_clear()
    try:
        with pytest.raises(ValueError, match="dependentRequired"):
            schema.load("t")
    finally:
        schema.load.cache_clear()


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
]


@pytest.mark.parametrize("table, mutate, error, message", BROKEN)
def test_a_broken_table_fails_the_schema_and_the_loader_says_where_in_one_line(  # type: ignore[no-untyped-def]
    table: str, mutate, error: type[Exception], message: str
) -> None:
    data = copy.deepcopy(_data(table))
    mutate(data)
    assert not _validator(table).is_valid(data)
    check = {"catalog": catalogcheck.validate, "stock": stock.validate, "recipes": recipes.validate}[table]
    with pytest.raises(error) as caught:
        check(data)
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
    st.none() | st.booleans() | st.integers(-3, 3) | st.sampled_from(["", "2.1", "x", "20.02", "https://a", "usage"]),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.sampled_from(["value", "source", "x"]), inner, max_size=2)
    ),
    max_leaves=4,
)


def _release() -> Any:
    """One release of the catalog (a whole catalog takes 0.1 s to check), with an image object in a flavor."""
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


@settings(max_examples=300, deadline=None)
@given(
    name=st.sampled_from(sorted(_DOCS)),
    choice=st.data(),
    value=_JSON,
    change=st.sampled_from(["replace", "drop", "empty", "repeat"]),
)
def test_the_loader_reads_the_schema_as_jsonschema_does(
    name: str, choice: st.DataObject, value: Any, change: str
) -> None:
    """Any one change to a shipped table (a value replaced, a key or item removed, a text emptied, a list's first
    item repeated): envpin's reading of the schema finds a problem exactly when `jsonschema` does."""
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
    check = jsonschema.Draft202012Validator({"$ref": f"{table}.schema.json{ref}"}, registry=_registry())
    valid = check.is_valid(data)
    assert bool(list(schema.problems(data, table, ref))) == (not valid)
    # Both passes read the schema alike: the quick one that only asks, and the one that names what is wrong.
    node, root = schema._resolve(schema.load(table), f"{table}.schema.json{ref}")
    assert schema._holds(data, node, root) == valid == (not list(schema._check(data, node, root, "")))


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
