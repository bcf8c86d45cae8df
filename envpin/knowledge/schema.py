"""The shape of envpin's data tables: JSON Schema files beside them, read with the standard library.

``envpin/data/catalog.schema.json``, ``stock.schema.json`` and ``recipes.schema.json`` (Draft 2020-12) say what
each table may hold: the JSON types, the keys an object needs and may have, the words a field may take, the
patterns of versions and releases. Editors use them (each table names its schema in ``$schema``), the tests
validate the shipped tables with the ``jsonschema`` package, and the loaders check every table they read
against them here, so a table has one description of its shape. What a schema cannot say (a source that
must exist, a value its tag names, ranks between grades) stays as code beside each loader: the cross-field rules.

The ``jsonschema`` package costs 0.3 s to import, more than every command's own work, so this module
interprets the few keywords the three schemas use (KEYWORDS), with the same meaning; a schema that uses any
other is refused, so none is ever silently ignored (tests/unit/test_schemas.py compares the verdicts with
``jsonschema``'s on the shipped tables and on broken ones). Each problem is one phrase, ``where: what``, with
``where`` the path into the table (``releases['20.02'].flavors.tf2``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from pathlib import Path

from envpin.errors import EnvpinError, shown

TYPE_CHECKING = False  # typing's, without importing typing (annotations are strings here)
if TYPE_CHECKING:
    from typing import Any

#: The keywords checked here; annotations (title, description, $comment, ...) are read only for messages.
KEYWORDS = frozenset(
    {
        "$ref",
        "type",
        "enum",
        "const",
        "properties",
        "required",
        "additionalProperties",
        "propertyNames",
        "minProperties",
        "items",
        "minItems",
        "uniqueItems",
        "minLength",
        "pattern",
    }
)
ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "$comment", "title", "description", "examples", "default"})
#: The dialect every schema file declares.
DIALECT = "https://json-schema.org/draft/2020-12/schema"
_TYPES = {
    "object": "an object",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


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


@cache
def load(table: str) -> dict[str, Any]:
    """The schema of TABLE (catalog, stock, recipes); a ValueError names a keyword this module cannot check."""
    schema: dict[str, Any] = json.loads(schema_path(table).read_text(encoding="utf-8"))
    unknown = sorted(_keywords(schema) - KEYWORDS - ANNOTATIONS)
    if unknown or schema.get("$schema") != DIALECT:
        raise ValueError(f"{table}.schema.json: not a Draft 2020-12 schema of the keywords envpin checks: {unknown}")
    return schema


def _keywords(schema: Any) -> set[str]:
    """Every keyword used anywhere in `schema` (the names under properties and $defs are not keywords)."""
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, sub in schema.items():
            found.add(key)
            if key in ("properties", "$defs"):
                for part in sub.values():
                    found |= _keywords(part)
            elif isinstance(sub, dict) and key not in ("const", "default"):
                found |= _keywords(sub)
    return found


def problems(data: Any, table: str, ref: str = "#") -> Iterator[str]:
    """Each way `data` breaks the schema of `table` (at `ref`, e.g. "#/$defs/image"), one phrase each. A first
    pass only asks whether it holds (what a sound table needs, 1.5 ms for the recipe table); the one that
    names the problems runs only when it does not."""
    node, root = _resolve(load(table), f"{table}.schema.json{ref}")
    if not _holds(data, node, root):
        yield from _check(data, node, root, "")


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
    """`path` one level down: `.name` for a plain name, `['20.02']` for any other key."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if _NAME.match(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{shown(key)!r}]"


#: (id of a loaded schema, $ref) -> what _resolve found: the schemas load once (`load` keeps them).
_RESOLVED: dict[tuple[int, str], tuple[dict[str, Any], dict[str, Any]]] = {}


def _resolve(root: dict[str, Any], ref: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The schema `ref` names, and the root of its file: "#/$defs/fact" in `root`'s own file,
    "catalog.schema.json#/$defs/fact" in another schema beside it."""
    key = (id(root), ref)
    found = _RESOLVED.get(key)
    if found is None:
        found = _RESOLVED[key] = _find(root, ref)
    return found


def _find(root: dict[str, Any], ref: str) -> tuple[dict[str, Any], dict[str, Any]]:
    name, _, pointer = ref.partition("#")
    if name:
        root = load(name.removesuffix(".schema.json"))
    node: Any = root
    for part in pointer.strip("/").split("/") if pointer.strip("/") else ():
        node = node[part]
    return node, root


def _at(path: str) -> str:
    return f"{path}: " if path else ""


def _named(schema: dict[str, Any], fallback: str) -> str:
    """What a value must be, as its schema's description says it (a noun phrase), else `fallback`."""
    return str(schema.get("description") or fallback)


def _shown(value: Any) -> str:
    return repr(shown(value)) if isinstance(value, str) else shown(json.dumps(value))


#: The Python types of each JSON type (true and false are no integers or numbers: see _is_type).
_PYTHON: dict[str, type | tuple[type, ...]] = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
    "integer": (int, float),
    "number": (int, float),
}


def _holds(value: Any, schema: dict[str, Any], root: dict[str, Any]) -> bool:
    """Whether `value` satisfies `schema`: the same checks as _check, without a word about what is wrong."""
    ref = schema.get("$ref")
    if ref is not None and not _holds(value, *_resolve(root, ref)):
        return False
    types = schema.get("type")
    if types is not None:
        if isinstance(types, str):
            if not isinstance(value, _PYTHON[types]) or not _is_type(value, types):
                return False
        elif not any(_is_type(value, t) for t in types):
            return False
    if ("const" in schema and not _same(value, schema["const"])) or (
        "enum" in schema and not any(_same(value, e) for e in schema["enum"])
    ):
        return False
    if isinstance(value, str):
        return len(value) >= schema.get("minLength", 0) and (
            "pattern" not in schema or _regex(schema["pattern"]).search(value) is not None
        )
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            return False
        if schema.get("uniqueItems") and len({json.dumps(v, sort_keys=True) for v in value}) < len(value):
            return False
        items = schema.get("items")
        return items is None or all(_holds(v, items, root) for v in value)
    if isinstance(value, dict):
        if len(value) < schema.get("minProperties", 0) or any(k not in value for k in schema.get("required", ())):
            return False
        names = schema.get("propertyNames")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            if names is not None and not _holds(key, names, root):
                return False
            sub = props.get(key)
            if sub is None:
                if extra is False:
                    return False
                sub = extra if isinstance(extra, dict) else None
            if sub is not None and not _holds(item, sub, root):
                return False
    return True


def _is_type(value: Any, name: str) -> bool:
    if name == "object":
        return isinstance(value, dict)
    if name == "array":
        return isinstance(value, list)
    if name == "string":
        return isinstance(value, str)
    if name == "boolean":
        return isinstance(value, bool)
    if name == "null":
        return value is None
    if isinstance(value, bool):
        return False
    if name == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    return isinstance(value, (int, float))  # number


def _same(a: Any, b: Any) -> bool:
    """JSON equality: true is not 1, 1.0 is 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return a == b  # type: ignore[no-any-return]


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    """An ECMA-262 pattern as Python reads it: a final `$` is the end of the text (Python's `$` also
    matches before a final newline)."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


def _check(value: Any, schema: dict[str, Any], root: dict[str, Any], path: str) -> Iterator[str]:
    if "$ref" in schema:
        yield from _check(value, *_resolve(root, schema["$ref"]), path)
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else types
        if not any(_is_type(value, t) for t in names):
            yield f"{_at(path)}must be {' or '.join(_TYPES[t] for t in names)}"
            return
    if "const" in schema and not _same(value, schema["const"]):
        yield f"{_at(path)}must be {json.dumps(schema['const'])}, not {_shown(value)}"
        return
    if "enum" in schema and not any(_same(value, e) for e in schema["enum"]):
        yield f"{_at(path)}{_shown(value)} is not one of {', '.join(map(str, schema['enum']))}"
        return
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            yield f"{_at(path)}must not be empty" if schema["minLength"] == 1 else f"{_at(path)}is too short"
        elif "pattern" in schema and not _regex(schema["pattern"]).search(value):
            yield f"{_at(path)}{_shown(value)} is not {_named(schema, 'of the form ' + schema['pattern'])}"
    elif isinstance(value, list):
        yield from _array(value, schema, root, path)
    elif isinstance(value, dict):
        yield from _object(value, schema, root, path)


def _array(value: list[Any], schema: dict[str, Any], root: dict[str, Any], path: str) -> Iterator[str]:
    least = schema.get("minItems", 0)
    if len(value) < least:
        yield f"{_at(path)}needs at least {least} item{'' if least == 1 else 's'}"
    if schema.get("uniqueItems"):
        seen: set[str] = set()
        for item in value:
            key = json.dumps(item, sort_keys=True)
            if key in seen:
                yield f"{_at(path)}lists {_shown(item)} twice"
                break
            seen.add(key)
    items = schema.get("items")
    if items is not None:
        for n, item in enumerate(value):
            yield from _check(item, items, root, where(path, n))


def _object(value: dict[str, Any], schema: dict[str, Any], root: dict[str, Any], path: str) -> Iterator[str]:
    least = schema.get("minProperties", 0)
    if len(value) < least:
        yield f"{_at(path)}needs at least {least} key{'' if least == 1 else 's'}"
    missing = [k for k in schema.get("required", ()) if k not in value]
    if missing:
        yield f"{_at(path)}needs {', '.join(map(repr, missing))}"
    names = schema.get("propertyNames")
    props = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if names is not None:
            bad = next(_check(key, names, root, ""), None)
            if bad is not None:
                yield f"{_at(path)}key {bad}"
                continue
        if key in props:
            yield from _check(item, props[key], root, where(path, key))
        elif extra is False:
            allowed = ", ".join(props) or "none"
            yield f"{_at(path)}unknown key {_shown(key)} (allowed: {allowed})"
        elif isinstance(extra, dict):
            yield from _check(item, extra, root, where(path, key))
