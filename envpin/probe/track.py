"""Tracked runs: what envpin knows about the environment, logged with every training run (``envpin.track``).

Standard library only (Python 3.6+); it travels into images in envpin.pyz. At the start of a run
:func:`start` probes the environment (the probe's own report and fingerprint: envpin.probe.report and
envpin.probe.fields), reads the lock's inputs hash and image (tomllib, Python 3.11+), the
device class (envpin.probe.deviceclass), the recipe in force (envpin.probe.runtime: the image's ENVPIN_RECIPE
and the recipe's variables), the seed and the verdict of the last self-test report; at the end
:meth:`Run.finish` adds the hash of the final weights (envpin.probe.golden.weights_digest). What the run found
goes to the experiment trackers (envpin.probe.trackers), never to stdout or stderr.

Strict mode (``strict=True`` or ``ENVPIN_STRICT=1``) compares the live environment with the lock before the
first step and raises :class:`DriftError` naming the breaking differences. The comparison is the lock's own
rule (``Lock.verify``), asked of ``envpin verify --report`` in a child of this interpreter: this module never
imports envpin's host side, and where only envpin.pyz is installed strict mode refuses to start.
"""

import json
import os
import subprocess
import sys
import time

from envpin.probe._common import describe

TYPE_CHECKING = False  # typing's without importing it; annotations naming its types are quoted (3.6 evaluates them)
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional, Sequence, Tuple

#: The version of the run record (envpin-run.json) and of the names below.
RECORD_SCHEMA = 1
STRICT_ENV = "ENVPIN_STRICT"
SEED_ENV = "ENVPIN_SEED"
#: A probe report (`envpin probe --selftest -o FILE`) whose self-test verdict the run records.
REPORT_ENV = "ENVPIN_REPORT"
#: What the run's files are called where a tracker keeps files (an MLflow artifact, a W&B file and artifact).
REPORT_NAME = "envpin-report.json"
RECORD_NAME = "envpin-run.json"
#: The prefix of every parameter, tag and config key envpin logs.
PREFIX = "envpin."
#: What the start record logs as parameters, in this order (the keys of `Run.params`).
PARAMS = (
    "fingerprint",
    "device_class",
    "lock.inputs_hash",
    "lock.image_id",
    "recipe",
    "seed",
    "verify",
    "selftest",
    "strict",
    "envpin_version",
)


class DriftError(RuntimeError):
    """Strict mode: the live environment differs from the lock in breaking fields (or cannot be compared).

    `differences`: (field, expected, actual, why) for each breaking difference."""

    def __init__(self, message: str, differences: "Optional[List[Dict[str, Any]]]" = None) -> None:
        super(DriftError, self).__init__(message)
        self.differences = list(differences or [])


def truthy(text: "Optional[str]") -> bool:
    return (text or "").strip().lower() in ("1", "true", "yes", "on")


def lock_path(lock: "Optional[str]" = None, environ: "Optional[Dict[str, str]]" = None) -> "Optional[str]":
    """The lock the run belongs to: `lock`, else ENVPIN_LOCK, else where an envpin image keeps it, else
    ./envpin.lock; None when there is none."""
    from envpin.probe.envvars import LOCK_CANDIDATES

    env = os.environ if environ is None else environ
    if lock:
        return str(lock)
    for path in [env.get("ENVPIN_LOCK", ""), *LOCK_CANDIDATES, "envpin.lock"]:
        if path and os.path.isfile(path):
            return path
    return None


def read_lock(path: str) -> "Optional[Dict[str, Any]]":
    """The lock's tables, with the standard library's TOML reader (Python 3.11+); None where there is none.
    Only what the lock records is read here; comparing with it is envpin verify's (see _verify)."""
    import importlib

    try:  # by name: the type checker reads the package for Python 3.10, which has no tomllib
        tomllib = importlib.import_module("tomllib")
    except ImportError:  # Python < 3.11 (an older image): the run records that the lock was not read
        return None
    with open(path, "rb") as fh:
        data = tomllib.load(fh)
    return data if isinstance(data, dict) else None


def _verify(path: str, report: "Dict[str, Any]") -> "Dict[str, Any]":
    """`envpin verify --lock PATH --report LIVE --json`, in a child of this interpreter: the lock's rule is
    envpin's host side (its lock reader and the differences' severities), which the standard-library part
    never imports. Raises RuntimeError when it cannot answer (envpin's command line not installed here)."""
    import tempfile

    fd, live = tempfile.mkstemp(prefix="envpin-track-", suffix=".json")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(report, fh)
        proc = subprocess.run(
            [sys.executable, "-m", "envpin", "verify", "--lock", path, "--report", live, "--json"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            universal_newlines=True,
            timeout=120,
        )
    finally:
        os.unlink(live)
    try:
        answer = json.loads(proc.stdout)
    except ValueError:
        said = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        raise RuntimeError(said[0] if said else "envpin verify exited %d" % proc.returncode) from None
    if not isinstance(answer, dict) or "differences" not in answer:
        raise RuntimeError("envpin verify gave no differences")
    return answer


def recipe_in_force(environ: "Optional[Dict[str, str]]" = None) -> "Dict[str, Any]":
    """The recipe the image says is in force (ENVPIN_RECIPE), the one envpin resolves for this TensorFlow,
    and the recipe's variables this process does not have (envpin.probe.runtime.check_environment)."""
    from envpin.probe import runtime

    env = os.environ if environ is None else environ
    out = {"image": env.get("ENVPIN_RECIPE")}  # type: Dict[str, Any]
    try:
        recipe = runtime.current_recipe()
    except (LookupError, ValueError) as exc:
        out["resolved"], out["problems"] = None, ["no recipe: %s" % describe(exc)]
        return out
    if recipe is None:
        out["resolved"], out["problems"] = None, ["TensorFlow is not installed"]
        return out
    out["resolved"] = recipe["id"]
    out["problems"] = runtime.check_environment(recipe, env)
    return out


def last_selftest(path: "Optional[str]") -> "Optional[Dict[str, Any]]":
    """The self-test verdict of the report at `path` (or ENVPIN_REPORT): its summary and golden hashes."""
    from envpin.probe import fields

    path = path or os.environ.get(REPORT_ENV)
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            report = json.load(fh)
    except (OSError, ValueError) as exc:
        return {"report": path, "error": describe(exc)}
    selftest = report.get("selftest") if isinstance(report, dict) else None
    if not isinstance(selftest, dict):
        return {"report": path, "summary": None, "note": "the report has no self-test"}
    summary = selftest.get("summary") or selftest.get("skipped") or selftest.get("error")
    return {"report": path, "summary": summary, "golden": dict(fields.golden_fields(report))}


def _seed(seed: "Optional[int]") -> "Optional[int]":
    if seed is not None:
        return int(seed)
    raw = os.environ.get(SEED_ENV, "").strip()
    return int(raw) if raw.lstrip("-").isdigit() else None


def _gpus(report: "Dict[str, Any]") -> "List[Tuple[str, str]]":
    """(model, compute capability) of each GPU the probe read (NVML), for the device class without running
    nvidia-smi a second time."""
    from envpin.probe import fields

    flat = fields.flatten({"gpu": report.get("gpu", {})})
    out = []
    for i in range(int(flat["gpu.count"]) if fields.gpu_present(flat) else 0):
        out.append((flat.get("gpu.devices.%d.name" % i, ""), flat.get("gpu.devices.%d.compute_capability" % i, "")))
    return out


def _lock_facts(path: "Optional[str]", report: "Dict[str, Any]", strict: bool) -> "Dict[str, Any]":
    """What the run records of its lock (inputs hash, image ID) and, in strict mode, the lock's comparison
    with the live report (envpin verify's verdict and its breaking differences)."""
    if path is None:
        return {"path": None, "note": "no envpin.lock found (give lock=, or set ENVPIN_LOCK)"}
    facts = {"path": path}  # type: Dict[str, Any]
    try:
        data = read_lock(path)
    except (OSError, ValueError) as exc:  # tomllib.TOMLDecodeError is a ValueError
        facts["error"] = describe(exc)
        return facts
    if data is None:
        facts["note"] = "the lock was not read: this Python (%d.%d) has no tomllib" % sys.version_info[:2]
    else:
        lock = data["lock"] if isinstance(data.get("lock"), dict) else {}  # type: Dict[str, Any]
        image = data["image"] if isinstance(data.get("image"), dict) else {}  # type: Dict[str, Any]
        facts["inputs_hash"] = lock.get("inputs_hash")
        # the recorded image counts only when it was built from these inputs (Lock.expected_image's rule)
        same = image.get("inputs_hash") == lock.get("inputs_hash")
        facts["image_id"] = image.get("id") if image and same else None
    if not strict:
        return facts
    try:
        checked = _verify(path, report)
    except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
        facts["error"] = "envpin verify could not compare: %s" % describe(exc)
        return facts
    facts["verify"] = checked.get("verdict")
    facts["expected_fingerprint"] = (checked.get("fingerprint") or {}).get("expected")
    facts["breaking"] = [d for d in checked["differences"] if d.get("severity") == "breaking"]
    return facts


def _refuse(lock_facts: "Dict[str, Any]") -> None:
    """Strict mode's rule: only a lock whose reference the live environment matches lets the run start."""
    where = lock_facts.get("path")
    if where is None:
        raise DriftError("envpin strict mode: %s" % lock_facts["note"])
    if "verify" not in lock_facts:
        why = lock_facts.get("error") or lock_facts.get("note")
        raise DriftError("envpin strict mode: the environment cannot be compared with %s: %s" % (where, why))
    breaking = lock_facts["breaking"]
    if breaking:
        named = "; ".join("%s: lock %s, here %s (%s)" % (d["key"], d["a"], d["b"], d["reason"]) for d in breaking[:20])
        more = " and %d more" % (len(breaking) - 20) if len(breaking) > 20 else ""
        raise DriftError(
            "envpin strict mode: this environment differs from %s in %d breaking field%s, so the run does not "
            "start: %s%s" % (where, len(breaking), "" if len(breaking) == 1 else "s", named, more),
            breaking,
        )


class Run(object):
    """One tracked run: the start record (`record`), the probe report it was made from (`report`), and the
    writers it goes to. `finish` adds what the run itself gave."""

    def __init__(self, record: "Dict[str, Any]", report: "Dict[str, Any]", writers: "Sequence[Any]") -> None:
        self.record = record
        self.report = report
        self.writers = list(writers)
        self.finished = False

    @property
    def params(self) -> "Dict[str, str]":
        """The start record as tracker parameters: 'envpin.<name>' -> text (absent values left out)."""
        r = self.record
        lock = r["lock"]
        values = {
            "fingerprint": r["fingerprint"],
            "device_class": r["device_class"],
            "lock.inputs_hash": lock.get("inputs_hash"),
            "lock.image_id": lock.get("image_id"),
            "recipe": r["recipe"].get("image") or r["recipe"].get("resolved"),
            "seed": r["seed"],
            "verify": lock.get("verify"),
            "selftest": (r["selftest"] or {}).get("summary"),
            "strict": r["strict"],
            "envpin_version": r["envpin_version"],
        }
        return {PREFIX + k: str(values[k]) for k in PARAMS if values[k] is not None}

    def finish(self, model: "Any" = None, weights: "Optional[Sequence[Any]]" = None) -> "Dict[str, Any]":
        """End the run: the golden-style hash of the final weights (`weights`, or `model.get_weights()`), to
        every writer. Returns the end record (also in record['end'])."""
        from envpin.probe.golden import weights_digest

        if weights is None and model is not None:
            weights = model.get_weights()
        end = {"weights_hash": weights_digest(weights) if weights is not None else None}  # type: Dict[str, Any]
        self.record["end"] = end
        if not self.finished:
            self.finished = True
            for writer in self.writers:
                writer.end(self)
        return end


def start(
    seed: "Optional[int]" = None,
    strict: "Optional[bool]" = None,
    lock: "Optional[str]" = None,
    report: "Optional[str]" = None,
    writers: "Sequence[Any]" = (),
    environ: "Optional[Dict[str, str]]" = None,
    skipped: "Sequence[str]" = (),
) -> Run:
    """Probe the environment, compare it with the lock, and log the start record to `writers`.

    seed: the run's seed (default ENVPIN_SEED). strict: refuse to start (DriftError) unless the environment
    matches the lock's reference in every breaking field (default ENVPIN_STRICT). lock: the envpin.lock (default
    :func:`lock_path`). report: a probe report whose self-test verdict to record (default ENVPIN_REPORT).
    skipped: the writers asked for that could not be made, and why (recorded)."""
    from envpin.portable.version import __version__
    from envpin.probe import deviceclass, fields
    from envpin.probe.report import collect

    started = time.monotonic()
    env = dict(os.environ if environ is None else environ)
    if strict is None:
        strict = truthy(env.get(STRICT_ENV))
    probe = collect(selftest=False, environ=env)
    lock_facts = _lock_facts(lock_path(lock, env), probe, bool(strict))
    if strict:
        _refuse(lock_facts)
    record = {
        "schema": RECORD_SCHEMA,
        "envpin_version": __version__,
        "fingerprint": probe["fingerprint"],
        "fingerprinted": len(fields.fingerprint_fields(probe)),
        "device_class": deviceclass.device_class(gpus=_gpus(probe), environ=env),
        "lock": lock_facts,
        "recipe": recipe_in_force(env),
        "seed": _seed(seed),
        "selftest": last_selftest(report),
        "strict": bool(strict),
        "python": sys.executable,
        "writers": [type(w).__name__ for w in writers],
        "writers_skipped": list(skipped),
    }  # type: Dict[str, Any]
    run = Run(record, probe, writers)
    record["start_seconds"] = round(time.monotonic() - started, 3)
    for writer in run.writers:
        writer.start(run)
    return run
