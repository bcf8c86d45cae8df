"""Property-based tests over the readers of untrusted input not covered elsewhere (the version, tag, image
reference, requirement-line, shell-token and docker-config parsers have their own): the lock reader, the
report reader with the comparison behind diff and verify, and the Dockerfile parser with the audit rules.

Each asserts the same contract: envpin's own error (one line, exit 2 on the command line) or a valid result,
never another exception."""

from __future__ import annotations

import contextlib
import json
import string
from typing import Any

import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envpin.audit import audit_text
from envpin.environment.lockfile import HEADER, loads, self_hash
from envpin.errors import EnvpinError
from envpin.reports import diff
from tests.props import examples

# JSON-shaped values with the awkward parts: huge and negative integers, booleans where numbers go, lone
# surrogates, deep nesting (bounded by the strategy), empty keys.
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**30), max_value=10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=25,
)
# No deadline: timing belongs in benchmarks/; a pathological input that hung would stop the run instead.
_SETTINGS = settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _field(value: Any) -> dict[str, Any]:
    return {"value": value, "source": "test"}


_sections = st.dictionaries(
    st.sampled_from(
        [
            "cpu",
            "gpu",
            "env",
            "python",
            "packages",
            "tensorflow",
            "cuda",
            "os",
            "limits",
            "selftest",
            "probe",
            "host",
            "container",
            "memory",
            "image",
        ]
    ),
    _json | st.dictionaries(st.text(min_size=1, max_size=15), _json.map(_field) | _json, max_size=5),
    max_size=6,
)
_reports = st.builds(
    lambda version, sections: {"probe_schema": version, **sections},
    st.integers(min_value=-2, max_value=3) | st.booleans() | st.text(max_size=3),
    _sections,
)


@_SETTINGS
@given(a=_reports, b=_reports)
def test_report_reader_and_comparison_raise_only_envpin_errors(a: dict[str, Any], b: dict[str, Any]) -> None:
    try:
        diff.check_report(a, "a")
        diff.check_report(b, "b")
    except EnvpinError:
        return
    diffs = diff.diff_reports(a, b)
    doc = diff.to_json(diffs)
    assert doc["verdict"] == diff.verdict(diffs)
    json.dumps(doc)  # the --json output can always be written


@_SETTINGS
@given(text=st.text(max_size=400))
def test_report_reader_on_arbitrary_text(text: str, tmp_path_factory: Any) -> None:
    path = tmp_path_factory.mktemp("r") / "r.json"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    with contextlib.suppress(EnvpinError):
        diff.load_report(path)


_toml_keys = st.text(alphabet=string.ascii_letters + "_.-", min_size=1, max_size=12)
_toml_values = st.recursive(
    st.booleans() | st.integers(min_value=-(10**20), max_value=10**20) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_toml_keys, inner, max_size=3),
    max_leaves=12,
)
_locks = st.fixed_dictionaries(
    {
        "lock": st.fixed_dictionaries(
            {
                "schema": st.sampled_from([2, 2, 1, 3, True, "2"]),
                "envpin_version": st.text(max_size=8),
                "inputs_hash": st.text(max_size=80),
            }
        )
    },
    optional={
        table: st.dictionaries(_toml_keys, _toml_values, max_size=5)
        for table in ("inputs", "base", "recipe", "files", "expected", "golden", "image", "extra")
    },
)


@_SETTINGS
@given(data=_locks)
def test_lock_reader_with_a_valid_self_hash_raises_only_lock_errors(data: dict[str, Any]) -> None:
    """The self-hash is recomputed, so the shape checks behind it are what is exercised."""
    data["lock"]["self_hash"] = self_hash(data)
    try:
        text = HEADER + tomli_w.dumps(data)
    except (TypeError, ValueError):
        return  # not representable as TOML: no file could hold it
    try:
        locked = loads(text, "envpin.lock")
    except EnvpinError:
        return
    assert locked.to_toml()["lock"]["schema"] == 2


@_SETTINGS
@given(text=st.text(max_size=300))
def test_lock_reader_on_arbitrary_text(text: str) -> None:
    with contextlib.suppress(EnvpinError):
        loads(text, "envpin.lock")


_keywords = st.sampled_from(
    [
        "FROM",
        "RUN",
        "ENV",
        "ARG",
        "COPY",
        "ADD",
        "CMD",
        "ENTRYPOINT",
        "LABEL",
        "USER",
        "WORKDIR",
        "SHELL",
        "ONBUILD",
        "HEALTHCHECK",
        "EXPOSE",
        "VOLUME",
        "STOPSIGNAL",
        "from",
        "# syntax=docker/dockerfile:1",
        "# escape=`",
        "#",
        "",
    ]
)
_fragments = st.sampled_from(
    [
        "$(",
        ")",
        "${A:-",
        "}",
        "<(",
        "'",
        '"',
        "\\",
        "`",
        "&&",
        "|",
        ";",
        "--mount=type=cache",
        "[",
        "]",
        '"a"',
        ",",
        "<<EOF",
        "EOF",
        "\n",
        " ",
        "TF_DETERMINISTIC_OPS=1",
        "nvcr.io/nvidia/tensorflow:20.02-tf2-py3",
        "@sha256:" + "a" * 64,
        "pip install x",
        "AS",
        "b",
        "=",
        "$A",
        "${A}",
        "sh -c",
    ]
)
_dockerfiles = st.lists(st.tuples(_keywords, st.lists(_fragments | st.text(max_size=8), max_size=10)), max_size=12).map(
    lambda lines: "\n".join(k + " " + "".join(f) for k, f in lines)
)


@_SETTINGS
@given(text=_dockerfiles | st.text(max_size=300))
def test_dockerfile_parser_and_rules_raise_only_envpin_errors(text: str) -> None:
    for tolerant in (False, True):
        try:
            findings = audit_text(text, "Dockerfile", tolerant=tolerant)
        except EnvpinError:
            continue
        for finding in findings:
            assert finding.line >= 1 and finding.rule


_requirement_steps = st.lists(
    st.sampled_from(
        [
            "",
            "# a comment",
            "ENV A=1",
            "COPY requirements.txt .",
            "COPY req/ /req/",
            "RUN pip install -r requirements.txt",
            "RUN pip install -r /req/dev.txt -c /req/constraints.txt",
            "RUN pip install flask",
            "WORKDIR /app",
            "ARG TF_CUDNN_USE_AUTOTUNE=1",
            "RUN apt-get install -y curl",
            "FROM ubuntu:22.04 AS next",
        ]
    ),
    max_size=8,
)
#: A FROM, then steps, then a requirements file copied in and installed (so the build context has findings).
_with_requirements = st.tuples(
    st.sampled_from(["FROM ubuntu:22.04", "FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3", "FROM x AS base"]),
    _requirement_steps,
    _requirement_steps,
).map(
    lambda t: "\n".join([t[0], *t[1], "COPY requirements.txt .", *t[2], "RUN pip install -r requirements.txt"]) + "\n"
)


@_SETTINGS
@given(
    text=_with_requirements,
    requirements=st.lists(
        st.sampled_from(
            [
                "flask",
                "numpy==1.26.4",
                "",
                "# c",
                "-r req/dev.txt",
                "git+https://g/h.git",
                "--extra-index-url https://x",
                "six==1.16 --hash=sha256:" + "0" * 64,
            ]
        ),
        max_size=6,
    ),
)
def test_fix_with_a_build_context_raises_only_envpin_errors(
    text: str, requirements: list[str], tmp_path_factory: Any
) -> None:
    """--fix on a Dockerfile whose requirements files (read from the build context) have findings of their own."""
    from envpin.audit import run

    folder = tmp_path_factory.mktemp("ctx")
    (folder / "Dockerfile").write_text(text)
    (folder / "requirements.txt").write_text("\n".join(requirements) + "\n")
    (folder / "req").mkdir()
    (folder / "req" / "dev.txt").write_text("\n".join(reversed(requirements)) + "\n")
    try:
        res = run([str(folder / "Dockerfile")], do_fix=True, fix_out=folder / "fixed", resolve=None)
    except EnvpinError:
        return
    assert all(f.line >= 1 for f in res.findings)
    assert (folder / "fixed").is_file()


# -- registry answers, catalog files, audit configuration ---------------------------------------------------------
@_SETTINGS
@given(config=_json)
def test_image_configs_of_any_shape_are_accepted_or_one_registry_error(config: Any) -> None:
    """What the registry layer hands on has the types envpin reads; everything else is a RegistryError."""
    from envpin.errors import RegistryError
    from envpin.knowledge.imageconfig import declared_from_config, parse_env
    from envpin.registry.client import RegistryClient, _config_shape

    body = json.dumps({"config": config} if not isinstance(config, dict) else config).encode()
    try:
        data = _config_shape(RegistryClient._json(body, "image config", "r/x:1"), "r/x:1")
    except RegistryError as exc:
        assert "\n" not in exc.message and exc.hint
        return
    declared_from_config(data)  # never an AttributeError or TypeError past the registry layer
    parse_env((data.get("config") or {}).get("Env") or [])


def _mutations() -> st.SearchStrategy[tuple[list[str | int], Any]]:
    paths = st.sampled_from(
        [
            [],
            ["sources"],
            ["releases"],
            ["missing_months"],
            ["image_repository"],
            ["notes"],
            ["schema"],
            ["releases", "20.02"],
            ["releases", "20.02", "flavors"],
            ["releases", "20.02", "fields"],
            ["releases", "20.02", "flavors", "tf2"],
            ["releases", "20.02", "flavors", "tf2", "tag"],
            ["releases", "20.02", "flavors", "tf2", "fields"],
            ["releases", "20.02", "fields", "cuda"],
            ["releases", "20.02", "fields", "cuda", "value"],
            ["releases", "20.02", "fields", "cuda", "source"],
            ["releases", "20.02", "fields", "cuda", "also"],
            ["releases", "20.02", "fields", "cuda", "conflicts"],
            ["releases", "20.02", "fields", "cuda", "reason"],
            ["missing_months", "20.04"],
            ["missing_months", "20.04", "source"],
        ]
    )
    return st.tuples(paths, _json)


# A hundred catalogs: each mutated one is checked in full against its schema by jsonschema (about 55 ms a
# catalog on a 2-core machine), where the other readers here take well under a millisecond an example.
@settings(_SETTINGS, max_examples=examples(100))
@given(mutation=_mutations())
def test_catalog_files_with_any_value_anywhere_raise_only_catalog_errors(mutation: tuple[list[Any], Any]) -> None:
    """An ENVPIN_CATALOG file with a wrong-typed value at any level: a CatalogError, or a catalog that works."""
    import copy
    from importlib import resources

    from envpin.errors import CatalogError
    from envpin.knowledge.catalog import Catalog

    path, value = mutation
    data = json.loads((resources.files("envpin") / "data" / "catalog.json").read_text(encoding="utf-8"))
    data = copy.deepcopy(data)
    node: Any = data
    if not path:
        data = value
    else:
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            return
        node[path[-1]] = value
    try:
        cat = Catalog(data, "test catalog")
    except CatalogError as exc:
        assert "\n" not in exc.message
        return
    for release in cat.releases()[:3]:
        cat.release_entries(release, notify=False)


_toml_values = st.recursive(
    st.booleans()
    | st.integers(min_value=-(10**40), max_value=10**40)
    | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(min_size=1, max_size=10), inner, max_size=4),
    max_leaves=15,
)


@_SETTINGS
@given(
    table=st.dictionaries(st.sampled_from(["ignore", "fail-on", "per-path", "other"]), _toml_values, max_size=4),
    digits=st.integers(min_value=1, max_value=6000),
)
def test_audit_configuration_raises_only_usage_errors(
    table: dict[str, Any], digits: int, tmp_path_factory: Any
) -> None:
    """Any [tool.envpin.audit] table (and an integer of up to 6,000 digits): a configuration or a UsageError."""
    from envpin.audit.config import load
    from envpin.errors import UsageError

    folder = tmp_path_factory.mktemp("cfg")
    text = tomli_w.dumps({"tool": {"envpin": {"audit": table}}}) + f"\n[other]\nn = {'9' * digits}\n"
    (folder / "pyproject.toml").write_text(text)
    try:
        load(folder / "pyproject.toml")
    except UsageError as exc:
        assert "\n" not in exc.message and len(exc.message) < 400
