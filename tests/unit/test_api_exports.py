"""envpin.api's public surface: exactly the public names its modules define, each importable and typed."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Callable
from pathlib import Path

import pytest

import envpin.api
from envpin.errors import UsageError
from envpin.portable.lazy import parse_declarations
from tests.conftest import REPO

API = REPO / "envpin" / "api"


def _defined() -> dict[str, str]:
    """Public top-level names each envpin/api module defines (not those it imports)."""
    names: dict[str, str] = {}
    for path in sorted(API.glob("*.py")):
        if path.name == "__init__.py":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                name = node.name
            elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                name = node.targets[0].id
            else:
                continue
            if not name.startswith("_") and name != "TYPE_CHECKING":  # typing's flag, set without importing typing
                names[name] = path.stem
    return names


def test_all_lists_exactly_what_the_modules_define() -> None:
    assert sorted(envpin.api.__all__) == sorted(_defined())


def test_every_exported_member_is_there_and_from_its_module() -> None:
    for name, module in _defined().items():
        member = getattr(envpin.api, name)
        assert getattr(member, "__module__", f"envpin.api.{module}") == f"envpin.api.{module}" or not callable(member)


def test_public_functions_are_fully_typed_without_any() -> None:
    """Every parameter and return annotated; no `Any` and no **kwargs in a public signature."""
    for name in envpin.api.__all__:
        member = getattr(envpin.api, name)
        if not inspect.isfunction(member):
            continue
        sig = inspect.signature(member)  # annotations stay strings (from __future__ import annotations)
        assert sig.return_annotation is not inspect.Signature.empty, f"{name} has no return annotation"
        assert "Any" not in str(sig.return_annotation), f"{name} returns Any"
        for param in sig.parameters.values():
            assert param.kind is not inspect.Parameter.VAR_KEYWORD, f"{name}(**{param.name})"
            assert param.annotation is not inspect.Parameter.empty, f"{name}({param.name}) is not annotated"
            assert "Any" not in str(param.annotation), f"{name}({param.name}: {param.annotation})"


def test_result_types_are_typed_without_any() -> None:
    for name in envpin.api.__all__:
        member = getattr(envpin.api, name)
        if inspect.isclass(member) and hasattr(member, "__dataclass_fields__"):
            for field, hint in member.__annotations__.items():
                assert "Any" not in str(hint), f"{name}.{field}: {hint}"


def test_the_declaration_is_read_as_type_checkers_read_it() -> None:
    """envpin.portable.lazy exports what an `if TYPE_CHECKING:` block imports as itself (`name as name`, mypy's
    explicit re-export), resolving relative modules; other imports there are for type checkers only."""
    source = (
        "TYPE_CHECKING = False\n"
        "if TYPE_CHECKING:  # the declaration\n"
        "    from typing import Any\n"
        "    from .report import collect as collect, to_json\n"
        "    from envpin.probe.fields import (\n"
        "        BREAKING as BREAKING,  # a comment\n"
        "        fingerprint as fp,\n"
        "    )\n"
        "\n"
        "    from ..portable import versions as versions\n"
        "lazy_exports(__name__)\n"
        "if TYPE_CHECKING:\n"
        "    from envpin.other import late as late\n"
    )
    assert parse_declarations(source, "envpin.probe") == {
        "collect": "envpin.probe.report",
        "BREAKING": "envpin.probe.fields",
        "versions": "envpin.portable",
    }


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda tmp: envpin.api.fleet_report([tmp], expect=2, expect_nodes=tmp / "nodes.txt"),
            "`expect` and `expect_nodes` exclude each other",
        ),
        (lambda tmp: envpin.api.fleet_report([tmp], expect=0), "`expect` must be at least 1, not 0"),
        (lambda tmp: envpin.api.fleet_manifest(kubernetes=False), "say which manifest to write: `kubernetes`"),
        (lambda tmp: envpin.api.probe_fleet(slurm=True, runtime="pyxis"), "`runtime` chooses how `image` runs"),
        (
            lambda tmp: envpin.api.probe_machine(quick=True),
            "`quick` shortens the self-test, which runs on this machine only with `selftest`",
        ),
        (
            lambda tmp: envpin.api.verify_environment(report=tmp / "r.json", host=True),
            "give `report` FILE or `host`, not both",
        ),
        (lambda tmp: envpin.api.verify_environment(force=True), "`force` only applies to `record`"),
        (
            lambda tmp: envpin.api.diagnose_host(ngc="22.06", stock="2.20"),
            "give one of `ngc`, `stock` or `lock`, not both",
        ),
    ],
)
def test_a_python_caller_reads_parameters_not_options(
    call: Callable[[Path], object], message: str, tmp_path: Path
) -> None:
    """envpin.api checks its own parameters and names them as a Python caller knows them (the CLI renders the
    same texts with its options: tests/unit/test_fleet_cli.py and the other CLI tests)."""
    with pytest.raises(UsageError) as info:
        call(tmp_path)
    assert info.value.message == message and info.value.hint and "--" not in info.value.message + info.value.hint
