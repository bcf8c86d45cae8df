"""The CLI's shape: thin commands (one api call, one view), lazy imports, results on stdout."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

CLI = REPO / "envpin" / "cli"
HEAVY = ("rich", "jinja2", "docker", "envpin.api", "envpin.views", "envpin.knowledge.catalog", "envpin.probe")


def _commands() -> list[tuple[Path, ast.FunctionDef]]:
    """Every function decorated as a command (or group callback) in envpin/cli/."""
    found = []
    for path in sorted(CLI.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and any(
                isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute) and d.func.attr in ("command", "callback")
                for d in node.decorator_list
            ):
                found.append((path, node))
    return found


def _calls(node: ast.AST, module: str) -> list[str]:
    return [
        n.func.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == module
    ]


def test_every_command_calls_one_api_function() -> None:
    commands = _commands()
    assert len(commands) >= 14  # catalog, show, sync, recipe, render, build, lock, probe, diff, verify, ...
    for path, fn in commands:
        if fn.name == "_root" or (len(fn.body) == 1 and isinstance(fn.body[0], ast.Expr)):
            continue  # the root's options, a group's callback that only states its help
        api_calls = [name for name in _calls(fn, "api") if not name[0].isupper()]  # request types are data
        assert len(api_calls) == 1, f"{path.name}:{fn.name} calls {api_calls or 'no'} envpin.api function(s)"


def test_views_are_the_only_renderers() -> None:
    for path in CLI.glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert not {m for m in imported if m.split(".")[0] == "rich"}, f"{path.name} renders by itself"
        assert "print" not in {
            n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        }, f"{path.name} prints"
    for module in (
        "reports/diff",
        "audit/report",
        "image/docker",
        "knowledge/catalog",
        "doctor/__init__",
        "knowledge/sync",
        "environment/lockfile",
    ):
        text = (REPO / "envpin" / f"{module}.py").read_text()
        assert "from rich.table" not in text, f"envpin/{module}.py renders a table: that belongs in envpin/views"


@pytest.mark.parametrize(
    "args", [("-h",), ("audit", "-h"), ("catalog", "sync", "-h"), ("lock", "-h"), ("probe", "-h"), ("build", "-h")]
)
def test_dash_h_is_help_everywhere(cli, args: tuple[str, ...]) -> None:  # type: ignore[no-untyped-def]
    res = cli(*args)
    assert res.code == 0 and res.stdout.startswith("Usage: envpin") and "-h, --help" in res.stdout
