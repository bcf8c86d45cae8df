"""The multi-worker self-test across nodes (``envpin fleet selftest``): one MultiWorkerMirroredStrategy worker
per node, every run judged across the workers and from run to run.

Each node's worker (``python -m envpin.probe.replicas --worker``, the multi-replica self-test's worker program)
trains the self-test's model with its collectives pinned to RING and prints one JSON payload: the weights'
hash per replica and every collective's output hash (the trace). Here the payloads of all nodes and runs
become one verdict:

* per node: did the worker run (ok, or failed / timed out / skipped with the reason), and did it repeat
  itself (the same weights in every run);
* across nodes: ``envpin.probe.replicas.compare_workers`` -- every worker of a run holds the same weights
  (an all-reduce must give every worker the same bits), each worker repeats from run to run, and the first
  collective that differs when one does (with the first differing element, from the traces);
* against one machine: a run that agreed gives its weights hash as a golden hash of the workers' device
  class counted (``<class>;workers=N``), the class under which the multi-replica self-test on one machine
  (``--replicas``, two workers on loopback) records its own: ``fleet report`` compares them as it compares
  every golden hash, so two workers across nodes that train otherwise than two on one node are a breaking
  difference (on the test cluster they train the same bits).

The result is one document, ``_fleet-selftest.json`` (``fleet_selftest_schema``), written beside the nodes'
probe reports; ``envpin fleet report`` reads it with them (envpin.fleet.inputs) and its verdict joins the
fleet's (envpin.fleet.aggregate: a worker that did not run fails the fleet, workers or runs that differ are a
breaking difference). Standard library and envpin's host side only; TensorFlow runs on the nodes.
"""

from __future__ import annotations

import base64
import json
import os
import tempfile
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from envpin.errors import ReportError, shown
from envpin.fleet.aggregate import CONSISTENT, DIFFERS, FAILED, OK, TIMED_OUT
from envpin.record import Value

SCHEMA_KEY = "fleet_selftest_schema"
SCHEMA = 1
#: The document's file name in the output folder: a leading '_' is no host name (RFC 1123), so no node's.
RESULT_NAME = "_fleet-selftest.json"
STRATEGY = "MultiWorkerMirroredStrategy"
COMMUNICATION = "RING"
#: A worker whose node has no TensorFlow (or one too old): it did not run, and says why.
SKIPPED = "skipped"
WORKER_STATUSES = (OK, FAILED, TIMED_OUT, SKIPPED)
DEFAULT_RUNS = 2
#: The worker's own default step count is used unless the user gives one.
MAX_RUNS = 8
#: Ports: run k of a job listens on port_base + k on every node. Without --port-base, the base comes from the
#: job id, below Linux's ephemeral range (32768-60999) and away from 8888 (SlurmClusterResolver's default,
#: and Jupyter's), so two self-tests sharing a node rarely meet on one port.
PORT_FLOOR = 20000
PORT_SPAN = 12000


def port_base_for(job_id: str) -> int:
    """The first port of a job's workers, spread over [PORT_FLOOR, PORT_FLOOR + PORT_SPAN) by its id."""
    number = int(job_id) if job_id.isdigit() else sum(job_id.encode())
    return PORT_FLOOR + (number * MAX_RUNS) % PORT_SPAN


@dataclass(frozen=True, slots=True)
class Worker(Value):
    """One node's worker over all runs: its status, its task index in the cluster and its weights per run."""

    node: str
    status: str
    task_index: int | None = None
    #: The weights' hash after training, one per run that gave a payload.
    hashes: tuple[str, ...] = ()
    reason: str | None = None
    tf_version: str | None = None
    seconds: tuple[float, ...] = ()
    #: The worker's device class as TensorFlow saw it (envpin.probe.deviceclass), as its payload gives it.
    device_class: str | None = None

    def __post_init__(self) -> None:
        if self.status not in WORKER_STATUSES:
            raise ValueError(f"a worker's status is one of {WORKER_STATUSES}, not {self.status!r}")

    @property
    def repeats(self) -> bool | None:
        """The same weights in every run (None: fewer than two runs to compare)."""
        return None if len(self.hashes) < 2 else len(set(self.hashes)) == 1

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "status": self.status,
            "task_index": self.task_index,
            "hashes": list(self.hashes),
            "repeats": self.repeats,
            "reason": self.reason,
            "tf_version": self.tf_version,
            "seconds": list(self.seconds),
            "device_class": self.device_class,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Worker:
        return cls(
            node=str(data["node"]),
            status=str(data["status"]),
            task_index=None if data.get("task_index") is None else int(data["task_index"]),
            hashes=tuple(str(h) for h in data.get("hashes") or ()),
            reason=None if data.get("reason") is None else str(data["reason"]),
            tf_version=None if data.get("tf_version") is None else str(data["tf_version"]),
            seconds=tuple(float(s) for s in data.get("seconds") or ()),
            device_class=None if data.get("device_class") is None else str(data["device_class"]),
        )


@dataclass(frozen=True, slots=True)
class MultiWorker(Value):
    """The multi-worker self-test of one job: its workers (one per node) and the cross-worker verdict.

    `verdict` is envpin.probe.replicas.compare_workers' result, None when a worker gave no payload (nothing to
    compare); `source` is where the document was read from."""

    launcher: str
    workers: tuple[Worker, ...]
    runs: int
    verdict: Mapping[str, Any] | None = None
    job: str | None = None
    steps: int | None = None
    resolver: str | None = None
    source: str | None = None

    @property
    def not_run(self) -> list[Worker]:
        return [w for w in self.workers if w.status != OK]

    @property
    def problems(self) -> list[str]:
        """What the verdict found: workers that disagree, a worker that does not repeat itself."""
        found = self.verdict.get("problems") if self.verdict is not None else None
        return [str(p) for p in found] if isinstance(found, list) else []

    @property
    def status(self) -> str:
        """FAILED: a worker did not run (or there is none); DIFFERS: workers or runs differ; else CONSISTENT."""
        if not self.workers or self.not_run or self.verdict is None:
            return FAILED
        return DIFFERS if self.problems else CONSISTENT

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(w.node for w in self.workers)

    def golden(self) -> tuple[str, str] | None:
        """(counted device class, hash) of a run that agreed -- every worker, every run, one device class: the
        weights hash the fleet compares per class as a golden hash, beside the ';workers=N' hashes of the
        multi-replica self-test on one machine (envpin.probe.fields.counted_class), which the same program over
        the same count of workers must match."""
        from envpin.probe.fields import counted_class
        from envpin.probe.replicas import STEPS

        if self.status != CONSISTENT or self.steps not in (None, STEPS):
            return None  # another step count trains other weights: no golden hash of the class
        hashes = {h for w in self.workers for h in w.hashes}
        classes = {w.device_class for w in self.workers}
        if len(hashes) != 1 or len(classes) != 1 or None in classes:
            return None
        (cls,) = classes
        assert cls is not None
        return counted_class(cls, "workers", len(self.workers)), hashes.pop()

    def line(self) -> str:
        """The cross-node verdict in one line."""
        n = len(self.workers)
        if self.status == FAILED:
            if not self.workers:
                return "multi-worker self-test: no worker ran"
            names = ", ".join(f"{shown(w.node, 60)} {w.status.replace('_', ' ')}" for w in self.not_run[:5])
            more = f" and {len(self.not_run) - 5} more" if len(self.not_run) > 5 else ""
            return f"multi-worker self-test did not run on every node ({names}{more})"
        if self.status == DIFFERS:
            return f"multi-worker self-test: {self.problems[0]}" + (
                f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
            )
        runs = f"{self.runs} runs" if self.runs != 1 else "1 run"
        repeat = ", every run repeats" if self.runs > 1 else ""
        return f"multi-worker self-test: {n} workers hold the same weights in {runs}{repeat}"

    def to_json(self) -> dict[str, Any]:
        return {
            SCHEMA_KEY: SCHEMA,
            "strategy": STRATEGY,
            "communication": COMMUNICATION,
            "launcher": self.launcher,
            "job": self.job,
            "runs": self.runs,
            "steps": self.steps,
            "resolver": self.resolver,
            "status": self.status,
            "verdict_line": self.line(),
            "workers": [w.to_json() for w in self.workers],
            "verdict": None if self.verdict is None else dict(self.verdict),
        }


def is_document(data: Any) -> bool:
    """A multi-worker self-test document (what RESULT_NAME holds), not a probe report."""
    return isinstance(data, dict) and SCHEMA_KEY in data


def from_document(data: Mapping[str, Any], source: str) -> MultiWorker:
    """The document read back (`fleet report`); ReportError for one this envpin cannot read."""
    version = data.get(SCHEMA_KEY)
    if type(version) is not int or version < 1:
        raise ReportError(f"{source}: {SCHEMA_KEY} must be a positive integer, not {shown(version)}")
    if version > SCHEMA:
        raise ReportError(
            f"{source} uses fleet self-test schema {version}; this envpin reads up to {SCHEMA}",
            hint="upgrade envpin on this machine",
        )
    try:
        workers = tuple(Worker.from_json(w) for w in data["workers"])
        verdict = data.get("verdict")
        return MultiWorker(
            launcher=str(data["launcher"]),
            workers=workers,
            runs=int(data["runs"]),
            verdict=verdict if isinstance(verdict, dict) else None,
            job=None if data.get("job") is None else str(data["job"]),
            steps=None if data.get("steps") is None else int(data["steps"]),
            resolver=None if data.get("resolver") is None else str(data["resolver"]),
            source=source,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ReportError(
            f"{source} is not a readable fleet self-test result ({type(exc).__name__}: {shown(str(exc), 120)})",
            hint="it is written by `envpin fleet selftest`; remove it from the folder if it is something else",
        ) from None


def document_text(result: MultiWorker) -> str:
    """The document as written: canonical JSON, like the probe's reports and the fleet result."""
    return json.dumps(result.to_json(), sort_keys=True, indent=2, ensure_ascii=True) + "\n"


# --------------------------------------------------------------------------- what came back from the nodes


def worker_payload(stdout: str) -> dict[str, Any] | None:
    """The worker's JSON object: its last line that is one (the worker prints exactly one)."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict):
                return data
    return None


def weights_hash(payload: Mapping[str, Any]) -> str | None:
    """A worker's weights after training: its replicas' hash (one replica per worker on CPU; a worker whose
    local replicas disagree shows all of theirs, which the verdict then names)."""
    hashes = payload.get("replica_hashes")
    if isinstance(hashes, dict) and hashes:
        unique = sorted({str(h) for h in hashes.values()})
        return unique[0] if len(unique) == 1 else "+".join(unique)
    single = payload.get("hash")
    return str(single) if isinstance(single, str) else None


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else "nothing on stderr"


@dataclass(frozen=True, slots=True)
class NodeRuns(Value):
    """What one node's task sent back for its worker runs: each run's payload or why there is none (with its
    trace's bytes), or the task's own failure (`status`/`reason`) before every run finished."""

    node: str
    payloads: tuple[dict[str, Any] | None, ...]
    reasons: tuple[str | None, ...]
    traces: tuple[bytes, ...]
    status: str = OK
    reason: str | None = None


def node_runs(node: str, result: Mapping[str, Any] | None, failure: tuple[str, str] | None, runs: int) -> NodeRuns:
    """One node's task result (envpin.fleet.nodetask, --workers) as its worker runs; `failure` is (status,
    reason) when the task gave no result at all."""
    if result is None:
        status, reason = failure or (FAILED, "no result from the node")
        return NodeRuns(node, (), (), (), status, reason)
    payloads: list[dict[str, Any] | None] = []
    reasons: list[str | None] = []
    traces: list[bytes] = []
    listed = result.get("workers")
    for run in listed if isinstance(listed, list) else []:
        run = run if isinstance(run, dict) else {}
        payload = worker_payload(str(run.get("stdout") or ""))
        payloads.append(payload)
        if payload is None:
            reasons.append(
                f"the worker exited with status {run.get('exit_code')} and printed no result: "
                f"{_last_line(str(run.get('stderr') or ''))}"
            )
        else:
            reasons.append(None)
        try:
            packed = str(run.get("trace") or "")
            traces.append(zlib.decompress(base64.b64decode(packed)) if packed else b"")
        except (ValueError, zlib.error):
            traces.append(b"")
    task = str(result.get("status"))
    if task == "timeout":
        return NodeRuns(node, tuple(payloads), tuple(reasons), tuple(traces), TIMED_OUT, str(result.get("error")))
    if task != OK:
        return NodeRuns(node, tuple(payloads), tuple(reasons), tuple(traces), FAILED, str(result.get("error")))
    if len(payloads) < runs:
        return NodeRuns(
            node, tuple(payloads), tuple(reasons), tuple(traces), FAILED, f"{len(payloads)} of {runs} runs came back"
        )
    return NodeRuns(node, tuple(payloads), tuple(reasons), tuple(traces))


def _worker(n: NodeRuns) -> tuple[Worker, list[dict[str, Any]]]:
    """The node's worker and its payloads (all runs), or the worker that did not run and why."""
    if n.status != OK:
        return Worker(n.node, n.status, reason=n.reason), []
    good: list[dict[str, Any]] = []
    for k, (payload, reason) in enumerate(zip(n.payloads, n.reasons, strict=True), 1):
        where = f"run {k}: " if len(n.payloads) > 1 else ""
        if payload is None:
            return Worker(n.node, FAILED, reason=where + str(reason)), []
        if "skipped" in payload:
            return Worker(n.node, SKIPPED, reason=str(payload["skipped"])), []
        if "error" in payload:
            return Worker(n.node, FAILED, reason=where + str(payload["error"])), []
        good.append(payload)
    hashes = [weights_hash(p) for p in good]
    if any(h is None for h in hashes):
        return Worker(n.node, FAILED, reason="the worker's result has no weights hash"), []
    first = good[0]
    index = first.get("task_index")
    return (
        Worker(
            n.node,
            OK,
            task_index=int(index) if isinstance(index, int) else None,
            hashes=tuple(str(h) for h in hashes),
            tf_version=str(first["tf_version"]) if first.get("tf_version") is not None else None,
            seconds=tuple(float(p["seconds"]) for p in good if isinstance(p.get("seconds"), int | float)),
            device_class=str(first["device_class"]) if first.get("device_class") else None,
        ),
        good,
    )


def judge(
    nodes: Sequence[NodeRuns], runs: int, *, launcher: str, job: str | None = None, steps: int | None = None
) -> MultiWorker:
    """Every node's worker, and -- when every worker gave a payload in every run -- compare_workers' verdict
    across them (the traces written to a temporary folder for it, so it can name the first element)."""
    from envpin.probe.replicas import compare_workers

    workers: list[Worker] = []
    payloads: dict[str, list[dict[str, Any]]] = {}
    for n in nodes:
        worker, good = _worker(n)
        workers.append(worker)
        payloads[n.node] = good
    workers.sort(key=lambda w: (w.task_index is None, w.task_index or 0, w.node))
    verdict = None
    resolver = next((str(p[0]["resolver"]) for p in payloads.values() if p and p[0].get("resolver")), None)
    if workers and all(w.status == OK for w in workers):
        with tempfile.TemporaryDirectory(prefix="envpin-mwms-") as tmp:
            table: list[list[tuple[dict[str, Any], str]]] = [[] for _ in range(runs)]
            for n in nodes:
                for k, payload in enumerate(payloads[n.node][:runs]):
                    path = os.path.join(tmp, f"{len(os.listdir(tmp))}.bin")
                    trace = n.traces[k] if k < len(n.traces) else b""
                    with open(path, "wb") as fh:
                        fh.write(trace)
                    table[k].append((payload if trace else _without_offsets(payload), path))
            verdict = compare_workers(table)
    return MultiWorker(launcher, tuple(workers), runs, verdict, job, steps, resolver)


def _without_offsets(payload: dict[str, Any]) -> dict[str, Any]:
    """A payload whose trace bytes did not come back: its hashes still compare, its elements are not read."""
    trace = [{k: v for k, v in e.items() if k not in ("offset", "bytes")} for e in payload.get("trace", [])]
    return {**payload, "trace": trace}
