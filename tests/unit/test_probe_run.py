"""The probe's code as images need it, read without running it: standard library only at module level (optional
packages inside functions), `envpin` imported for its version alone, and a valid JSON Schema shipped in the
package. The probe run as a process: tests/cli/test_probe_run.py."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import jsonschema

from envpin.probe import load_schema

REPO = Path(__file__).resolve().parents[2]
PROBE_DIR = REPO / "envpin" / "probe"


# --- static: standard library only, Python 3.6 -----------------------------------------------------------

#: Frameworks and experiment trackers a probe module uses only where they are installed, inside a function.
OPTIONAL_LAZY = {"tensorflow", "numpy", "fwr13y", "tfdeterminism", "keras", "horovod", "mlflow", "tensorboard", "wandb"}


def _imports(tree: ast.AST):  # type: ignore[no-untyped-def]
    """(module, inside_function) for every import statement."""

    def walk(node: ast.AST, in_func: bool):  # type: ignore[no-untyped-def]
        for child in ast.iter_child_nodes(node):
            nested = in_func or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield alias.name, in_func
            elif isinstance(child, ast.ImportFrom) and child.level == 0:
                yield child.module or "", in_func
            yield from walk(child, nested)

    yield from walk(tree, False)


def test_probe_imports_only_stdlib_at_module_level() -> None:
    bad = []
    for path in sorted(PROBE_DIR.rglob("*.py")):  # the selftest package too
        for module, in_func in _imports(ast.parse(path.read_text(), str(path))):
            top = module.split(".")[0]
            ok = (
                top in sys.stdlib_module_names
                or module.startswith(("envpin.probe", "envpin.portable"))
                or module == "envpin"
            )
            if in_func:
                ok = ok or top in OPTIONAL_LAZY
            if not ok:
                bad.append(f"{path.name}: {module} ({'function' if in_func else 'module'} level)")
    assert bad == []


def test_envpin_root_module_import_is_version_only() -> None:
    for path in sorted(PROBE_DIR.rglob("*.py")):  # the selftest package too
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "envpin":
                assert [a.name for a in node.names] == ["__version__"], path.name


def test_schema_is_valid_draft7_and_shipped_in_package() -> None:
    jsonschema.Draft7Validator.check_schema(load_schema())
    assert (PROBE_DIR / "report.schema.json").is_file()
