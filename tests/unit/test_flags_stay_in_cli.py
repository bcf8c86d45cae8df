"""No option name below envpin/cli: the library names its parameters (envpin.errors.param), the CLI maps them to
options. Read from the source, so a text built at run time in any module is covered the moment it is written."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import typer

from envpin import cli
from tests.conftest import REPO
from tests.unit.test_layers import module_name

#: Programs of their own that run inside images and on nodes, with their own argument parsers: their options
#: are theirs (the in-image probe's `--selftest` is not `envpin probe --selftest`).
PROGRAMS = (
    "envpin.probe.__main__",
    "envpin.probe.selftest.run",
    "envpin.probe.hygiene",
    "envpin.probe.golden",
    "envpin.probe.replicas",
    "envpin.probe.runtime",
    "envpin.runs.dumpdiff",
    "envpin.runs.nodeboot",
    "envpin.fleet.nodetask",
)
#: Documentation of the command line kept as data (the audit rules' texts become docs/audit.md and SARIF help).
RULE_DOCS = ("title", "finds", "why", "bad", "good", "autofix", "references")
#: Other programs' options that a module's strings spell, by module and program: an audit finding quotes pip's
#: `-r`, a Slurm job is started with srun's `--partition`, the node runs the in-image probe with its own
#: `--selftest`. The same spelling as one of envpin's options is a coincidence of names, not envpin's option.
OTHER_PROGRAMS: dict[str, dict[str, frozenset[str]]] = {
    "envpin.doctor.diagnosis": {"docker run, nvidia-smi": frozenset({"--gpus", "--format"})},
    "envpin.environment.resolve": {
        "pip install --dry-run --report, uv pip compile": frozenset(
            {
                "-q",
                "--quiet",
                "--target",
                "--dry-run",
                "--report",
                "-r",
                "--format",
                "-o",
                "--python",
                "--exclude-newer",
            }
        )
    },
    "envpin.fleet.inputs": {"kubectl get -o": frozenset({"-o"})},
    "envpin.fleet.kubernetes": {
        "the in-image probe (python3 envpin.pyz)": frozenset({"--json", "--selftest", "--no-selftest", "--quick"}),
        "the multi-worker self-test's worker (python -m envpin.probe.replicas)": frozenset({"--resolver", "--steps"}),
    },
    "envpin.api.fleet": {
        "the in-image probe (python3 envpin.pyz)": frozenset({"--selftest", "--no-selftest", "--quick"})
    },
    "envpin.fleet.slurm": {
        "salloc, srun, sinfo, squeue, scontrol": frozenset({"--partition", "--nodes", "-o", "-j", "-n", "-v"}),
        "the multi-worker self-test's worker (python -m envpin.probe.replicas)": frozenset({"--resolver", "--steps"}),
    },
    "envpin.runs.launch": {"srun": frozenset({"--nodes", "--partition"})},
    "envpin.image.podman": {
        "podman build, podman image inspect": frozenset({"--format", "--pull", "--no-cache", "--force"})
    },
    "envpin.image.probing": {
        "the in-image probe (python3 -m envpin.probe)": frozenset(
            {"--out", "--anonymize", "--quick", "--selftest", "--no-selftest", "--replicas", "--timeout"}
        )
    },
    "envpin.audit.pipspec": {"pip": frozenset({"-r", "--target", "--timeout", "--python", "--report"})},
    "envpin.audit.rules.pip": {"pip": frozenset({"-r"})},
    "envpin.audit.rules.apt": {"apt-get": frozenset({"-o"})},
    "envpin.audit.rules.git": {"git clone, git -C": frozenset({"--namespace", "-o", "-j", "--jobs"})},
    "envpin.audit.shell": {"sh, bash (set -o, sh -n)": frozenset({"-r", "-n", "-o"})},
    # The rule reference (docs/audit.md) describes what `envpin audit --fix` does: a rule text kept in a constant.
    "envpin.audit.rules.determinism": {"the rule reference of envpin audit": frozenset({"--fix"})},
    # The comment --fix writes above the block it inserts in a script names the command that wrote it, the same
    # text whoever called the fix, so a fixed script does not depend on its caller.
    "envpin.audit.python.edits": {"the marker comment in a fixed script": frozenset({"--fix"})},
    "envpin.probe.nvml": {"nvidia-smi": frozenset({"--format"})},
    # strict mode of a tracked run asks envpin's own command line, in a child, to compare with the lock
    "envpin.probe.track": {"envpin verify (a child of the tracked run)": frozenset({"--lock", "--report", "--json"})},
    "envpin.probe.deviceclass": {"nvidia-smi": frozenset({"--format"})},
    "envpin.runs.bisect": {"the dump reader (envpin/runs/dumpdiff.py)": frozenset({"--max-ops"})},
}
_OPTION = re.compile(r"(?<![\w/.-])(--[a-z][a-z0-9-]*|-[a-zA-Z])(?![\w-])")


def _options() -> set[str]:
    """Every option of every envpin command, built from the command table."""
    found: set[str] = set()
    pending = [typer.main.get_command(cli.app)]
    while pending:
        command = pending.pop()
        for param in command.params:
            found.update(o for o in [*param.opts, *param.secondary_opts] if o.startswith("-"))
        commands = getattr(command, "commands", {})
        pending.extend(commands[name] for name in commands)
    return found - {"-h", "--help"}


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _rule_docs(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Rule":
            for kw in node.keywords:
                if kw.arg in RULE_DOCS:
                    ids.update(id(n) for n in ast.walk(kw.value) if isinstance(n, ast.Constant))
    return ids


def spelled_options(path: Path, options: set[str]) -> list[str]:
    """`module:line option` for every envpin option a string constant of `path` spells (docstrings aside)."""
    name = module_name(path)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree) | _rule_docs(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            for match in _OPTION.finditer(node.value):
                option = match.group(1)
                theirs = any(option in spelled for spelled in OTHER_PROGRAMS.get(name, {}).values())
                if option in options and not theirs:
                    found.append(f"{name}:{node.lineno} {option}")
    return found


def test_no_module_below_the_cli_spells_an_option() -> None:
    options = _options()
    assert {"--tf", "--ngc", "--runs", "-n", "--force", "--fix"} <= options
    below = [
        p
        for p in sorted((REPO / "envpin").rglob("*.py"))
        if not module_name(p).startswith("envpin.cli") and module_name(p) not in ("envpin.__main__", *PROGRAMS)
    ]
    found = [hit for path in below for hit in spelled_options(path, options)]
    assert found == []


def test_every_parameter_the_library_names_is_an_option_somewhere() -> None:
    """envpin.errors.param("x") renders the option of parameter x: each name must be one a command has."""
    names: set[str] = set()
    pending = [typer.main.get_command(cli.app)]
    while pending:
        command = pending.pop()
        for p in command.params:
            names.add(str(p.name))
            if getattr(p, "secondary_opts", None):
                names.add(f"no_{p.name}")
        commands = getattr(command, "commands", {})
        pending.extend(commands[n] for n in commands)
    used = set()
    for path in sorted((REPO / "envpin").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            called = getattr(node.func, "id", getattr(node.func, "attr", None)) if isinstance(node, ast.Call) else None
            if called == "param" and node.args and isinstance(node.args[0], ast.Constant):
                used.add((module_name(path), node.lineno, node.args[0].value))
    assert used, "the library names parameters through envpin.errors.param"
    assert [u for u in sorted(used) if u[2] not in names] == []
