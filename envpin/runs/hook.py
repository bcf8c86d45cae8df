"""The run hook: copied as ``sitecustomize.py`` onto the PYTHONPATH of a command envpin runs (standard library
only, Python 3.6+), so a training script is observed without being edited.

Python imports it at start-up. It imports nothing heavy: it waits until the script itself has imported
TensorFlow (and Keras, when Keras is what imports TensorFlow), then, as the environment asks,

- ``ENVPIN_SEED``: seeds Python's ``random``, NumPy and TensorFlow with that integer;
- ``ENVPIN_RUNS_RECIPE=1``: applies envpin's determinism recipe for this TensorFlow (its variables are
  set here, before TensorFlow is imported, and its steps once it is);
- ``ENVPIN_RUNS_DUMP=DIR``: turns on TensorFlow's debugger dumps with full tensor values
  (``tf.debugging.experimental.enable_dump_debug_info``; the summary modes are avoided because
  DebugNumericSummaryV2 raises under determinism on a GPU);
- ``ENVPIN_RUNS_STEPS=N``: stops training after N Keras training steps (and so the dump grows no more);
- ``ENVPIN_RUNS_COMPARE=JSON`` (bisect's second run): when the process ends, once TensorFlow has closed its
  dump, compares the first run's dump with this one's (``dumpdiff.diff``, loaded from the path the JSON names)
  in this process, whose TensorFlow is loaded already, and keeps the result in the record (``comparison``);
- ``ENVPIN_RUNS_RESUME=MODE:K`` (``envpin resume-check``): records the training state (weights, optimizer
  slots and iterations, the tf.data iterator, the random generators of TensorFlow, Python and NumPy) as the
  step after K steps done begins (``observe``), does the same and then ends the process there as a preempted
  job would end (``stop``, exit status INTERRUPTED), or records it as the first step of a resumed run begins
  (``resumed``); in every mode also as the process ends. Keras ``fit`` is observed through the callback; a
  custom loop calls ``envpin.before_step(step, model=, optimizer=, iterator=)`` at the top of each step;
- ``ENVPIN_RUNS_OUT=DIR``: writes what it saw to DIR/hook-PID.json when a process that imported TensorFlow
  ends: TensorFlow's
  version, the Keras ``History`` of every ``fit``, the time of each training step, errors.

A distributed command runs several such processes, or one process over several devices: each record also
says which task of ``TF_CONFIG`` its process was (type and index, and how many tasks each job of the cluster
has; never its hosts), the tf.distribute strategy it created (class, replica count, devices) and an exception
that ended it, so the host can tell the workers apart, pick the chief and see one that failed.
"""

import atexit
import os
import sys
import time

TYPE_CHECKING = False  # typing's without importing it at every start-up; annotations naming its types are quoted
if TYPE_CHECKING:
    from importlib.abc import Loader
    from importlib.machinery import ModuleSpec
    from types import ModuleType
    from typing import Any, Dict, List, Optional, Sequence, TypedDict  # novermin (type checking only)

    class Record(TypedDict, total=False):
        """What the host reads back (envpin/runs/launch.py): hook-PID.json."""

        pid: int
        python: str
        started: float
        ended: float
        tf_version: Optional[str]
        gpus: Optional[int]
        seed: Optional[int]
        recipe: Optional[Dict[str, Any]]
        dump: Optional[str]
        history: Dict[str, List[float]]
        step_seconds: List[float]
        stopped_after_steps: Optional[int]
        errors: List[str]
        task: Optional[Dict[str, Any]]
        cluster: Optional[Dict[str, int]]
        strategy: Optional[Dict[str, Any]]
        uncaught: Optional[str]
        comparison: Dict[str, Any]
        resume: Dict[str, Any]


#: What this process saw and did; written as JSON when it exits.
RECORD: "Record" = {
    "pid": os.getpid(),
    "python": sys.executable,
    "started": time.time(),
    "tf_version": None,
    "gpus": None,
    "seed": None,
    "recipe": None,
    "dump": None,
    "history": {},
    "step_seconds": [],
    "stopped_after_steps": None,
    "errors": [],
    "task": None,
    "cluster": None,
    "strategy": None,
    "uncaught": None,
}
#: Exit status of a process whose TensorFlow has no debugger dumps (the host refuses with a clear error).
NO_DEBUGGER = 86
#: Exit status of a process the hook ended at its resume point (``ENVPIN_RUNS_RESUME=stop:K``).
INTERRUPTED = 87
_STATE: "Dict[str, Any]" = {"tensorflow": False, "keras_importing": 0, "ready": False, "busy": False, "steps": 0}


def _env_int(name: str) -> "Optional[int]":
    raw = os.environ.get(name, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        RECORD["errors"].append("%s=%r is not an integer: ignored" % (name, raw))
        return None


def _write_record() -> None:
    out = os.environ.get("ENVPIN_RUNS_OUT")
    if not out or not _STATE["tensorflow"]:  # a process that never imported TensorFlow has nothing to say
        return
    import json  # here, not at start-up: json pulls in re, enum and collections (about 6 ms)

    RECORD["ended"] = time.time()
    resume = RECORD.get("resume")
    if resume is not None and not resume.get("interrupted") and _STATE.get("resume_refs"):
        resume["end"] = snapshot(*_STATE["resume_refs"])
    if os.environ.get("ENVPIN_RUNS_COMPARE") and RECORD["dump"] not in (None, "unavailable"):
        _compare(os.environ["ENVPIN_RUNS_COMPARE"])
    path = os.path.join(out, "hook-%d.json" % os.getpid())
    try:
        with open(path + ".tmp", "w") as fh:
            json.dump(RECORD, fh, sort_keys=True)
        os.replace(path + ".tmp", path)
    except OSError:
        pass


#: The most characters of an uncaught exception's message kept in the record.
_UNCAUGHT = 500


def _compare(raw: str) -> None:
    """bisect's second run, as it ends: its dump against the first run's, read here with the TensorFlow this
    process has loaded (another process would import it again: seconds of CPU). ``raw`` is bisect's JSON:
    ``program`` (the path of dumpdiff.py), ``dump`` (the first run's dump of the replica compared), ``task``
    (that replica's TF_CONFIG task, or null: every process that dumped compares), ``device`` and ``max_ops``
    (dumpdiff.diff's). The record keeps ``{"dump": ..., "result": {...}}``, or ``{"dump": ..., "error": "..."}``
    when the comparison failed."""
    import json

    found: "Dict[str, Any]" = {"dump": None}
    try:
        ask = json.loads(raw)
        if ask.get("task") is not None and ask["task"] != RECORD["task"]:
            return  # another task's process: the replica compared is not this one
        found["dump"] = ask["dump"]
        # Closes the dump, so that every event is on disk (TensorFlow's own atexit handler, which ran before
        # this one, did already where it registers one; a second call does nothing).
        experimental = sys.modules["tensorflow"].debugging.experimental
        if hasattr(experimental, "disable_dump_debug_info"):
            experimental.disable_dump_debug_info()
        import importlib.util

        spec = importlib.util.spec_from_file_location("_envpin_dumpdiff", ask["program"])
        if spec is None or spec.loader is None:
            raise ImportError("cannot load %s" % ask["program"])
        dumpdiff = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(dumpdiff)
        found["result"] = dumpdiff.diff(ask["dump"], RECORD["dump"], ask.get("max_ops"), ask.get("device"))
    except Exception as exc:  # recorded: bisect reports it as the comparison's failure
        text = "%s: %s" % (type(exc).__name__, exc)
        found["error"] = text if len(text) <= _UNCAUGHT else text[: _UNCAUGHT - 3] + "..."
    RECORD["comparison"] = found


def tf_config(raw: "Optional[str]") -> "Dict[str, Any]":
    """What the record keeps of TF_CONFIG: this process's task ({"type": str, "index": int}) and how many tasks
    each job of the cluster has ({"worker": 2}); hosts and ports are left out. A value TensorFlow could not use
    either gives an error instead (recorded, the run goes on: TensorFlow itself will say more)."""
    if raw is None or not raw.strip():
        return {}
    import json

    try:
        data = json.loads(raw)
    except ValueError as exc:
        return {"error": "TF_CONFIG is not JSON: %s" % exc}
    if not isinstance(data, dict):
        return {"error": "TF_CONFIG is not a JSON object"}
    found: "Dict[str, Any]" = {}
    cluster = data.get("cluster")
    if isinstance(cluster, dict):
        found["cluster"] = {
            str(job): len(hosts) for job, hosts in sorted(cluster.items()) if isinstance(hosts, (list, dict))
        }
    task = data.get("task")
    if isinstance(task, dict) and isinstance(task.get("type"), str):
        index = task.get("index", 0)
        if isinstance(index, int) and not isinstance(index, bool) and index >= 0:
            found["task"] = {"type": task["type"], "index": index}
        else:
            found["error"] = "TF_CONFIG's task index %r is not a count" % (index,)
    return found


def _strategy_seen(strategy: "Any") -> None:
    """A tf.distribute strategy the script created: its class, replica count and devices (the last one wins;
    TensorFlow's own default strategy is not one the script created)."""
    name = type(strategy).__name__
    if name.startswith("_Default"):
        return
    devices = getattr(getattr(strategy, "extended", None), "worker_devices", None) or ()
    RECORD["strategy"] = {
        "class": name,
        "replicas": int(strategy.num_replicas_in_sync),
        "devices": [str(d) for d in devices],
    }


def _watch_strategies(tf: "ModuleType") -> None:
    """Learn the strategies the script creates: tf.distribute.Strategy's constructor, which every TF2 strategy
    calls once its devices are known, records each one after it ran (nothing else changes)."""
    base = getattr(getattr(tf, "distribute", None), "Strategy", None)
    original = getattr(base, "__init__", None)
    if base is None or original is None or getattr(original, "_envpin_hooked", False):
        return

    def __init__(self: "Any", *args: "Any", **kwargs: "Any") -> None:
        original(self, *args, **kwargs)
        try:
            _strategy_seen(self)
        except Exception as exc:  # recorded; the strategy is the script's and works as before
            RECORD["errors"].append("strategy: %s: %s" % (type(exc).__name__, exc))

    setattr(__init__, "_envpin_hooked", True)  # noqa: B010 (an attribute functions do not declare)
    setattr(base, "__init__", __init__)  # noqa: B010


def _excepthook(previous: "Any") -> "Any":
    """sys.excepthook that notes an exception that ends the process, then hands it on: a worker of a
    distributed run may fail while its launcher still exits 0."""

    def hook(kind: "Any", value: "Any", tb: "Any") -> None:
        try:
            text = "%s: %s" % (getattr(kind, "__name__", kind), value)
            RECORD["uncaught"] = text if len(text) <= _UNCAUGHT else text[: _UNCAUGHT - 3] + "..."
        except Exception:
            RECORD["uncaught"] = "an exception that could not be shown"
        previous(kind, value, tb)

    return hook


def _recipe_environment() -> None:
    """The recipe's variables, before TensorFlow is imported (it reads some of them only once)."""
    try:
        from envpin.probe import runtime

        recipe = runtime.current_recipe()
    except Exception as exc:  # the command must run even when envpin cannot help
        RECORD["errors"].append("recipe: %s: %s" % (type(exc).__name__, exc))
        return
    if recipe is None:
        return
    for item in recipe["env"]:
        if item["name"] != "PYTHONHASHSEED":  # only the launcher can set it, before Python starts
            os.environ[item["name"]] = item["value"]
    for item in recipe["unset"]:
        os.environ.pop(item["name"], None)


def _seed(seed: int) -> None:
    """ENVPIN_SEED without the recipe: Python, NumPy (when installed) and TensorFlow, the way envpin seeds
    everywhere (envpin/probe/seeding.py, from the envpin.pyz on PYTHONPATH beside this hook)."""
    from envpin.probe import seeding

    seeding.seed(seed, sys.modules["tensorflow"])


def _reader_missing() -> bool:
    try:
        from tensorflow.python.debug.lib import debug_events_reader
    except Exception:
        return True
    return not hasattr(debug_events_reader, "DebugDataReader")


def _dump(tf: "ModuleType", root: str) -> None:
    """Turn on full-tensor dumps, or end the process with NO_DEBUGGER when this TensorFlow cannot."""
    experimental = getattr(getattr(tf, "debugging", None), "experimental", None)
    enable = getattr(experimental, "enable_dump_debug_info", None)
    problem = None
    if enable is None:
        problem = "no tf.debugging.experimental.enable_dump_debug_info"
    elif _reader_missing():
        # TensorFlow 2.1 dumps, but has no reader, and the reader of 2.2 and later cannot load its dumps.
        problem = "its dumps cannot be read back: no DebugDataReader in tensorflow.python.debug.lib.debug_events_reader"
    else:
        regex = os.environ.get("ENVPIN_RUNS_OP_REGEX") or None
        try:
            enable(root, tensor_debug_mode="FULL_TENSOR", circular_buffer_size=-1, op_regex=regex)
        except Exception as exc:  # e.g. a TensorFlow whose debugger lacks the FULL_TENSOR mode
            problem = "enable_dump_debug_info(tensor_debug_mode='FULL_TENSOR') failed: %s: %s" % (
                type(exc).__name__,
                exc,
            )
    if problem is not None:
        RECORD["dump"] = "unavailable"
        RECORD["errors"].append(problem)
        _write_record()
        os._exit(NO_DEBUGGER)
    RECORD["dump"] = root


def _digest(chunks: "Any") -> str:
    """SHA-256 (its first 16 hex digits) over byte strings."""
    import hashlib

    sha = hashlib.sha256()
    for chunk in chunks:
        sha.update(chunk)
    return sha.hexdigest()[:16]


def _tensor_bytes(value: "Any") -> bytes:
    array = value.numpy() if hasattr(value, "numpy") else value
    return str(getattr(array, "dtype", "")).encode() + bytes(array.tobytes())


def _variables(obj: "Any") -> "List[Any]":
    """The variables of a Keras model or layer, a tf.Module, or a list of variables, in their order."""
    if obj is None:
        return []
    if isinstance(obj, (list, tuple)):
        return list(obj)
    for name in ("weights", "variables"):
        found = getattr(obj, name, None)
        if callable(found):  # Keras 2 optimizers: variables()
            found = found()
        if found is not None:
            return list(found)
    return []


def _iterations(optimizer: "Any") -> "Optional[int]":
    value = getattr(optimizer, "iterations", None)
    if value is None:
        return None
    return int(value.numpy() if hasattr(value, "numpy") else value)


def _iterator_state(iterator: "Any") -> "Optional[str]":
    """The digest of a tf.data iterator's serialized state (its position, its shuffle buffer, its seeds): what
    tf.train.Checkpoint(iterator=...) saves."""
    resource = getattr(iterator, "_iterator_resource", None)
    if resource is None:
        return None
    tf = sys.modules["tensorflow"]
    state = tf.raw_ops.SerializeIterator(resource_handle=resource, external_state_policy=0)
    return _digest([tf.io.serialize_tensor(state).numpy()])


def _generators_seen() -> "List[Any]":
    return [g for g in (ref() for ref in _STATE.get("generators", ())) if g is not None]


def _watch_generators(tf: "ModuleType") -> None:
    """Learn the tf.random.Generator objects the script creates (every constructor, from_seed too, ends in
    __init__), so that their states can be recorded; weak references, so none is kept alive."""
    base = getattr(getattr(tf, "random", None), "Generator", None)
    original = getattr(base, "__init__", None)
    if base is None or original is None or getattr(original, "_envpin_hooked", False):
        return
    import weakref

    _STATE["generators"] = []

    def __init__(self: "Any", *args: "Any", **kwargs: "Any") -> None:
        original(self, *args, **kwargs)
        _STATE["generators"].append(weakref.ref(self))

    setattr(__init__, "_envpin_hooked", True)  # noqa: B010 (an attribute functions do not declare)
    setattr(base, "__init__", __init__)  # noqa: B010


def _global_generator() -> "Any":
    """TensorFlow's global generator if the script (or Keras) made it; asking for it would make one."""
    module = sys.modules.get("tensorflow.python.ops.stateful_random_ops")
    return getattr(module, "global_generator", None)


def _op_seeds() -> "Optional[str]":
    """The global seed and the sequence that gives ops without a seed of their own theirs (eager), or None
    when no global seed is set."""
    module = sys.modules.get("tensorflow.python.eager.context")
    ctx = module.context() if module is not None and hasattr(module, "context") else None
    rng = getattr(ctx, "_rng", None)
    if rng is None:
        return None
    return _digest([repr((getattr(ctx, "_seed", None), rng.getstate())).encode()])


def snapshot(model: "Any" = None, optimizer: "Any" = None, iterator: "Any" = None) -> "Dict[str, Any]":
    """The training state as digests, each component None when it cannot be seen (or reading it failed: the
    error is recorded); the run goes on unchanged."""
    found: "Dict[str, Any]" = {}

    def weights() -> "Any":
        found_vars = _variables(model)
        return _digest(_tensor_bytes(v) for v in found_vars) if found_vars else None

    def slots() -> "Any":
        own = getattr(optimizer, "iterations", None)
        found_vars = [v for v in _variables(optimizer) if v is not own]
        return _digest(_tensor_bytes(v) for v in found_vars) if found_vars else None

    def generators() -> "Any":
        known = [g for g in _generators_seen() if g is not _global_generator()]
        return _digest(_tensor_bytes(g.state) for g in known) if known else None

    def global_generator() -> "Any":
        gen = _global_generator()
        return _digest([_tensor_bytes(gen.state)]) if gen is not None else None

    def python_random() -> "Any":
        import random

        return _digest([repr(random.getstate()).encode()])

    def numpy_random() -> "Any":
        numpy = sys.modules.get("numpy")
        if numpy is None:
            return None
        kind, keys, pos, gauss, cached = numpy.random.get_state()
        return _digest([keys.tobytes(), repr((kind, pos, gauss, cached)).encode()])

    readers = (
        ("weights", weights),
        ("optimizer_iterations", lambda: _iterations(optimizer) if optimizer is not None else None),
        ("optimizer_slots", slots),
        ("iterator", lambda: _iterator_state(iterator) if iterator is not None else None),
        ("generators", generators),
        ("global_generator", global_generator),
        ("op_seeds", _op_seeds),
        ("python_random", python_random),
        ("numpy_random", numpy_random),
    )
    for name, reader in readers:
        try:
            found[name] = reader()
        except Exception as exc:  # recorded; the component is then not seen
            found[name] = None
            RECORD["errors"].append("resume: %s: %s: %s" % (name, type(exc).__name__, exc))
    return found


def _resume_mode() -> "Optional[Dict[str, Any]]":
    """ENVPIN_RUNS_RESUME=MODE:K as the record's ``resume`` (mode, at), or None."""
    raw = os.environ.get("ENVPIN_RUNS_RESUME", "").strip()
    if not raw:
        return None
    mode, _, at = raw.partition(":")
    if mode not in ("observe", "stop", "resumed") or not at.isdigit():
        RECORD["errors"].append("ENVPIN_RUNS_RESUME=%r is not MODE:K: ignored" % raw)
        return None
    if "resume" not in RECORD:
        RECORD["resume"] = {"mode": mode, "at": int(at), "point": None, "end": None, "interrupted": False}
    return RECORD["resume"]


def before_step(
    step: "Optional[int]" = None, model: "Any" = None, optimizer: "Any" = None, iterator: "Any" = None
) -> None:
    """A training step is about to begin, `step` steps done (default: the optimizer's iterations, else the
    steps this hook has counted). Under ENVPIN_RUNS_RESUME, records the state at the resume point and, in
    ``stop`` mode, ends the process there; otherwise nothing. The Keras callback calls it; a custom loop
    calls it through ``envpin.before_step``."""
    resume = _resume_mode()
    if resume is None:
        return
    _STATE["resume_refs"] = (model, optimizer, iterator)
    _STATE["before"] = _STATE.get("before", 0) + 1
    if step is None:
        step = _iterations(optimizer) if optimizer is not None else None
    if step is None:  # the calls before this one
        step = _STATE["before"] - 1
    if resume["point"] is not None:
        return
    if resume["mode"] == "resumed" or int(step) == resume["at"]:
        resume["point"] = dict(snapshot(model, optimizer, iterator), steps=int(step))
    if resume["mode"] == "stop" and resume["point"] is not None:
        resume["interrupted"] = True
        _write_record()
        for name in ("stdout", "stderr"):  # the script's own buffered output (the hook writes nothing there)
            flush = getattr(getattr(sys, name, None), "flush", None)
            if flush is not None:
                flush()
        os._exit(INTERRUPTED)  # as a preempted job ends: no exit handler, no further save


def _callback_class(base: type) -> type:
    """A subclass of this Keras's Callback (made with type(): the base is only known at run time) that times
    each training step and, after ENVPIN_RUNS_STEPS steps, stops the training. (Turning the dump off while
    the process runs crashes TensorFlow 2.21 with a segmentation fault: the run is ended instead.)"""
    steps = _env_int("ENVPIN_RUNS_STEPS")
    resuming = bool(os.environ.get("ENVPIN_RUNS_RESUME"))

    def on_train_batch_begin(self: "Any", batch: int, logs: "Optional[Dict[str, Any]]" = None) -> None:
        if resuming:
            before_step(model=self.model, optimizer=getattr(self.model, "optimizer", None))
        self._envpin_t0 = time.perf_counter()

    def on_train_batch_end(self: "Any", batch: int, logs: "Optional[Dict[str, Any]]" = None) -> None:
        RECORD["step_seconds"].append(time.perf_counter() - getattr(self, "_envpin_t0", time.perf_counter()))
        _STATE["steps"] += 1
        if steps is not None and _STATE["steps"] >= steps and RECORD["stopped_after_steps"] is None:
            RECORD["stopped_after_steps"] = _STATE["steps"]
            self.model.stop_training = True

    methods = {"on_train_batch_begin": on_train_batch_begin, "on_train_batch_end": on_train_batch_end}
    return type("EnvpinRunHook", (base,), methods)


def _patch_fit(model_class: type, callback_base: type) -> None:
    original = getattr(model_class, "fit")  # noqa: B009 (mypy knows no `fit` of a type)
    if getattr(original, "_envpin_hooked", False):
        return
    callback = _callback_class(callback_base)

    def fit(self: "Any", *args: "Any", **kwargs: "Any") -> "Any":
        if RECORD["stopped_after_steps"] is not None:  # the step budget is spent: later fits do nothing
            kwargs["epochs"] = kwargs.get("initial_epoch", 0)
        kwargs["callbacks"] = [*list(kwargs.get("callbacks") or []), callback()]
        history = original(self, *args, **kwargs)
        for key, values in sorted(getattr(history, "history", {}).items()):
            try:
                RECORD["history"].setdefault(key, []).extend(float(v) for v in values)
            except (TypeError, ValueError):
                continue
        return history

    setattr(fit, "_envpin_hooked", True)  # noqa: B010 (an attribute functions do not declare)
    setattr(model_class, "fit", fit)  # noqa: B010


def _keras() -> None:
    """Hook Model.fit of every Keras this process uses (keras, and tf.keras when it is another one)."""
    seen = []
    for name in ("keras", "tensorflow.keras"):
        try:
            module = __import__(name, fromlist=["Model"])
            model, callbacks = module.Model, module.callbacks.Callback
        except Exception:
            continue
        if model not in seen:
            seen.append(model)
            _patch_fit(model, callbacks)


def _ready() -> None:
    """TensorFlow (and the Keras importing it) are loaded: seed, apply the recipe, dump, hook Keras."""
    tf = sys.modules["tensorflow"]
    RECORD["tf_version"] = getattr(tf, "__version__", None) or getattr(tf, "VERSION", None)
    seed = _env_int("ENVPIN_SEED")
    RECORD["seed"] = seed
    config = tf_config(os.environ.get("TF_CONFIG"))
    RECORD["task"], RECORD["cluster"] = config.get("task"), config.get("cluster")
    if "error" in config:
        RECORD["errors"].append("TF_CONFIG: %s" % config["error"])
    try:
        RECORD["gpus"] = len(tf.config.list_physical_devices("GPU"))
    except Exception:
        RECORD["gpus"] = None
    try:
        if os.environ.get("ENVPIN_RUNS_RECIPE") == "1":
            import envpin

            report = envpin.enable_determinism(seed=42 if seed is None else seed)
            RECORD["recipe"] = {"id": report["recipe"], "applied": report["applied"], "warnings": report["warnings"]}
        elif seed is not None:
            _seed(seed)
    except Exception as exc:  # recorded; the run goes on as the script wrote it
        RECORD["errors"].append("seeding: %s: %s" % (type(exc).__name__, exc))
    root = os.environ.get("ENVPIN_RUNS_DUMP")
    if root:
        _dump(tf, os.path.join(root, "dump-%d" % os.getpid()))
    try:
        _keras()
    except Exception as exc:
        RECORD["errors"].append("keras: %s: %s" % (type(exc).__name__, exc))
    try:
        _watch_strategies(tf)
    except Exception as exc:
        RECORD["errors"].append("strategy: %s: %s" % (type(exc).__name__, exc))
    if _resume_mode() is not None:
        try:
            _watch_generators(tf)
        except Exception as exc:
            RECORD["errors"].append("resume: generators: %s: %s" % (type(exc).__name__, exc))


if TYPE_CHECKING:
    _LoaderBase = Loader
else:
    _LoaderBase = object  # importlib.abc costs start-up time; the protocol is what the import system uses


class _Loader(_LoaderBase):
    """Wraps the loader of tensorflow/keras to learn when their import has finished."""

    def __init__(self, loader: "Loader", name: str) -> None:
        self._loader, self._name = loader, name

    def __getattr__(self, attr: str) -> "Any":
        return getattr(self._loader, attr)

    def create_module(self, spec: "ModuleSpec") -> "Optional[ModuleType]":
        return self._loader.create_module(spec)

    def exec_module(self, module: "ModuleType") -> None:
        keras = self._name == "keras"
        _STATE["keras_importing"] += keras
        try:
            self._loader.exec_module(module)
        finally:
            _STATE["keras_importing"] -= keras
        if self._name == "tensorflow":
            _STATE["tensorflow"] = True
        if _STATE["tensorflow"] and not _STATE["keras_importing"] and not _STATE["ready"]:
            _STATE["ready"] = True
            _ready()


class _Finder(object):
    def find_spec(
        self, name: str, path: "Optional[Sequence[str]]" = None, target: "Optional[ModuleType]" = None
    ) -> "Optional[ModuleSpec]":
        if name not in ("tensorflow", "keras") or _STATE["busy"] or _STATE["ready"]:
            return None
        import importlib.util

        _STATE["busy"] = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            _STATE["busy"] = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _Loader(spec.loader, name)
        return spec


def _chain() -> None:
    """Run the sitecustomize this one shadows, if the environment has one (Debian's Python does)."""
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        candidate = os.path.join(os.path.abspath(entry or "."), "sitecustomize.py")
        if os.path.dirname(candidate) != here and os.path.isfile(candidate):
            import importlib.util

            spec = importlib.util.spec_from_file_location("_envpin_next_sitecustomize", candidate)
            if spec is None or spec.loader is None:
                return
            try:
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            except Exception as exc:
                RECORD["errors"].append("sitecustomize %s: %s" % (candidate, exc))
            return


def install() -> None:
    if os.environ.get("ENVPIN_RUNS_RECIPE") == "1":
        _recipe_environment()
    atexit.register(_write_record)
    sys.excepthook = _excepthook(sys.excepthook)
    sys.meta_path.insert(0, _Finder())
    _chain()


if __name__ == "sitecustomize":
    install()
