"""The import contract over every module of envpin: layers point down, peers stay apart, nothing cycles.

Read from the source (every import statement, module level, inside functions and under TYPE_CHECKING
alike), so a lazy import cannot hide an upward dependency. A new module is covered the moment it exists:
every module must fall into a layer (docs/architecture.md shows the same order).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

PKG = REPO / "envpin"

#: Lowest first: (groups, independent). A module may import its own group and every lower layer; the
#: groups of an independent layer are peers that may not import each other. The first two layers travel
#: into images (standard library only, Python 3.6+).
LAYERS: tuple[tuple[tuple[str, ...], bool], ...] = (
    (("envpin.portable",), False),
    (("envpin.probe", "envpin"), False),  # the root: `import envpin; envpin.enable_determinism()` in images
    (("envpin.errors", "envpin._compat", "envpin.files", "envpin.record"), False),
    (("envpin.registry",), False),
    (("envpin.knowledge",), False),
    (("envpin.reports",), False),
    (("envpin.environment",), False),
    (("envpin.image",), False),
    (("envpin.fleet", "envpin.doctor", "envpin.audit", "envpin.runs", "envpin.evidence"), True),
    (("envpin.api",), False),
    (("envpin.views",), False),
    (("envpin.cli", "envpin.__main__"), False),
)
#: Standard library only, Python 3.6+: these run inside images (imports of optional packages such as
#: tensorflow happen inside functions and are checked by tests/unit/test_probe_run.py).
STDLIB_ONLY = (
    "envpin.portable",
    "envpin.probe",
    "envpin.fleet.nodetask",
    "envpin.runs.hook",
    "envpin.runs.dumpdiff",
    "envpin.runs.nodeboot",
)
#: Library modules that may write to stdout/stderr: programs that run inside images, where a JSON report
#: or a framed result on stdout is their whole interface.
PROGRAMS = ("envpin.probe", "envpin.fleet.nodetask", "envpin.runs.dumpdiff", "envpin.runs.nodeboot")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _group(module: str) -> tuple[int, str]:
    """(layer index, group) of `module`: the longest group name it falls under."""
    best: tuple[int, str] | None = None
    for index, (groups, _) in enumerate(LAYERS):
        for group in groups:
            if (module == group or module.startswith(group + ".")) and (best is None or len(group) > len(best[1])):
                best = (index, group)
    if best is None:
        raise LookupError(module)
    return best


def imports_of(path: Path, modules: set[str]) -> set[str]:
    """Every envpin module `path` imports, with `from pkg import submodule` resolved to the submodule."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "envpin"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            if target.split(".")[0] != "envpin":
                continue
            subs = {f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in modules}
            found |= subs if len(subs) == len(node.names) else subs | {target}
    found.discard(name)
    return found


def graph() -> dict[str, set[str]]:
    paths = sorted(PKG.rglob("*.py"))
    modules = {module_name(p) for p in paths}
    return {module_name(p): imports_of(p, modules) for p in paths}


def violations(edges: dict[str, set[str]]) -> list[str]:
    """What breaks the contract: an import of a higher layer or of a peer group."""
    bad = []
    for module, targets in sorted(edges.items()):
        layer, group = _group(module)
        for target in sorted(targets):
            t_layer, t_group = _group(target)
            if t_layer > layer:
                bad.append(f"{module} imports {target}: a higher layer ({t_group} above {group})")
            elif t_layer == layer and t_group != group and LAYERS[layer][1]:
                bad.append(f"{module} imports {target}: {t_group} and {group} are peers")
    return bad


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        for node in sorted(edges):
            if node not in index:
                visit(node)
    finally:
        sys.setrecursionlimit(limit)
    return sorted(found)


EDGES = graph()


def test_every_module_has_a_layer() -> None:
    unplaced = []
    for module in EDGES:
        try:
            _group(module)
        except LookupError:
            unplaced.append(module)
    assert unplaced == [], "add these to LAYERS (and to docs/architecture.md)"


def test_imports_point_down_and_peers_stay_apart() -> None:
    assert violations(EDGES) == []


def test_no_import_cycles_even_inside_functions() -> None:
    assert cycles(EDGES) == []


def test_the_root_holds_only_entry_points() -> None:
    root = sorted(p.name for p in PKG.glob("*.py"))
    # keras.py: envpin.keras.EnvpinCallback, the public name of the Keras callback (docs/track.md)
    assert root == ["__init__.py", "__main__.py", "_compat.py", "errors.py", "keras.py", "record.py"]


def test_stdlib_core_imports_nothing_of_the_host_side() -> None:
    bad = {
        m: sorted(t for t in targets if not t.startswith(("envpin.portable", "envpin.probe")) and t != "envpin")
        for m, targets in EDGES.items()
        if m.startswith(STDLIB_ONLY)
    }
    assert {m: t for m, t in bad.items() if t} == {}
    portable = {
        m: sorted(t)
        for m, t in EDGES.items()
        if m.startswith("envpin.portable") and t - {x for x in t if x.startswith("envpin.portable")}
    }
    assert portable == {}, "envpin.portable imports only itself and the standard library"


def _writes_to_terminal(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
            found.append(f"{path.name}:{node.lineno} print()")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in ("stdout", "stderr")
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        ):
            found.append(f"{path.name}:{node.lineno} sys.{node.attr}")
    return found


def test_the_library_never_prints() -> None:
    """Below envpin.views, results are returned and progress goes through callbacks; only the programs that
    run inside images (the probe, the Slurm node task) and the console script write to the terminal."""
    api = _group("envpin.api")[0]
    bad = {}
    for path in sorted(PKG.rglob("*.py")):
        module = module_name(path)
        if _group(module)[0] > api or module.startswith(PROGRAMS):
            continue
        if found := _writes_to_terminal(path):
            bad[module] = found
    assert bad == {}


@pytest.mark.parametrize(
    ("module", "target", "message"),
    [
        ("envpin.image.docker", "envpin.views.console", "a higher layer"),
        ("envpin.knowledge.catalog", "envpin.api", "a higher layer"),
        ("envpin.portable.versions", "envpin.errors", "a higher layer"),
        ("envpin.audit.parser", "envpin.fleet.aggregate", "are peers"),
        ("envpin.probe.report", "envpin.cli", "a higher layer"),
    ],
)
def test_the_contract_catches_an_upward_import(module: str, target: str, message: str) -> None:
    """The checker itself: planting one bad edge in the real graph is reported."""
    edges = {m: set(t) for m, t in EDGES.items()}
    edges[module].add(target)
    found = sorted(set(violations(edges)) - set(violations(EDGES)))
    assert len(found) == 1 and found[0].startswith(f"{module} imports {target}") and message in found[0]


def test_function_level_imports_are_edges_too() -> None:
    """`envpin.enable_determinism` imports the runtime helper inside the function: it is still an edge."""
    assert "envpin.probe.runtime" in EDGES["envpin"]


def test_the_contract_catches_a_cycle() -> None:
    edges = {m: set(t) for m, t in EDGES.items()}
    edges["envpin.knowledge.catalog"].add("envpin.knowledge.recipes")
    edges["envpin.knowledge.recipes"].add("envpin.knowledge.catalog")
    assert ["envpin.knowledge.catalog", "envpin.knowledge.recipes"] in cycles(edges)
