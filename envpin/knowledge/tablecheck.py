"""Check every shipped table in full and record it: ``python -m envpin.knowledge.tablecheck``.

For each of envpin/data/catalog.json, stock.json and recipes.json: the JSON Schema (jsonschema), then the
table's cross-field rules, then its SHA-256 written to envpin/data/TABLE.checked, which lets a loader trust those
exact bytes without importing jsonschema (envpin.knowledge.schema). One record per table: editing one table
rewrites only its own record, and each loader reads only the record of the table it loads.
tests/unit/test_catalog_checked.py fails while a record and its table differ.

A module of its own because it imports every table's loader: the catalog's rules (envpin.knowledge.catalogcheck)
are imported by the catalog, which the stock table imports, so they cannot import the stock table back.
"""

from __future__ import annotations

from pathlib import Path

from envpin.knowledge import catalogcheck, recipes, schema, stock


def record(table: str, path: Path | None = None, record_path: Path | None = None) -> str:
    """Check the table file at `path` (default: the shipped TABLE.json) in full, its schema and its cross-field
    rules, then record its digest (default: in envpin/data/TABLE.checked) and return it; the table's error
    (CatalogError, RecipeError) if it is invalid, and nothing written."""
    import json

    check = {"catalog": catalogcheck.validate, "stock": stock.validate, "recipes": recipes.validate}[table]
    path = path or schema.shipped_data_path(f"{table}.json")
    raw = path.read_bytes()
    check(json.loads(raw.decode("utf-8")), f"{table} file {path}")
    schema.write_record(record_path or schema.record_path(table), raw)
    return schema.digest(raw)


if __name__ == "__main__":  # the records are the output: nothing is printed
    for name in schema.TABLES:
        record(name)
