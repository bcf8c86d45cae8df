"""The shipped tables (catalog, stock, recipes) are checked in full by this suite and recorded
(envpin/data/TABLE.checked); loading trusts only those exact bytes, without importing jsonschema, and checks every
other file in full."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from envpin.errors import CatalogError, RecipeError
from envpin.knowledge import catalog, catalogcheck, recipes, schema, stock, tablecheck

#: Each table's loader, called with its caches cleared.
LOADERS: dict[str, Callable[[], object]] = {
    "catalog": lambda: catalog.load(cache=False),
    "stock": stock.load,
    "recipes": recipes.table,
}


def _clear() -> None:
    catalog._load_file.cache_clear()
    catalog._with_cache.cache_clear()
    stock.load.cache_clear()
    recipes.table.cache_clear()


@pytest.mark.parametrize("table", schema.TABLES)
def test_each_shipped_table_passes_the_full_check_and_is_the_one_recorded(table: str) -> None:
    raw = schema.shipped_data_path(f"{table}.json").read_bytes()
    {"catalog": catalogcheck.validate, "stock": stock.validate, "recipes": recipes.validate}[table](
        json.loads(raw), f"the shipped {table}"
    )
    recorded = schema.record_path(table).read_text(encoding="ascii").strip()
    assert recorded == schema.digest(raw), (
        f"envpin/data/{table}.json changed since it was recorded: run `.venv/bin/python -m envpin.knowledge.tablecheck`"
    )


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The tables checked in full while loading (caches cleared before and after): jsonschema's validator asked
    for each."""
    seen: list[str] = []
    real = schema.validator

    def counting(table: str, ref: str = "#") -> object:
        seen.append(table)
        return real(table, ref)

    monkeypatch.setattr(schema, "validator", counting)
    _clear()
    yield seen
    _clear()


@pytest.mark.parametrize("table", schema.TABLES)
def test_a_recorded_shipped_table_loads_without_jsonschema(
    table: str, checks: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """jsonschema costs more to import than a command's own work: a recorded table never imports it."""
    for name in [m for m in sys.modules if m == "jsonschema" or m.startswith(("jsonschema.", "referencing"))]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "jsonschema", None)  # importing it now raises ImportError
    loaded = LOADERS[table]()
    assert checks == []
    if table == "catalog":
        assert isinstance(loaded, catalog.Catalog) and "20.02" in loaded.releases() and loaded.entries()
    elif table == "stock":
        assert isinstance(loaded, stock.StockCatalog) and loaded.select("2.20").tag == "2.20.0-gpu"
    else:
        assert recipes.select("2.1", "ngc", "20.02").env


def test_an_envpin_catalog_file_is_checked_in_full_even_when_identical(
    checks: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = tmp_path / "catalog.json"
    shutil.copyfile(catalog.shipped_catalog_path(), copy)
    monkeypatch.setenv(catalog.CATALOG_ENV, str(copy))
    catalog.load(cache=False)
    assert checks == ["catalog"]


@pytest.mark.parametrize("table", schema.TABLES)
def test_a_shipped_table_that_differs_from_its_record_is_checked_in_full(
    table: str, checks: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / f"{table}.checked"
    record.write_text("0" * 64 + "\n")
    monkeypatch.setattr(schema, "record_path", lambda name: record if name == table else tmp_path / "absent")
    LOADERS[table]()
    assert checks == [table]


@pytest.mark.parametrize("table", schema.TABLES)
def test_a_missing_record_means_a_full_check(
    table: str, checks: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(schema, "record_path", lambda name: tmp_path / "absent")
    LOADERS[table]()
    assert checks == [table]


@pytest.mark.parametrize("kind", ["fifo", "folder", "oversized"])
def test_a_record_that_is_no_regular_small_file_means_a_full_check_never_a_wait(
    kind: str, checks: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    record = tmp_path / "catalog.checked"
    if kind == "fifo":
        os.mkfifo(record)
    elif kind == "folder":
        record.mkdir()
    else:  # the right digest, then more: not the one-line record
        digest = schema.record_path("catalog").read_text(encoding="ascii").strip()
        record.write_text(digest + "\n" + " " * 4096)
    monkeypatch.setattr(schema, "record_path", lambda name: record)
    catalog.load(cache=False)
    assert checks == ["catalog"]


@pytest.mark.parametrize(
    ("table", "error"), [("catalog", CatalogError), ("stock", CatalogError), ("recipes", RecipeError)]
)
def test_recording_refuses_an_invalid_file_and_writes_nothing(
    table: str, error: type[Exception], tmp_path: Path
) -> None:
    bad, record = tmp_path / f"{table}.json", tmp_path / f"{table}.checked"
    bad.write_text('{"schema": 1}')
    with pytest.raises(error, match=f"{table} file {bad} is invalid: "):
        tablecheck.record(table, bad, record)
    assert not record.exists()


def test_recording_a_valid_file_writes_its_digest(tmp_path: Path) -> None:
    source, record = schema.shipped_data_path("stock.json"), tmp_path / "stock.checked"
    assert tablecheck.record("stock", source, record) == schema.digest(source.read_bytes())
    assert record.read_text(encoding="ascii") == schema.digest(source.read_bytes()) + "\n"


# -- the user's image-facts cache: envpin's own file, recorded when envpin writes it -------------------------------
_IMAGE = {
    "digest": "sha256:" + "a" * 64,
    "created": None,
    "registry": "nvcr.io/nvidia/tensorflow",
    "declared": {"cuda": "10.2.89", "driver_compat": ["418"]},
    "source": "image config",
}


def test_a_saved_image_facts_cache_is_read_back_without_a_second_check(checks: list[str], tmp_path: Path) -> None:
    from envpin.knowledge import facts

    path = facts.save("nvcr.io/nvidia/tensorflow", {"20.02-tf2-py3": _IMAGE}, tmp_path / "image-facts.json")
    assert checks == ["catalog"]  # save checked the new object against the catalog schema's image
    assert schema.matches_record(facts.record_path(path), path.read_bytes())
    checks.clear()
    got = facts.read("nvcr.io/nvidia/tensorflow", path)
    assert checks == [] and got.problems == ()
    assert got.images[("nvcr.io/nvidia/tensorflow", "20.02-tf2-py3")]["declared"] == _IMAGE["declared"]


def test_an_image_facts_cache_edited_after_it_was_recorded_is_checked_in_full(
    checks: list[str], tmp_path: Path
) -> None:
    from envpin.knowledge import facts

    path = facts.save("nvcr.io/nvidia/tensorflow", {"20.02-tf2-py3": _IMAGE}, tmp_path / "image-facts.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    (entry,) = data["images"].values()
    entry["declared"]["cuda"] = 10.2  # a number where the schema wants a string
    path.write_text(json.dumps(data), encoding="utf-8")
    checks.clear()
    got = facts.read("nvcr.io/nvidia/tensorflow", path)
    assert checks == ["catalog"] and got.images == {}
    assert got.problems and "declared.cuda: must be a string" in got.problems[0], got.problems
