"""Running the user's command with the run hook: the hook folder, the environment, one run's result.

The hook (envpin/runs/hook.py) travels as ``sitecustomize.py`` in a fresh folder put first on PYTHONPATH,
with envpin's in-image archive (``envpin.pyz``: the recipe table and the runtime helper) after it, so any
Python the command starts, of any environment, finds both.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import io
import json
import math
import os
import py_compile
import re
import shutil
import signal
import subprocess
import threading
import time
import zipfile
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from envpin.errors import UsageError, param, shown
from envpin.files.read import read_regular, read_tail
from envpin.record import ProgressCallback, ProgressEvent, Value
from envpin.runs import tasks

#: The seed a run receives; the hook seeds Python, NumPy and TensorFlow with it.
SEED_VAR = "ENVPIN_SEED"
#: A metrics line on stdout: the last line that is a JSON object with this key (values must be numbers).
METRICS_KEY = "envpin_metrics"
_NO_DEBUGGER = 86  # envpin.runs.hook.NO_DEBUGGER (the hook runs elsewhere and is not imported here)
#: The exit status of a process the hook ended at its resume point (envpin.runs.hook.INTERRUPTED).
INTERRUPTED = 87
#: Where resume-check's runs keep their checkpoints: this variable, and this word in the command's arguments.
CHECKPOINT_VAR = "ENVPIN_RUNS_CHECKPOINT"
CHECKPOINT_WORD = "{checkpoint}"
_NODE_MARK = "@envpin-run-record"  # envpin.runs.nodeboot.MARK (a node program, not imported here)


#: The most runs one parameter may ask for (study's `runs` and `jobs`, cost's `repeat`): a typo such as
#: 100000000 runs would otherwise run until killed.
MAX_RUNS = 1000


class RunError(UsageError):
    """A run could not be made or observed (exit 2)."""


def check_count(value: int, name: str, low: int = 1, high: int | None = MAX_RUNS, *, hint: str = "") -> int:
    """A count, the parameter `name`, within [low, high]: refused before any run starts. `hint` says what to
    do when it is too small."""
    bounds = f"between {low} and {high}" if high is not None else f"{low} or more"
    if value < low:
        raise UsageError(f"{param(name)} must be {bounds}, not {value}", hint=hint or f"pass {param(name)} {bounds}")
    if high is not None and value > high:
        raise UsageError(
            f"{param(name)} must be {bounds}, not {value}",
            hint=f"pass {param(name)} {high} or less (envpin's bound on runs, see docs/runs.md)",
        )
    return value


#: The seeds the hook can give every library: NumPy's seed is an unsigned 32-bit integer.
MAX_SEED = 2**32 - 1


def check_seed(seed: int, varied: int = 0) -> int:
    """`seed` within what the hook can seed NumPy with, for it and the `varied` seeds after it (study's seed+1 ...
    seed+n): outside it the hook's seeding fails inside each run, which would then not be seeded as reported."""
    if not 0 <= seed <= MAX_SEED - varied:
        extra = f" (and {param('seed')}+{varied}, the last varied seed)" if varied else ""
        raise UsageError(
            f"{param('seed')} must be between 0 and {MAX_SEED}{extra}, not {seed}",
            hint=f"pass {param('seed')} between 0 and {MAX_SEED - varied} (NumPy takes seeds of 0 to {MAX_SEED})",
        )
    return seed


def check_timeout(timeout: float | None) -> float | None:
    """`timeout`: a finite number of seconds above 0 (0, a negative number, nan or inf would stop every run
    at once or never)."""
    if timeout is not None and not (math.isfinite(timeout) and timeout > 0):
        raise UsageError(
            f"{param('timeout')} must be a finite number of seconds above 0, not {timeout}",
            hint=f"pass {param('timeout')} SECONDS (e.g. {param('timeout')} 600), or leave it out for no limit",
        )
    return timeout


@dataclass(frozen=True, slots=True)
class RunSpec(Value):
    """One run: the seed it gets, whether envpin's recipe is applied, and what the hook should do."""

    label: str
    seed: int | None
    recipe: bool = False
    dump: bool = False
    steps: int | None = None
    op_regex: str | None = None
    #: bisect's second run: what its hook compares, as the run ends, with the first run's dump
    #: (ENVPIN_RUNS_COMPARE, JSON; envpin/runs/hook.py says what it holds).
    compare: str | None = None
    #: resume-check: what the hook does at the resume point, MODE:K (ENVPIN_RUNS_RESUME; observe, stop,
    #: resumed), and the run's checkpoint folder (CHECKPOINT_VAR, and CHECKPOINT_WORD in the command).
    resume: str | None = None
    checkpoint: str | None = None


@dataclass(slots=True)
class Run(Value):
    """What one run did: exit status, wall time, metrics (script's line and Keras History), hook records."""

    spec: RunSpec
    folder: Path
    returncode: int
    seconds: float
    metrics: dict[str, float] = field(default_factory=dict)
    records: list[dict[str, Any]] = field(default_factory=list)
    #: Stopped by `timeout` (its returncode is then the kill's, which a command killed otherwise also has).
    timed_out: bool = False

    @property
    def failed(self) -> bool:
        """It exited non-zero, was killed, or ran past `timeout` (whatever status it ended with), or one of the
        tasks of a distributed run did not run whole (its launcher may still have exited 0)."""
        return self.returncode != 0 or self.timed_out or bool(self.task_problems)

    @property
    def interrupted(self) -> bool:
        """The hook ended one of its processes at the resume point (resume-check's interrupted run)."""
        return any((r.get("resume") or {}).get("interrupted") for r in self.records)

    @property
    def tf_record(self) -> dict[str, Any] | None:
        """The record of the process that imported TensorFlow (the one with the most steps, then the first)."""
        return tasks.main_record(self.records)

    @property
    def chief_record(self) -> dict[str, Any] | None:
        """The record that speaks for the run: the chief's in a run of TF_CONFIG tasks, else `tf_record`."""
        return tasks.chief_record(self.records)

    @property
    def shape(self) -> tasks.Shape:
        """Its processes (TF_CONFIG tasks) and replicas."""
        return tasks.shape(self.records)

    @property
    def task_problems(self) -> list[str]:
        """Why a run of TF_CONFIG tasks did not run whole: a training task without a record, one that raised."""
        return tasks.problems(self.records)

    def log_tail(self, lines: int = 5) -> str:
        """The last lines of the run's stderr for a one-line error: control characters (a progress bar's
        terminal codes) escaped, each line shortened."""
        text = read_tail(self.folder / "stderr.log", _LOG_TAIL).decode(errors="replace").strip().splitlines()
        return " | ".join(shown(line.strip(), _TAIL_LINE) for line in text[-lines:])


@dataclass(frozen=True, slots=True)
class Srun(Value):
    """Each run as one Slurm task (`slurm`): srun starts envpin/runs/nodeboot.py under the node's python3 with
    the hook bundle on its standard input; the node unpacks it, runs the command with the hook and sends the
    hook's records back on standard output. No shared storage is needed."""

    partition: str | None = None
    options: tuple[str, ...] = ()

    def command(
        self, command: list[str], spec_env: dict[str, str], bundle_sha256: str, timeout: float | None
    ) -> list[str]:
        cmd = ["srun", "--nodes=1", "--ntasks=1", "--job-name=envpin-run"]
        if self.partition:
            cmd.append(f"--partition={self.partition}")
        if timeout is not None:  # Slurm ends the task too, should this srun be killed
            cmd.append(f"--time={math.ceil(timeout / 60) + 1}")
        boot = (resources.files("envpin.runs") / "nodeboot.py").read_text(encoding="utf-8")
        assignments = [f"{k}={v}" for k, v in sorted(spec_env.items())]
        return [*cmd, *self.options, "python3", "-c", boot, bundle_sha256, *assignments, "--", *command]


#: The variables of a run that travel to a Slurm node as arguments (the node sets ENVPIN_RUNS_OUT itself).
_NODE_VARS = (SEED_VAR, "ENVPIN_RUNS_RECIPE", "PYTHONHASHSEED", "ENVPIN_RUNS_STEPS", "ENVPIN_RUNS_OP_REGEX")


def check_command(command: Sequence[str], slurm: Srun | None = None) -> list[str]:
    """The command as a list, or a usage error when there is none or its program cannot be found (here, or,
    with `slurm`, srun: the program is looked for on the node)."""
    args = list(command)
    if not args:
        raise UsageError("no command to run", hint="give the program to run and its arguments, e.g. python train.py")
    if slurm is not None:
        if shutil.which("srun") is None:
            raise UsageError(
                f"{param('slurm')} needs srun, which is not on PATH", hint="run envpin on a Slurm login node"
            )
        if args[0] == "srun":
            raise UsageError(
                f"with {param('slurm')} envpin starts srun itself",
                hint=f"drop srun from the command and pass its options as {param('slurm_args')}=OPTION",
            )
        return args
    if shutil.which(args[0]) is None:
        if os.sep in args[0] and os.path.isdir(args[0]):
            raise UsageError(f"command {args[0]!r} is a folder", hint="give the path of the program to run")
        if os.sep in args[0] and os.path.exists(args[0]):
            raise UsageError(
                f"command {args[0]!r} is not executable",
                hint="make it executable (chmod +x), or run it through its interpreter (e.g. bash train.sh, "
                "python train.py)",
            )
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
    py_compile.compile(
        str(folder / "sitecustomize.py"), doraise=True, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH
    )
    (folder / "envpin.pyz").write_bytes(payload.payload())
    return folder


def bundle(hook: Path) -> bytes:
    """The hook folder as the zip a Slurm node unpacks (nodeboot.py): sitecustomize.py and envpin.pyz."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        for name in ("sitecustomize.py", "envpin.pyz"):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # the same bytes on every call
            info.external_attr = 0o644 << 16
            archive.writestr(info, (hook / name).read_bytes())
    return buffer.getvalue()


def node_records(stdout: str) -> list[dict[str, Any]]:
    """The hook records a Slurm node sent back (nodeboot.py's lines); damaged or incomplete ones are left out."""
    pieces: dict[str, dict[int, str]] = {}
    totals: dict[str, int] = {}
    for line in stdout.splitlines():
        cols = line.strip().split(" ")
        if (
            len(cols) not in (5, 6)
            or cols[0] != _NODE_MARK
            or cols[1] != "1"
            or not cols[2].isdigit()
            or not cols[3].isdigit()
        ):
            continue
        pieces.setdefault(cols[4], {})[int(cols[2])] = cols[5] if len(cols) == 6 else ""
        totals[cols[4]] = int(cols[3])
    found = []
    for digest, chunks in sorted(pieces.items()):
        if sorted(chunks) != list(range(totals[digest])):
            continue
        blob = "".join(chunks[i] for i in range(totals[digest]))
        if hashlib.sha256(blob.encode("ascii", "replace")).hexdigest()[:16] != digest:
            continue
        try:
            record = json.loads(zlib.decompress(base64.b64decode(blob)).decode("utf-8"))
        except (ValueError, zlib.error):
            continue
        if isinstance(record, dict):
            found.append(record)
    return found


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
    if spec.compare is not None:
        env["ENVPIN_RUNS_COMPARE"] = spec.compare
    if spec.resume is not None:
        env["ENVPIN_RUNS_RESUME"] = spec.resume
    if spec.checkpoint is not None:
        env[CHECKPOINT_VAR] = spec.checkpoint
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
            return {
                str(k): _as_float(v)
                for k, v in values.items()
                if isinstance(v, (int, float)) and not isinstance(v, bool)
            }
    return {}


def _as_float(value: int | float) -> float:
    """A metric as a float; an integer too large for one is infinite, as JSON's 1e400 already reads."""
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


#: The most characters of one stderr line in an error message.
_TAIL_LINE = 300
#: How much of the end of a run's logs envpin reads: the metrics line and node records come last, and a
#: command may write gigabytes before them.
_LOG_TAIL = 16 * 1024 * 1024


def _stdout_tail(out: Path) -> str:
    return read_tail(out / "stdout.log", _LOG_TAIL).decode(errors="replace")


def _records(out: Path) -> list[dict[str, Any]]:
    found = []
    for path in sorted(out.glob("hook-*.json")):
        try:
            found.append(json.loads(read_regular(path)))
        except (OSError, ValueError):
            continue
    return sorted(found, key=lambda r: r.get("started", 0))


_KERAS_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.]*$")


def _descendants(pid: int) -> list[int]:
    """The processes below `pid` (Linux's /proc; none found elsewhere), children before their own children."""
    children: dict[int, list[int]] = {}
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    stat = fh.read(4096)
                parent = int(stat.rsplit(b")", 1)[1].split()[1])  # the field after the state
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(0), ()):
            found.append(child)
            todo.append(child)
    return found


def _kill_tree(proc: subprocess.Popen[bytes]) -> None:
    """Stop a run (past its `timeout`, or envpin itself interrupted or terminated) with everything it started
    (a wrapper script's training process would otherwise go on, orphaned, after envpin has reported the run
    stopped). Each process is stopped (SIGSTOP) before any is killed, so none can react to another's end (a
    wrapper exiting 0 once its child dies, a retry loop starting another), and found before its parent dies
    (its orphans are re-parented); then what is left of the run's process group (see `_reap`)."""
    with contextlib.suppress(OSError):
        os.kill(proc.pid, signal.SIGSTOP)
    tree: list[int] = []
    for _ in range(2):  # a second pass for a process started while the first was stopping the others
        for pid in _descendants(proc.pid):
            if pid not in tree:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGSTOP)
                tree.append(pid)
    for pid in tree:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    proc.kill()
    _reap(proc)


#: The runs under way, in any thread: what an interrupt of envpin stops (`run_all`).
_LIVE: set[subprocess.Popen[bytes]] = set()
_LIVE_LOCK = threading.Lock()


def _reap(proc: subprocess.Popen[bytes]) -> None:
    """Kill what the command left running in its process group once it has ended (a server or a logger
    started in the background would outlive the run, and the study, and hold its files): each run starts a
    session of its own, so the group is the run's alone. A process that left the group (setsid) is not
    reached."""
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)


def run_once(
    command: list[str], spec: RunSpec, hook: Path, out: Path, timeout: float | None = None, slurm: Srun | None = None
) -> Run:
    """Run the command once with the hook (here, or as one Slurm task); its stdout and stderr go to files in
    `out`."""
    out.mkdir(parents=True, exist_ok=True)
    env, data = environment(spec, hook, out), None
    if spec.checkpoint is not None:
        command = [arg.replace(CHECKPOINT_WORD, spec.checkpoint) for arg in command]
    if slurm is not None:
        data = bundle(hook)
        node_env = {k: env[k] for k in _NODE_VARS if k in env}
        command = slurm.command(command, node_env, hashlib.sha256(data).hexdigest(), timeout)
        # srun's own environment: the caller's, without a stale run variable (the host's hook folder would
        # mean nothing on a node; the run's variables travel as arguments)
        env = {k: v for k, v in os.environ.items() if not k.startswith("ENVPIN_RUNS_") and k != SEED_VAR}
    start, timed_out = time.perf_counter(), False
    with open(out / "stdout.log", "wb") as so, open(out / "stderr.log", "wb") as se:
        try:
            # A session of its own: its process group is the run's (`_reap`); a Ctrl-C on the terminal reaches
            # envpin alone, which stops the run's whole tree (below) instead of leaving it to each process.
            proc = subprocess.Popen(
                command,
                stdout=so,
                stderr=se,
                env=env,
                stdin=subprocess.DEVNULL if data is None else subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise RunError(f"cannot run {command[0]}: {exc.strerror or exc}", hint="check the command") from exc
        with proc:
            with _LIVE_LOCK:
                _LIVE.add(proc)
            try:
                proc.communicate(data, timeout=timeout)  # the bundle on srun's standard input, or nothing
            except subprocess.TimeoutExpired:
                _kill_tree(proc)
                timed_out = True
            except BaseException:
                _kill_tree(proc)
                raise
            finally:
                with _LIVE_LOCK:
                    _LIVE.discard(proc)
            code = proc.wait()
            _reap(proc)
    seconds = time.perf_counter() - start
    records = _records(out)
    if slurm is not None:
        records = sorted(records + node_records(_stdout_tail(out)), key=lambda r: r.get("started", 0))
    run = Run(spec=spec, folder=out, returncode=code, seconds=seconds, records=records, timed_out=timed_out)
    record = run.chief_record
    if record is not None:  # Keras History: the last value of each key (the script's own line wins)
        run.metrics = {k: v[-1] for k, v in sorted(record.get("history", {}).items()) if v and _KERAS_NAME.match(k)}
    run.metrics.update(metrics_line(_stdout_tail(out)))
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


def unseeded(run: Run) -> RunError | None:
    """The error for a run whose hook could not seed it or apply the recipe (it records why and lets the
    command go on): its results would be reported as those of a seeded run, or of a run with the recipe."""
    for record in run.records:
        bad = [str(e) for e in record.get("errors") or () if str(e).startswith(("seeding:", "recipe:"))]
        if bad:
            what = "apply envpin's recipe" if run.spec.recipe else f"seed the run with {SEED_VAR}={run.spec.seed}"
            return RunError(
                f"envpin's hook could not {what} ({run.spec.label}, TensorFlow {record.get('tf_version')}): {bad[0]}",
                hint="its results would not be those of the runs reported: fix the cause"
                + (", or leave the recipe out" if run.spec.recipe else ""),
            )
    return None


def check_seeded(run: Run) -> None:
    """Refuse a run that `unseeded` speaks of; checked after the run's exit status, which says more when the
    command failed."""
    error = unseeded(run)
    if error is not None:
        raise error


def same_shape(runs: Sequence[Run]) -> tasks.Shape:
    """The shape every run had (processes, replicas), or the error naming two runs that differ: a run over 2
    workers and one over 1, or over 2 replicas and 4, measure different things and are never compared."""
    first = runs[0].shape if runs else tasks.Shape()
    for run in runs[1:]:
        other = run.shape
        if other.key() != first.key():
            raise RunError(
                f"the runs are not comparable: {runs[0].spec.label} ran as {first.describe()}, "
                f"{run.spec.label} as {other.describe()}",
                hint="give every run the same workers and devices (a launcher or a script that picks them from "
                "what is free, or from the seed, makes runs of different shapes)",
            )
    return first


def shape_changed() -> Callable[[Run], bool]:
    """A `fatal` test for run_all: True for a run whose shape differs from the first run's (no further run
    starts: same_shape then names both)."""
    first: list[tasks.Shape] = []
    lock = threading.Lock()

    def changed(run: Run) -> bool:
        with lock:
            if not first:
                first.append(run.shape)
            return run.shape.key() != first[0].key()

    return changed


def unusable(run: Run) -> bool:
    """A run that study and cost refuse: it exited non-zero or killed, or its hook could not seed it."""
    return run.failed or unseeded(run) is not None


def run_all(
    command: list[str],
    specs: Sequence[RunSpec],
    root: Path,
    jobs: int = 1,
    timeout: float | None = None,
    progress: ProgressCallback | None = None,
    slurm: Srun | None = None,
    fatal: Callable[[Run], bool] | None = None,
    first: int = 0,
) -> list[Run]:
    """Every run, `jobs` at a time, in the order of `specs` (each one a Slurm task with `slurm`). Once a run is
    `fatal` (the caller will refuse it) or could not be made, no further run starts: those under way end, and
    the runs made are returned (a command that fails after an hour must not be run 2n times first).
    `progress` hears "k of n runs done" before the first run and as each one ends. Run i's folder is
    root/run-NNN, NNN being `first` + i (a caller that makes its runs in several calls numbers them on)."""
    hook = hook_folder(root)
    done, stop, counting = [0], threading.Event(), threading.Lock()

    def report(count: int) -> None:
        if progress is not None:
            progress(ProgressEvent("runs", completed=count, total=len(specs), unit="runs"))

    report(0)

    def one(index: int) -> Run | None:
        if stop.is_set():
            return None
        try:
            run = run_once(command, specs[index], hook, root / f"run-{first + index:03d}", timeout, slurm)
        except BaseException:
            stop.set()
            raise
        if fatal is not None and fatal(run):
            stop.set()
        with counting:  # each count reported once, in order, whichever thread ends a run
            done[0] += 1
            report(done[0])
        return run

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        try:
            return [run for run in pool.map(one, range(len(specs))) if run is not None]
        except BaseException:
            # Ctrl-C or SIGTERM (envpin.cli raises Terminated) reaches this thread, not the workers waiting on
            # their runs: stop every run's whole tree now, or leaving the pool would wait for them to end.
            stop.set()
            with _LIVE_LOCK:
                live = list(_LIVE)
            for proc in live:
                _kill_tree(proc)
            raise


def failed(run: Run) -> RunError:
    """The error for a run that exited non-zero or was killed, with the end of its stderr. Only a run envpin
    stopped is said to have run past `timeout` (the out-of-memory killer's SIGKILL is not a timeout)."""
    problems = run.task_problems
    if run.timed_out:  # the tasks it killed left no record: only one that had raised before says something
        before = tasks.raised(run.records)
        return RunError(
            f"the command did not finish within {param('timeout')} ({run.spec.label}, {run.seconds:.0f} s)"
            + (f"; before that, {'; '.join(before)}" if before else ""),
            hint=f"raise {param('timeout')}, or make the runs shorter (fewer epochs or steps)"
            + ("; a worker that fails leaves the others waiting for it in their collectives" if before else ""),
        )
    if run.returncode == 0 and problems:
        return RunError(
            f"a distributed run did not run whole ({run.spec.label}, the command exited with status 0): "
            + "; ".join(problems),
            hint="every training task of TF_CONFIG must run to its end for the run to count; run the command by "
            f"itself to see why; with {param('keep')} DIR its output stays in DIR/{run.folder.name}",
        )
    if run.returncode < 0:
        try:
            name = f" ({signal.Signals(-run.returncode).name})"
        except ValueError:
            name = ""
        how = f"was killed by signal {-run.returncode}{name}"
    else:
        how = f"exited with status {run.returncode}"
    tail = run.log_tail()
    # The work folder is removed when the command ends unless it was `keep`'s: name the run's folder in it.
    named = f"; {'; '.join(problems)}" if problems else ""
    return RunError(
        f"the command {how} ({run.spec.label}){named}" + (f": {tail}" if tail else ""),
        hint=f"run the command by itself to see why; with {param('keep')} DIR its output stays in "
        f"DIR/{run.folder.name}",
    )
