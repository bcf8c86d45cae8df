"""What `envpin fleet report` reads: probe reports, and what the Kubernetes collection step writes.

Accepted inputs (a folder is searched, not recursively, for ``*.json``, ``*.log`` and ``*.error.txt``):

* a probe report (``envpin probe -o FILE`` / ``--out DIR``, ``python3 envpin.pyz --json -``);
* ``<node>.error.txt``, which ``envpin fleet probe --slurm`` writes for a node that failed or timed out
  (``status: failed|timed_out`` and ``error: <why>``): that node is a failed or timed-out one, so a folder of
  reports re-read with ``fleet report`` counts it exactly as the probe run did;
* the probe pods' output as ``kubectl logs --prefix`` writes it: every line starts with
  ``[pod/<pod>/<container>] ``; each pod's lines hold one report, or whatever the probe printed when it
  failed, which makes that node a failed one (not bad input);
* the pod list ``kubectl get pods -o json`` writes: it names each pod's node, and a pod whose probe did not
  finish or failed becomes a node that timed out or failed, so a node that gave no output is never dropped;
* the multi-worker self-test's result (``_fleet-selftest.json``, envpin.fleet.multiworker), which
  ``envpin fleet selftest`` writes beside its nodes' reports: not a node, but a verdict across them that joins
  the fleet's (collected with ``selftests``).

Bad input (a path that does not exist, a folder without any of these, a file that is none of them) is a
ReportError: one message, exit 2. ``read_node_list`` reads the node list of ``--expect-nodes FILE``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envpin.errors import ReportError, UsageError, param, shown
from envpin.fleet.aggregate import FAILED, TIMED_OUT, Compact, NodeFailure, kubernetes_node_name, node_name
from envpin.record import Value

if TYPE_CHECKING:
    from envpin.files.read import Members
    from envpin.fleet.aggregate import Reducer
    from envpin.fleet.multiworker import MultiWorker

#: The init container that runs the probe in envpin's manifest (envpin.fleet.kubernetes); only pods with one are read.
PROBE_CONTAINER = "envpin-probe"
#: The container of the multi-worker self-test's Job that runs the workers (one JSON line per run).
WORKER_CONTAINER = "envpin-worker"
SUFFIXES = (".json", ".log")
#: What `fleet probe --slurm` writes for a node without a report: <node>.error.txt (error_file_text).
ERROR_SUFFIX = ".error.txt"
_PREFIX = re.compile(r"\[pod/([^/\]]+)/([^\]]*)\] ?")


def _hint() -> str:
    """What fleet report reads: built when raised, so the probe's option is named as the caller names it."""
    return (
        f"pass probe reports ({param('json_file', command='probe')} FILE), 'kubectl logs --prefix' output or "
        "'kubectl get pods -o json'"
    )


def _error_hint() -> str:
    return (
        f"{param('slurm', command='fleet probe')} writes <node>.error.txt as two lines, 'status: failed' (or "
        "timed_out) and 'error: <why>'; remove the file if it is not one"
    )


_LIST_HINT = (
    "one node name per line ('#' starts a comment), e.g. from `scontrol show hostnames` or `kubectl get nodes -o name`"
)


@dataclass(frozen=True, slots=True)
class Entry(Value):
    """One node's input to envpin.fleet.aggregate: its name, its report or failure, where it came from."""

    name: str
    item: Mapping[str, Any] | NodeFailure | Compact  # a report's record when a Reducer took it
    source: str


@dataclass(frozen=True, slots=True)
class _Pod(Value):
    pod: str
    node: str | None
    failure: NodeFailure | None  # None: the probe container finished with exit 0


def _is_error_file(path: Path) -> bool:
    return path.name.endswith(ERROR_SUFFIX)


def files_of(paths: Sequence[Path]) -> list[Path]:
    """The files to read: files as given, folders' *.json, *.log and *.error.txt files in name order."""
    if not paths:
        raise UsageError("no probe reports given", hint=f"name the reports, or folders of them, in {param('paths')}")
    out: list[Path] = []
    for path in paths:
        try:
            is_dir, exists = path.is_dir(), path.exists()
        except OSError as exc:  # a folder on the way that cannot be entered
            raise ReportError(
                f"cannot read {path}: {exc.strerror or exc}", hint="check the permissions of the folders on its path"
            ) from None
        if is_dir:
            try:
                found = sorted(p for p in path.iterdir() if (p.suffix in SUFFIXES or _is_error_file(p)) and p.is_file())
            except OSError as exc:  # listed but not searchable (mode 644), or gone while being read
                raise ReportError(
                    f"cannot read the folder {path}: {exc.strerror or exc}", hint="check the folder's permissions"
                ) from None
            if not found:
                raise ReportError(
                    f"no probe reports (*.json, *.log, *.error.txt) in {path}",
                    hint=f"write them with '{param('out', command='probe')} DIR', or see docs/fleet.md",
                )
            out += found
        elif exists:
            out.append(path)
        else:
            raise ReportError(f"{path} does not exist", hint="check the path")
    return _once(out)


def _once(files: list[Path]) -> list[Path]:
    """Each file once, where first named: a report given twice, or given and inside a folder given, is one
    node, not two consistent ones."""
    seen: set[object] = set()
    out: list[Path] = []
    for f in files:
        try:
            st = f.stat()
            key: object = (st.st_dev, st.st_ino)
        except OSError:  # read (and reported) as it is later
            key = str(f)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def output_clash(paths: Sequence[Path], output: Path) -> str | None:
    """Why `output` must not be written beside these inputs, or None: it is one of the files given (the page
    would replace a report), or it lies in a folder given under a name this reader takes (it would be read
    as a report the next time)."""
    import os

    where = os.path.realpath(output)
    for path in paths:
        if os.path.isdir(path):
            if os.path.realpath(path) == os.path.dirname(where) and (
                output.suffix in SUFFIXES or _is_error_file(output)
            ):
                return (
                    f"is in the folder of reports {path} under a name `fleet report` reads as a report "
                    "(*.json, *.log, *.error.txt)"
                )
        elif os.path.realpath(path) == where:
            return "is one of the reports it reads: the page would replace it"
    return None


def read(
    paths: Sequence[Path],
    reducer: Reducer | None = None,
    selftests: list[MultiWorker] | None = None,
) -> list[Entry]:
    """Every node the inputs name, in a deterministic order (files in the order given, pods by name).
    With `reducer`, each checked report file's entry holds its record (Reducer.add), made as it is read:
    the parsed report is then dropped, so a large fleet's reports are never all held, and the reducer
    checks the nesting of only what differs from its first report. Multi-worker self-test results found
    among the files are appended to `selftests` (without it, such a file is bad input)."""
    from envpin.files.read import Members, read_user_text
    from envpin.fleet import multiworker

    # With a reducer: the sections of a report whose text is its first report's are not parsed again.
    members = None if reducer is None else Members()
    entries: list[Entry] = []
    worker_lines: dict[str, list[str]] = {}  # the multi-worker self-test's worker containers, by pod
    worker_sources: list[str] = []
    pods: dict[str, _Pod] = {}
    logs: dict[str, tuple[Mapping[str, Any] | str, str]] = {}
    for path in files_of(paths):
        if _is_error_file(path):
            text = read_user_text(path, "error file", ReportError)
            entries.append(Entry(path.name[: -len(ERROR_SUFFIX)], parse_error_file(text, str(path)), str(path)))
            continue
        text = read_user_text(path, "probe report", ReportError)
        if _PREFIX.match(_first_line(text)):
            for pod, outcome in parse_kubectl_log(text, str(path), worker_lines).items():
                logs[pod] = (outcome, str(path))
            worker_sources.append(str(path))
            continue
        origin = str(path)
        data, report = _document(text, path, members)
        if report:
            item = data if reducer is None else _reduced(reducer, data, origin, members)
            entries.append(Entry(node_name(data, path.stem), item, origin))
        elif _is_pod_list(data):
            for p in parse_pod_list(data, origin):
                pods[p.pod] = p
        elif selftests is None:
            raise ReportError(f"{path} is a multi-worker self-test result, not a probe report", hint=_hint())
        else:
            selftests.append(multiworker.from_document(data, origin))
    for pod in sorted(set(logs) | set(pods)):
        entries.append(_pod_entry(pod, logs.get(pod), pods.get(pod)))
    if worker_lines:
        if selftests is None:
            raise ReportError(
                f"{', '.join(worker_sources)} holds the multi-worker self-test's worker output, not probe reports",
                hint=_hint(),
            )
        selftests.append(kubernetes_workers(worker_lines, pods, ", ".join(worker_sources)))
    if not entries:
        raise ReportError(f"no probe reports or probe pods in {', '.join(str(p) for p in paths)}", hint=_hint())
    return entries


class _Nesting:
    """Refuses a part of the report `origin` nested deeper than envpin.files.read.MAX_JSON_DEPTH, as
    parse_json would have refused the report (envpin.fleet.aggregate.Reducer.add's `nesting`)."""

    __slots__ = ("origin",)

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def __call__(self, part: object, level: int) -> None:
        from envpin.files.read import check_depth

        try:
            check_depth(part, self.origin, ReportError, None, level)
        except ReportError as exc:  # the hint is built only when it is shown
            raise ReportError(exc.message, hint=_hint()) from None


def error_file_text(status: str, error: str) -> str:
    """The <node>.error.txt of a node without a report (what parse_error_file reads back)."""
    return f"status: {status}\nerror: {error}\n"


def parse_error_file(text: str, origin: str) -> NodeFailure:
    """An error file's node failure: the status line, then the reason (the rest of the file)."""
    head, _, rest = text.partition("\n")
    status = head[len("status: ") :].strip() if head.startswith("status: ") else None
    if status not in (FAILED, TIMED_OUT) or not rest.startswith("error: "):
        said = shown(head, 60) if head.strip() else "empty"
        raise ReportError(
            f"{origin} is not an error file of 'envpin fleet probe' (first line: {said})", hint=_error_hint()
        )
    return NodeFailure(status, rest[len("error: ") :].rstrip("\n") or "no reason given")


def read_node_list(path: Path) -> tuple[str, ...]:
    """The nodes of `--expect-nodes FILE`: one name per line; blank lines and '#' comments are skipped, and
    `kubectl get nodes -o name`'s 'node/' prefix is dropped. A list that names no node, a name given twice,
    a line of several words or a Slurm host list (gpu[01-04]) is a UsageError."""
    from envpin.files.read import read_user_text

    text = read_user_text(path, "node list", UsageError)
    names: list[str] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        name = line.removeprefix("node/")
        if len(name.split()) > 1:
            raise UsageError(f"{path} line {number} holds more than one name: {shown(line, 80)}", hint=_LIST_HINT)
        if "[" in name or "]" in name:
            raise UsageError(
                f"{path} line {number} is a Slurm host list ({shown(name, 80)}), not a node name",
                hint=f"list one node per line: scontrol show hostnames '{shown(name, 80)}'",
            )
        if name in seen:
            raise UsageError(
                f"{path} names {shown(name, 80)} twice (lines {seen[name]} and {number})", hint="list every node once"
            )
        seen[name] = number
        names.append(name)
    if not names:
        raise UsageError(f"{path} names no node", hint=_LIST_HINT)
    return tuple(names)


def _json(text: str, path: Path, depth: bool = True, members: Members | None = None) -> Any:
    from envpin.files.read import parse_json

    return parse_json(text, str(path), ReportError, hint=_hint(), depth=depth, members=members)


def _document(text: str, path: Path, members: Members | None) -> tuple[Any, bool]:
    """A JSON file parsed, and whether it is a probe report (checked: check_report) rather than a pod list or
    a multi-worker self-test result. With `members` (a Reducer takes the reports), a report's nesting is left
    to the Reducer (Reducer.add's `nesting`); anything else's is checked here, before any other error, as
    parse_json does."""
    from envpin.files.read import check_depth
    from envpin.fleet import multiworker
    from envpin.reports.diff import check_report

    origin, deferred = str(path), members is not None
    data = _json(text, path, depth=not deferred, members=members)
    report = not (_is_pod_list(data) or multiworker.is_document(data))
    if deferred and not report:
        check_depth(data, origin, ReportError, _hint())
    if report:
        try:
            check_report(data, origin)
        except ReportError as exc:
            if deferred:  # too deep comes first, as when the parser checks
                check_depth(data, origin, ReportError, _hint())
            raise ReportError(exc.message, hint=exc.hint or _hint()) from None
    return data, report


def _reduced(reducer: Reducer, report: Mapping[str, Any], origin: str, members: Members | None) -> Compact:
    """The report's record; the first one's sections are kept in `members` for the reports read next."""
    first = reducer.reference is None
    record = reducer.add(report, nesting=_Nesting(origin))
    if first and members is not None and reducer.reference is not None:
        members.keep(dict(reducer.reference))
    return record


def _first_line(text: str) -> str:
    """The first line that is not blank, found without splitting the whole text into lines."""
    body = text.lstrip()
    if not body:
        return ""
    at = len(text) - len(body)
    end = text.find("\n", at)
    return text[text.rfind("\n", 0, at) + 1 : end if end >= 0 else len(text)]


def _pod_entry(pod: str, log: tuple[Mapping[str, Any] | str, str] | None, status: _Pod | None) -> Entry:
    """One pod's node: its report when the log holds one, else why there is none."""
    fallback = (status.node if status is not None else None) or pod
    if log is not None:
        outcome, source = log
        if not isinstance(outcome, str):
            # The node the manifest told the probe, else the pod list's (the host name is the pod's name).
            name = kubernetes_node_name(outcome) or (status.node if status is not None else None)
            return Entry(name or node_name(outcome, pod), outcome, f"{source} (pod {pod})")
        why = status.failure.reason + "; " if status is not None and status.failure is not None else ""
        return Entry(fallback, NodeFailure(FAILED, f"pod {pod}: {why}{outcome}"), f"{source} (pod {pod})")
    assert status is not None
    if status.failure is not None:
        return Entry(fallback, NodeFailure(status.failure.status, f"pod {pod}: {status.failure.reason}"), "pod list")
    return Entry(
        fallback,
        NodeFailure(FAILED, f"pod {pod}: the probe finished but its output was not collected (kubectl logs)"),
        "pod list",
    )


def parse_kubectl_log(
    text: str, origin: str = "log", workers: dict[str, list[str]] | None = None
) -> dict[str, Mapping[str, Any] | str]:
    """`kubectl logs --prefix` output -> pod name -> its report, or why its output is not one. The lines of
    the multi-worker self-test's worker container go to `workers` (pod -> lines) when it is given."""
    lines: dict[str, list[str]] = {}
    for number, line in enumerate(text.split("\n"), 1):
        m = _PREFIX.match(line)
        if m is None:
            if line.strip():
                raise ReportError(
                    f"{origin} line {number} has no [pod/NAME/CONTAINER] prefix",
                    hint="collect with 'kubectl logs --prefix' only (docs/fleet.md)",
                )
            continue
        if workers is not None and m.group(2) == WORKER_CONTAINER:
            workers.setdefault(m.group(1), []).append(line[m.end() :])
            continue
        lines.setdefault(m.group(1), []).append(line[m.end() :])
    return {pod: report_from_output(body, f"pod {pod}") for pod, body in lines.items()}


def kubernetes_workers(lines: Mapping[str, list[str]], pods: Mapping[str, _Pod], source: str) -> MultiWorker:
    """The multi-worker self-test of an indexed Job (envpin fleet manifest --kubernetes --workers): each pod's
    worker lines (one JSON line per run) as that node's runs, the node from the pod list when it was given,
    judged as a Slurm run is (no traces: the first differing collective is named by its hash alone)."""
    from envpin.fleet import multiworker

    found = []
    runs = max(len([ln for ln in body if ln.strip()]) for body in lines.values())
    for pod in sorted(lines):
        listed = pods.get(pod)
        name = (listed.node if listed is not None else None) or pod
        payloads = [multiworker.worker_payload(ln) for ln in lines[pod] if ln.strip()]
        why = f"pod {pod}: a line of its output is not a worker's result"
        reasons = [None if p is not None else why for p in payloads]
        found.append(multiworker.NodeRuns(name, tuple(payloads), tuple(reasons), ()))
    short = {n.node: f"{len(n.payloads)} of {runs} runs in its output" for n in found if len(n.payloads) < runs}
    nodes = [n.replace(status=FAILED, reason=short[n.node]) if n.node in short else n for n in found]
    return multiworker.judge(nodes, runs, launcher="kubernetes").replace(source=source)


def report_from_output(lines: list[str], name: str) -> Mapping[str, Any] | str:
    """The report a probe printed, or why the output is not one. Lines before the report's opening '{'
    and after its closing '}' (a runtime's banner, a warning) are skipped."""
    from envpin.reports.diff import check_report

    data: Mapping[str, Any] = {}  # a report once check_report has passed it
    candidates = ["\n".join(lines)]
    opening = [i for i, line in enumerate(lines) if line.rstrip() == "{"]
    closing = [i for i, line in enumerate(lines) if line.rstrip() == "}"]
    if opening and closing and opening[0] < closing[-1]:
        candidates.append("\n".join(lines[opening[0] : closing[-1] + 1]))
    from envpin.files.read import parse_json

    for candidate in candidates:
        try:
            data = parse_json(candidate, name, ReportError)
            break
        except ReportError:
            continue
    else:
        said = next((line.strip() for line in lines if line.strip()), "")
        return "its output is not a probe report" + (f" (first line: {shown(said, 120)})" if said else " (empty)")
    try:
        check_report(data, name)
    except ReportError as exc:
        return exc.message
    return data


def _is_pod_list(data: Any) -> bool:
    return isinstance(data, dict) and (
        (data.get("kind") in ("List", "PodList") and isinstance(data.get("items"), list)) or data.get("kind") == "Pod"
    )


def parse_pod_list(data: Mapping[str, Any], origin: str = "pod list") -> list[_Pod]:
    """`kubectl get pods -o json` -> the probe pods with their node and, unless the probe finished, why not."""
    items = data["items"] if data.get("kind") != "Pod" else [data]
    out = []
    for item in items:
        if not isinstance(item, dict):
            raise ReportError(f"{origin}: an item is not an object", hint=_hint())
        spec = _object(item.get("spec"))
        inits = _list(spec.get("initContainers"))
        if not any(isinstance(c, dict) and c.get("name") == PROBE_CONTAINER for c in inits):
            continue  # another workload's pod in the same namespace
        pod = str(_object(item.get("metadata")).get("name") or "?")
        status = _object(item.get("status"))
        out.append(_Pod(pod, _node_of(spec), _failure(status)))
    return out


def _object(value: object) -> dict[str, Any]:
    """A JSON object of a pod list, or {} where the field is missing or of another type."""
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _node_of(spec: Mapping[str, Any]) -> str | None:
    """The node a pod runs on, or, still unscheduled, the node its DaemonSet meant it for (the controller
    pins each pod with a required node affinity on metadata.name)."""
    name = spec.get("nodeName")
    if isinstance(name, str) and name:
        return name
    try:
        terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        for term in terms:
            for match in term.get("matchFields", []):
                if match.get("key") == "metadata.name" and match.get("values"):
                    return str(match["values"][0])
    except (KeyError, TypeError, AttributeError):
        pass
    return None


def _failure(status: Mapping[str, Any]) -> NodeFailure | None:
    """None when the probe container exited 0; else failed (it exited otherwise) or timed out (it has not
    finished: pending, unschedulable, still running)."""
    for st in _list(status.get("initContainerStatuses")):
        if not isinstance(st, dict) or st.get("name") != PROBE_CONTAINER:
            continue
        state, last = _object(st.get("state")), _object(st.get("lastState"))
        done = state.get("terminated") or last.get("terminated")
        if isinstance(done, dict):
            code = done.get("exitCode")
            if code == 0 and state.get("terminated"):
                return None
            if code != 0:
                return NodeFailure(FAILED, f"the probe exited {code}" + _why(done))
        if isinstance(state.get("running"), dict):
            return NodeFailure(TIMED_OUT, "the probe was still running when the pods were listed")
        if isinstance(state.get("waiting"), dict):
            return NodeFailure(TIMED_OUT, "the probe has not started" + _why(state["waiting"]))
    for cond in _list(status.get("conditions")):
        if isinstance(cond, dict) and cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return NodeFailure(TIMED_OUT, "the pod was not scheduled" + _why(cond))
    return NodeFailure(TIMED_OUT, f"the probe has not run (pod phase {status.get('phase') or 'unknown'})")


def _why(obj: Mapping[str, Any]) -> str:
    parts = [str(obj[k]) for k in ("reason", "message") if obj.get(k)]
    return f" ({shown(': '.join(parts), 200)})" if parts else ""
