"""The shape of envpin's data tables: JSON Schema files beside them, checked with the ``jsonschema`` package.

``envpin/data/catalog.schema.json``, ``stock.schema.json`` and ``recipes.schema.json`` (Draft 2020-12) say what
each table may hold: the JSON types, the keys an object needs and may have, the words a field may take, the
patterns of versions and releases. Editors use them (each table names its schema in ``$schema``) and
``jsonschema`` checks every table against them, so a table has one description of its shape and one validator.
What a schema cannot say (a source that must exist, a value its tag names, ranks between grades) stays as code
beside each loader: the cross-field rules.

``jsonschema`` costs about 0.15 s to import, more than a command's own work, so a table is checked in full once
and its bytes recorded: the tests and ``python -m envpin.knowledge.tablecheck`` check each shipped table and
write its SHA-256 to ``envpin/data/TABLE.checked``. A loader trusts a table whose bytes hash to its record
(`recorded`) without importing ``jsonschema``, and checks anything else in full here, importing it at that
moment: a catalog named by ENVPIN_CATALOG, an edited install, the image objects of the user's image-facts cache
(unless they are the bytes envpin last wrote and recorded, envpin.knowledge.facts).

Each problem is one phrase, ``where: what``: ``where`` the place in the table that jsonschema's error names
(``releases['20.02'].flavors.tf2``), ``what`` worded from the keyword that failed (`_phrase`; jsonschema's own
message quotes whole values, a table's worth on one line, and changes between its versions).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from pathlib import Path

from envpin.errors import EnvpinError, shown

TYPE_CHECKING = False  # typing's, without importing typing (annotations are strings here)
if TYPE_CHECKING:
    from typing import Any

    from jsonschema.exceptions import ValidationError
    from jsonschema.protocols import Validator

#: The shipped tables, each envpin/data/TABLE.json with TABLE.schema.json and TABLE.checked beside it.
TABLES = ("catalog", "stock", "recipes")
#: What each JSON type is called in a phrase.
_TYPES = {
    "object": "an object",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


def shipped_data_path(name: str) -> Path:
    """A data file shipped inside the package (envpin/data/NAME): beside the package's own files when they are
    on disk (no importlib.resources, whose readers cost ~4 ms of every start-up), else as a package resource."""
    import envpin

    here = Path(envpin.__file__).parent if getattr(envpin, "__file__", None) else None
    if here is not None and here.is_dir():
        return here / "data" / name
    from importlib import resources

    return Path(str(resources.files("envpin") / "data" / name))


def schema_path(table: str) -> Path:
    """envpin/data/TABLE.schema.json: the schema of the shipped table TABLE.json, shipped beside it."""
    return shipped_data_path(f"{table}.schema.json")


def record_path(table: str) -> Path:
    """envpin/data/TABLE.checked: the SHA-256 of TABLE.json as last checked in full (envpin.knowledge.tablecheck)."""
    return shipped_data_path(f"{table}.checked")


def digest(raw: bytes) -> str:
    """What a record holds: the SHA-256 of a table file's bytes, in hex."""
    import hashlib

    return hashlib.sha256(raw).hexdigest()


def recorded(table: str, raw: bytes) -> bool:
    """`raw` is byte for byte the shipped TABLE.json that last passed the full check: its digest is the record's."""
    return matches_record(record_path(table), raw)


def matches_record(record: Path, raw: bytes) -> bool:
    """The file `record` holds the digest of `raw`. A record that is missing, no small regular file, or anything
    but a digest and a newline is no record (the data is then checked in full)."""
    from envpin.files.read import read_regular

    try:
        held = read_regular(record, 128).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return False
    return digest(raw) == held


def write_record(record: Path, raw: bytes) -> None:
    """Record that `raw` passed the full check (atomically: a reader sees the old record or the new one)."""
    from envpin.files.write import atomic_write

    atomic_write(record, (digest(raw) + "\n").encode("ascii"))


@cache
def load(table: str) -> dict[str, Any]:
    """The schema of TABLE (catalog, stock, recipes), as its file holds it."""
    schema: dict[str, Any] = json.loads(schema_path(table).read_text(encoding="utf-8"))
    return schema


@cache
def validator(table: str, ref: str = "#") -> Validator:
    """A Draft 2020-12 validator of the schema `ref` names in TABLE's schema file ("#", "#/$defs/image"), with
    every shipped schema registered under its file name, so `catalog.schema.json#/$defs/textFact` in the stock
    schema resolves as an editor resolves it. Imports jsonschema (the first call of a process pays for it)."""
    import jsonschema
    from referencing import Registry, Resource

    registry: Registry[Any] = Registry().with_resources(
        (f"{name}.schema.json", Resource.from_contents(load(name))) for name in TABLES
    )
    return jsonschema.Draft202012Validator({"$ref": f"{table}.schema.json{ref}"}, registry=registry)


def problems(data: Any, table: str, ref: str = "#") -> Iterator[str]:
    """Each way `data` breaks the schema of `table` (at `ref`, e.g. "#/$defs/image"), one phrase each, in the
    order jsonschema finds them (the same phrase for one place is given once)."""
    seen: set[str] = set()
    for error in validator(table, ref).iter_errors(data):
        place = ""
        for key in error.absolute_path:
            place = where(place, key)
        what = _phrase(error)
        if _about_a_key(error):  # propertyNames checks each key as the instance, at the object's place
            what = f"key {what}"
        found = f"{place}: {what}" if place else what
        if found not in seen:
            seen.add(found)
            yield found


def validate(
    data: Any,
    table: str,
    origin: str,
    error: type[EnvpinError],
    cross: Callable[[Any], Iterable[str]],
    hint: str | None = None,
) -> None:
    """Refuse `data` as one `error` naming its first problem and how many more there are: the schema's first,
    then (for data of the right shape, which the rules may rely on) those of `cross`, the table's cross-field
    rules. The hint names the schema unless the caller knows a better one."""
    found = list(problems(data, table)) or list(cross(data))
    if found:
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise error(
            f"{origin} is invalid: {found[0]}{more}",
            hint=hint or f"compare it with its JSON Schema, {schema_path(table)}",
        )


def where(path: str, key: Any) -> str:
    """`path` one level down: `.name` for a plain name, `['20.02']` for any other key, `[3]` for an index."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if key.isascii() and key.isidentifier():
        return f"{path}.{key}" if path else key
    return f"{path}[{shown(key)!r}]"


def _about_a_key(error: ValidationError) -> bool:
    """The error is about a key of an object (the schema's propertyNames), not a value."""
    steps = list(error.absolute_schema_path)
    return any(s == "propertyNames" and (n == 0 or steps[n - 1] != "properties") for n, s in enumerate(steps))


def _shown(value: Any) -> str:
    return repr(shown(value)) if isinstance(value, str) else shown(json.dumps(value))


def _plural(n: Any, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _phrase(error: ValidationError) -> str:
    """What is wrong, worded from the keyword jsonschema found broken and the schema's own text (a pattern's
    `description` names what the pattern means); a keyword the schemas do not use keeps jsonschema's message."""
    kind = error.validator
    want: Any = error.validator_value  # the keyword's own value in the schema (set on every error jsonschema yields)
    value: Any = error.instance
    schema = error.schema if isinstance(error.schema, dict) else {}
    if kind == "type":
        return "must be " + " or ".join(_TYPES.get(t, t) for t in ([want] if isinstance(want, str) else want))
    if kind == "const":
        return f"must be {json.dumps(want)}, not {_shown(value)}"
    if kind == "enum":
        return f"{_shown(value)} is not one of {', '.join(map(str, want))}"
    if kind == "pattern":
        return f"{_shown(value)} is not {schema.get('description') or 'of the form ' + want}"
    if kind == "minLength":
        return "must not be empty" if want == 1 else f"must have at least {_plural(want, 'character')}"
    if kind == "minItems":
        return f"needs at least {_plural(want, 'item')}"
    if kind == "minProperties":
        return f"needs at least {_plural(want, 'key')}"
    if kind == "uniqueItems":
        return "lists an item twice"
    if kind == "required":  # one error per missing key, each naming every one: given once (problems)
        return "needs " + ", ".join(repr(k) for k in want if k not in value)
    if kind == "additionalProperties" and "patternProperties" not in schema:
        allowed = list(schema.get("properties", {}))
        extra = [k for k in value if k not in allowed]
        return (
            f"unknown key{'' if len(extra) == 1 else 's'} {', '.join(_shown(k) for k in extra)} "
            f"(allowed: {', '.join(allowed) or 'none'})"
        )
    return shown(error.message, 200)
