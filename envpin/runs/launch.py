"""Running the user's command with the run hook: the hook folder, the environment, one run's result.

The hook (envpin/runs/hook.py) travels as ``sitecustomize.py`` in a fresh folder put first on PYTHONPATH,
with envpin's in-image archive (``envpin.pyz``: the recipe table and the runtime helper) after it, so any
Python the command starts, of any environment, finds both.
"""

from __future__ import annotations

import json
import os
import py_compile
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from envpin.errors import UsageError

#: The seed a run receives; the hook seeds Python, NumPy and TensorFlow with it.
SEED_VAR = "ENVPIN_SEED"
#: A metrics line on stdout: the last line that is a JSON object with this key (values must be numbers).
METRICS_KEY = "envpin_metrics"
_NO_DEBUGGER = 86  # envpin.runs.hook.NO_DEBUGGER (the hook runs elsewhere and is not imported here)
#: The return code recorded for a run stopped by --timeout (subprocess kills it).
TIMED_OUT = -9


class RunError(UsageError):
    """A run could not be made or observed (exit 2)."""


@dataclass(frozen=True)
class RunSpec:
    """One run: the seed it gets, whether envpin's recipe is applied, and what the hook should do."""

    label: str
    seed: int | None
    recipe: bool = False
    dump: bool = False
    steps: int | None = None
    op_regex: str | None = None


@dataclass
class Run:
    """What one run did: exit status, wall time, metrics (script's line and Keras History), hook records."""

    spec: RunSpec
    folder: Path
    returncode: int
    seconds: float
    metrics: dict[str, float] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def tf_record(self) -> dict[str, Any] | None:
        """The record of the process that imported TensorFlow (the one with the most steps, then the first)."""
        with_tf = [r for r in self.records if r.get("tf_version")]
        if not with_tf:
            return None
        return sorted(with_tf, key=lambda r: (-len(r.get("step_seconds", ())), r.get("started", 0)))[0]

    def log_tail(self, lines: int = 5) -> str:
        text = (self.folder / "stderr.log").read_text(errors="replace").strip().splitlines()
        return " | ".join(line.strip() for line in text[-lines:])


def check_command(command: Sequence[str]) -> list[str]:
    """The command as a list, or a usage error when there is none or its program cannot be found."""
    args = list(command)
    if not args:
        raise UsageError("no command to run", hint="put the training command after --, e.g. -- python train.py")
    if shutil.which(args[0]) is None:
        raise UsageError(f"command {args[0]!r} not found", hint="give the program's path or put it on PATH")
    return args


def hook_folder(root: Path) -> Path:
    """A folder holding the hook as sitecustomize.py and envpin.pyz (the recipe and the runtime helper)."""
    from envpin.environment import payload

    folder = root / "hook"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_bytes((resources.files("envpin.runs") / "hook.py").read_bytes())
    # Compiled once here for this Python (a child on another Python compiles its own): every run saves the
    # compile, a few milliseconds, and a child never writes beside the hook.
    py_compile.compile(str(folder / "sitecustomize.py"), doraise=True,
                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
    (folder / "envpin.pyz").write_bytes(payload.payload())
    return folder


def environment(spec: RunSpec, hook: Path, out: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """The child's environment: the caller's, plus the hook on PYTHONPATH and the hook's variables."""
    env = dict(os.environ if base is None else base)
    for name in [k for k in env if k.startswith("ENVPIN_RUNS_")] + [SEED_VAR]:
        env.pop(name, None)
    paths = [str(hook), str(hook / "envpin.pyz")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["ENVPIN_RUNS_OUT"] = str(out)
    if spec.seed is not None:
        env[SEED_VAR] = str(spec.seed)
    if spec.recipe:
        env["ENVPIN_RUNS_RECIPE"] = "1"
        env["PYTHONHASHSEED"] = "0"  # the recipe's value; it only counts when set before Python starts
    if spec.dump:
        env["ENVPIN_RUNS_DUMP"] = str(out)
    if spec.steps is not None:
        env["ENVPIN_RUNS_STEPS"] = str(spec.steps)
    if spec.op_regex:
        env["ENVPIN_RUNS_OP_REGEX"] = spec.op_regex
    return env


def metrics_line(stdout: str) -> dict[str, float]:
    """The script's metrics: the last stdout line that is {"envpin_metrics": {name: number, ...}}."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if not (line.startswith("{") and METRICS_KEY in line):
            continue
        try:
            data = json.loads(line)
        except ValueError:
            continue
        values = data.get(METRICS_KEY) if isinstance(data, dict) else None
        if isinstance(values, dict):
            return {str(k): float(v) for k, v in values.items()
                    if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return {}


def _records(out: Path) -> list[dict[str, Any]]:
    found = []
    for path in sorted(out.glob("hook-*.json")):
        try:
            found.append(json.loads(path.read_text()))
        except (OSError, ValueError):
            continue
    return sorted(found, key=lambda r: r.get("started", 0))


_KERAS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def run_once(command: list[str], spec: RunSpec, hook: Path, out: Path, timeout: float | None = None) -> Run:
    """Run the command once with the hook; its stdout and stderr go to files in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    with open(out / "stdout.log", "wb") as so, open(out / "stderr.log", "wb") as se:
        try:
            proc = subprocess.run(command, stdout=so, stderr=se, stdin=subprocess.DEVNULL,
                                  env=environment(spec, hook, out), timeout=timeout)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            code = TIMED_OUT
        except OSError as exc:
            raise RunError(f"cannot run {command[0]}: {exc.strerror or exc}", hint="check the command") from exc
    seconds = time.perf_counter() - start
    run = Run(spec=spec, folder=out, returncode=code, seconds=seconds, records=_records(out))
    record = run.tf_record
    if record is not None:  # Keras History: the last value of each key (the script's own line wins)
        run.metrics = {k: v[-1] for k, v in sorted(record.get("history", {}).items()) if v and _KERAS_NAME.match(k)}
    run.metrics.update(metrics_line((out / "stdout.log").read_text(errors="replace")))
    if code == _NO_DEBUGGER and any(r.get("dump") == "unavailable" for r in run.records):
        record = next(r for r in run.records if r.get("dump") == "unavailable")
        raise RunError(
            f"TensorFlow {record.get('tf_version')} cannot dump tensor values with its debugger: "
            + "; ".join(record.get("errors") or ()),
            hint="`envpin study` and `envpin cost` need no debugger and work on this TensorFlow; `envpin "
                 "selftest` checks its ops one by one; bisect needs TensorFlow 2.2 or later (dumps with "
                 "tensor_debug_mode='FULL_TENSOR' and a DebugDataReader to read them)",
        )
    return run


def run_all(command: list[str], specs: Sequence[RunSpec], root: Path, jobs: int = 1,
            timeout: float | None = None, progress: Callable[[str], None] | None = None) -> list[Run]:
    """Every run, `jobs` at a time, in the order of `specs`."""
    hook = hook_folder(root)
    done = [0]

    def one(index: int) -> Run:
        run = run_once(command, specs[index], hook, root / f"run-{index:03d}", timeout)
        done[0] += 1
        if progress is not None:
            progress(f"{done[0]}/{len(specs)} runs done")
        return run

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(one, range(len(specs))))


def failed(run: Run) -> RunError:
    """The error for a run that exited non-zero, with the end of its stderr."""
    if run.returncode == TIMED_OUT:
        return RunError(f"the command did not finish within --timeout ({run.spec.label}, {run.seconds:.0f} s)",
                        hint="raise --timeout, or make the runs shorter (fewer epochs or steps)")
    return RunError(f"the command exited with status {run.returncode} ({run.spec.label}): {run.log_tail()}",
                    hint=f"its output is in {run.folder} with --keep; run the command by itself to see why")
