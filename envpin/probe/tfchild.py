"""Child-process plumbing shared by the op battery, the golden training hash and the seed-hygiene check.

Standard library only, Python 3.6+ (copied into NGC images). TensorFlow always runs in a *fresh* child:

* determinism has to be on before the first op runs: TF < 2.8 reads ``TF_DETERMINISTIC_OPS`` once at
  start-up, and ``enable_op_determinism()`` does not re-check ops that already ran;
* run-to-run differences (thread pools, hash seeds, RNG state from OS entropy) only show between processes;
* an op that aborts or a TensorFlow that dies on import (SIGILL on a CPU without AVX) must not take the
  caller down.

A child prints exactly one JSON object on stdout; anything TensorFlow or user code prints meanwhile is
redirected to stderr (see :class:`StdoutToStderr`).
"""

import json
import os
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple

# Variables that switch TensorFlow's determinism on; removed for the "determinism off" comparison run.
DETERMINISM_SWITCHES = ("TF_DETERMINISTIC_OPS", "TF_CUDNN_DETERMINISTIC")

# Variables that change numerics or determinism and are worth echoing in a self-test report.
RELEVANT_ENV = (
    "TF_DETERMINISTIC_OPS",
    "TF_CUDNN_DETERMINISTIC",
    "TF_CUDNN_USE_FRONTEND",
    "TF_USE_CUDNN_AUTOTUNE",
    "TF_ENABLE_ONEDNN_OPTS",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    "OMP_NUM_THREADS",
    "ONEDNN_MAX_CPU_ISA",
    "TF_SET_ONEDNN_FPMATH_MODE",
    "TF_XLA_FLAGS",
    "XLA_FLAGS",
    "CUDA_VISIBLE_DEVICES",
    "PYTHONHASHSEED",
)

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Each TensorFlow child holds about 0.6 GB and spends its first seconds importing TF, much of it waiting on
# the disk and the loader: three at once were faster than two even on 2 CPUs (quick self-test 6-8 s vs
# 8-10 s) with a summed peak of ~1.65 GB, under the 2 GB goal. ENVPIN_SELFTEST_JOBS overrides it
# (1 = strictly one child at a time, for small machines).
_slots_lock = threading.Lock()
_slots: "Dict[str, Any]" = {"n": 0, "sem": None}


def max_jobs() -> int:
    """How many TensorFlow children may run at once."""
    raw = os.environ.get("ENVPIN_SELFTEST_JOBS", "")
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    return 3


def _semaphore() -> threading.Semaphore:
    with _slots_lock:
        n = max_jobs()
        sem: Optional[threading.Semaphore] = _slots["sem"]
        if sem is None or _slots["n"] != n:
            sem = threading.Semaphore(n)
            _slots["sem"], _slots["n"] = sem, n
        return sem


def child_env(
    base: Optional[Mapping[str, str]] = None, determinism: Optional[bool] = True, extra: Optional[Dict[str, str]] = None
) -> Dict[str, str]:
    """The environment for a child: the caller's (so thread and oneDNN settings pass through) plus the
    determinism switch turned on or off, and envpin importable even from a source checkout."""
    env = dict(os.environ if base is None else base)
    if determinism is True:
        env["TF_DETERMINISTIC_OPS"] = "1"
    elif determinism is False:
        for name in DETERMINISM_SWITCHES:
            env.pop(name, None)
    # TensorFlow's C++ INFO/WARNING lines only bury a child's real error message on stderr.
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    path = env.get("PYTHONPATH", "")
    parts = [p for p in path.split(os.pathsep) if p]
    if _PACKAGE_ROOT not in parts:
        env["PYTHONPATH"] = os.pathsep.join([_PACKAGE_ROOT, *parts])
    for key, val in (extra or {}).items():
        if val is None:
            env.pop(key, None)
        else:
            env[key] = val
    return env


def relevant_env(environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The determinism- and numerics-relevant variables that are set (values echoed as they are)."""
    env = os.environ if environ is None else environ
    return {k: env[k] for k in RELEVANT_ENV if k in env}


def tail(text: str, lines: int = 6, chars: int = 1200) -> str:
    kept = [ln for ln in (text or "").strip().splitlines() if ln.strip()][-lines:]
    return "\n".join(kept)[-chars:]


class slot(object):
    """Hold one child slot for a group of children that must run at once (the workers of one
    multi-worker run: started one by one, the first would wait for its peers while they wait for a slot)."""

    def __enter__(self) -> "slot":
        self._sem = _semaphore()
        self._sem.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._sem.release()


class _NoSlot(object):
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: Any) -> None:
        return None


def run_child(
    module: str,
    args: List[str],
    env: Dict[str, str],
    timeout: Optional[float] = None,
    python: Optional[str] = None,
    slot: bool = True,
) -> Tuple[Optional[Dict[str, Any]], Optional[str], float]:
    """Run ``python -m module args`` and parse the one JSON object it prints.

    Returns (payload, error, seconds): payload is None when the child failed, and error then says how
    (exit status or signal, and the tail of its stderr; a :class:`ChildTimeout` when it ran out of time).
    Never raises for a failing child. `timeout`: CPU seconds (default :func:`default_timeout`), with a wall
    limit of WALL_FACTOR times that. ``slot=False`` when the caller already holds a slot for this child's
    group (:class:`slot`).
    """
    timeout = default_timeout() if timeout is None else timeout
    cmd = [python or sys.executable, "-m", module, *list(args)]
    started = time.time()
    with _semaphore() if slot else _NoSlot():
        try:
            proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, env=env
            )
        except OSError as exc:
            return None, "could not start %s: %s" % (cmd[0], exc), time.time() - started
        stdout, stderr, timed_out = _wait(proc, timeout, started)
    seconds = time.time() - started
    if timed_out is not None:
        return None, ChildTimeout(module, timeout, seconds, timed_out), seconds
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    payload = None
    if lines:
        try:
            payload = json.loads(lines[-1])
        except ValueError:
            payload = None
    if proc.returncode == 0 and isinstance(payload, dict):
        return payload, None, seconds
    if proc.returncode < 0:
        how = "was killed by signal %d" % -proc.returncode
        if -proc.returncode == 4:
            how += " (SIGILL: this CPU lacks an instruction the TensorFlow build needs, e.g. AVX)"
    else:
        how = "exited with status %d" % proc.returncode
    detail = tail(stderr)
    return None, "%s %s%s" % (module, how, (": " + detail) if detail else ""), seconds


# --------------------------------------------------------------------------------------- time limits

#: The default limit of a child, in CPU seconds; ENVPIN_SELFTEST_TIMEOUT (or --timeout) sets it.
DEFAULT_TIMEOUT = 600.0
#: A child may run this many times its CPU limit in wall time: on a loaded machine it gets less CPU per
#: second, and a child waiting for a peer (an MWMS worker whose partner died) uses none.
WALL_FACTOR = 4.0
_POLL_S = 0.5


def default_timeout() -> float:
    """The child limit in CPU seconds: ENVPIN_SELFTEST_TIMEOUT when it is a positive number, else 600."""
    raw = os.environ.get("ENVPIN_SELFTEST_TIMEOUT", "").strip()
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if value > 0 else DEFAULT_TIMEOUT


def cpu_seconds(pid: int) -> Optional[float]:
    """User + system CPU seconds of a running process, all its threads (Linux /proc); None elsewhere."""
    try:
        with open("/proc/%d/stat" % pid) as fh:
            text = fh.read()
        fields = text[text.rindex(")") + 2 :].split()
        ticks = float(os.sysconf("SC_CLK_TCK"))
        return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime: fields 14 and 15 of stat(5)
    except (OSError, ValueError, IndexError):
        return None


def _wait(proc: Any, limit: float, started: float) -> Tuple[str, str, Optional[float]]:
    """Wait for `proc`, reading its output; stop it once it has used `limit` CPU seconds or WALL_FACTOR times
    that in wall time. Returns (stdout, stderr, CPU seconds used when it was stopped, else None)."""
    cpu: Optional[float] = 0.0
    while True:
        try:
            out, err = proc.communicate(timeout=_POLL_S)
            return out, err, None
        except subprocess.TimeoutExpired:
            pass
        now = cpu_seconds(proc.pid)
        cpu = now if now is not None else cpu
        wall = time.time() - started
        if (now is not None and now > limit) or wall > limit * WALL_FACTOR or (now is None and wall > limit):
            proc.kill()
            out, err = proc.communicate()
            return out, err, float(cpu or 0.0)


class ChildTimeout(str):
    """The error of a child stopped at its time limit: not a failure of what it tested but an unfinished
    test (inconclusive). A str, so it reads like any other child error; :meth:`info` says what it used."""

    module: str
    limit: float
    wall: float
    cpu: float

    def __new__(cls, module: str, limit: float, wall: float, cpu: float) -> "ChildTimeout":
        text = "%s ran out of time after %.0f s wall, %.0f s CPU (limit %.0f s CPU, %.0f s wall)" % (
            module,
            wall,
            cpu,
            limit,
            limit * WALL_FACTOR,
        )
        self = str.__new__(cls, text)
        self.module, self.limit, self.wall, self.cpu = module, limit, wall, cpu
        return self

    def info(self, what: str) -> Dict[str, Any]:
        return {
            "what": what,
            "module": self.module,
            "limit_cpu_s": round(self.limit, 1),
            "limit_wall_s": round(self.limit * WALL_FACTOR, 1),
            "wall_s": round(self.wall, 1),
            "cpu_s": round(self.cpu, 1),
            "message": "%s: %s" % (what, self),
        }


def failure(error: Optional[str], what: str) -> Dict[str, Any]:
    """A child's failure as a result: ``{"timed_out": ...}`` for a timeout (inconclusive, never a FAIL),
    else ``{"error": ...}``."""
    if isinstance(error, ChildTimeout):
        return {"timed_out": error.info(what)}
    return {"error": str(error)}


class StdoutToStderr(object):
    """Send file descriptor 1 to stderr for the duration, so the child's stdout stays one JSON object
    even when TensorFlow's C++ code or user code prints."""

    def __enter__(self) -> "StdoutToStderr":
        sys.stdout.flush()
        self._saved = os.dup(1)
        os.dup2(2, 1)
        return self

    def __exit__(self, *exc: Any) -> None:
        sys.stdout.flush()
        os.dup2(self._saved, 1)
        os.close(self._saved)


def run_children(
    module: str,
    args: List[str],
    env: Dict[str, str],
    timeout: Optional[float] = None,
    python: Optional[str] = None,
    runs: int = 2,
) -> List[Any]:
    """Run the same child `runs` times in parallel fresh processes (comparing fresh processes is the point)."""
    results: List[Any] = [None] * runs

    def one(i: int) -> None:
        results[i] = run_child(module, args, env, timeout, python)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(runs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def emit(payload: Dict[str, Any]) -> None:
    """The child's one line of output."""
    sys.stdout.write(json.dumps(payload, sort_keys=True) + "\n")
    sys.stdout.flush()


def import_tensorflow(determinism: bool) -> Tuple[Any, Dict[str, Any]]:
    """Import TensorFlow in this (fresh) child with determinism as asked, before any op runs.

    TF >= 2.8 gets ``enable_op_determinism()`` on top of ``TF_DETERMINISTIC_OPS=1`` (which the parent put in
    the environment, because TF 2.1-2.7 and TF1 builds read only the variable). Raises ImportError (or
    whatever the import raised) when TensorFlow is unusable.
    """
    import tensorflow as tf

    version = getattr(tf, "__version__", None) or getattr(tf, "VERSION", "unknown")
    info: Dict[str, Any] = {
        "requested": "on" if determinism else "off",
        "TF_DETERMINISTIC_OPS": os.environ.get("TF_DETERMINISTIC_OPS"),
        "enable_op_determinism": "not called",
        "env": relevant_env(),
    }
    experimental = getattr(getattr(tf, "config", None), "experimental", None)
    enable = getattr(experimental, "enable_op_determinism", None)
    disable = getattr(experimental, "disable_op_determinism", None)
    if determinism:
        if enable is not None:
            enable()
            info["enable_op_determinism"] = "called"
            info["method"] = "tf.config.experimental.enable_op_determinism() + TF_DETERMINISTIC_OPS=1"
        else:
            info["enable_op_determinism"] = "unavailable (TensorFlow %s predates 2.8)" % version
            info["method"] = "TF_DETERMINISTIC_OPS=1 set before TensorFlow was imported"
    else:
        if disable is not None:
            disable()
        info["method"] = "off: TF_DETERMINISTIC_OPS and TF_CUDNN_DETERMINISTIC unset"
    return tf, info


def is_eager(tf: Any) -> bool:
    """TF2 runs eagerly; TF1 (1.15) builds graphs and needs sessions."""
    fn = getattr(tf, "executing_eagerly", None)
    return bool(fn()) if fn is not None else False


def to_numpy(value: Any) -> Any:
    """An eager tensor (or anything array-like) as a NumPy array."""
    import numpy as np

    if hasattr(value, "numpy"):
        value = value.numpy()
    return np.asarray(value)


def python_info() -> str:
    return "%d.%d.%d" % sys.version_info[:3]
