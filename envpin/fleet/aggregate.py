"""A fleet of probe reports at once (``envpin fleet report``): which nodes compute identically.

Nodes are grouped into classes of identical result-affecting fingerprints (the fields
``envpin.probe.fields.fingerprint_fields`` picks, golden hashes left to their own rule as in the lock);
every field that is not the same on all nodes is listed with the severity ``envpin diff`` would give the
worst pair of nodes; golden training hashes are compared per device class, where a second hash is a
breaking difference and a node without one is not checked (``envpin.environment.lockfile.Lock.check_golden``'s rule).

``aggregate`` takes reports that were already collected, from files (``envpin.fleet.inputs``) or from any
other collector, and nodes that failed or timed out: those stay in the result as such, never dropped.
Given the fleet the user expects (``Expected``: a node count or the node names), a node that left nothing
at all is counted as missing too. A fleet with a node that failed, timed out or is missing is never
called consistent: its verdict starts with "failed:" and its exit code is 1.
The result renders as canonical JSON (``to_json``); envpin.views.fleet draws it as text and as one HTML page.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import reduce
from itertools import chain, compress, filterfalse
from operator import getitem, is_not, ne
from typing import Any, Protocol

from envpin.environment.lockfile import GOLDEN_PREFIX  # the key prefix of golden hashes, defined once
from envpin.errors import ReportError, shown
from envpin.record import Value

FLEET_SCHEMA = 1
OK = "ok"
FAILED = "failed"
TIMED_OUT = "timed_out"
#: A node the user expects (Expected) of which no report and no error file was found.
MISSING = "missing"
NODE_STATUSES = (OK, FAILED, TIMED_OUT, MISSING)
#: The fleet's status: every expected node probed and nothing breaking differs / a breaking difference /
#: a node failed, timed out, is missing or was not expected, or none was probed (FAILED).
CONSISTENT = "consistent"
DIFFERS = "differs"
#: Node names a verdict line names before "and N more".
VERDICT_NAMES = 5
GOLDEN_REASON = "golden training hash: nodes of one device class train differently"
#: The environment variable the Kubernetes manifest sets to the node's name (a pod's hostname is its own name).
NODE_NAME_ENV = "ENVPIN_NODE_NAME"
_ORDER = {"breaking": 0, "risk": 1, "info": 2}


class MultiWorker(Protocol):
    """What the fleet needs of a verdict across nodes (envpin.fleet.multiworker.MultiWorker, the multi-worker
    self-test): its status (CONSISTENT, DIFFERS or FAILED), one line saying it, its JSON and where it was read."""

    @property
    def status(self) -> str: ...

    @property
    def source(self) -> str | None: ...

    @property
    def nodes(self) -> tuple[str, ...]: ...

    def golden(self) -> tuple[str, str] | None:
        """(counted device class, hash) when the verdict gives a golden hash of its nodes, else None."""
        ...

    def line(self) -> str: ...

    def to_json(self) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class NodeFailure(Value):
    """A node that gave no report: the probe failed there, or did not finish in time."""

    status: str
    reason: str

    def __post_init__(self) -> None:
        if self.status not in (FAILED, TIMED_OUT):
            raise ValueError(f"a node failure is {FAILED!r} or {TIMED_OUT!r}, not {self.status!r}")


@dataclass(frozen=True, slots=True)
class Expected(Value):
    """The fleet the user says is there: a node count (`fleet report --expect N`) or the node names
    (`--expect-nodes FILE`). Without it a node that wrote no file at all is invisible; with it, it is missing.

    `origin`: where the names come from (the file), for messages."""

    count: int
    names: tuple[str, ...] | None = None
    origin: str | None = None

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ValueError(f"a fleet has at least one node, not {self.count}")
        if self.names is not None and (len(self.names) != self.count or len(set(self.names)) != self.count):
            raise ValueError("the expected names must be distinct, one per expected node")

    @classmethod
    def nodes(cls, names: Sequence[str], origin: str | None = None) -> Expected:
        return cls(len(names), tuple(names), origin)

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "source": self.origin}


@dataclass(frozen=True, slots=True)
class Node(Value):
    name: str
    status: str
    source: str | None = None
    reason: str | None = None
    class_id: int | None = None
    device_class: str | None = None
    golden: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "source": self.source,
            "reason": self.reason,
            "class": self.class_id,
            "device_class": self.device_class,
            "golden": self.golden,
        }


@dataclass(frozen=True, slots=True)
class NodeClass(Value):
    """Nodes whose result-affecting fields are all equal; the reference is the largest class."""

    id: int
    fingerprint: str
    nodes: tuple[str, ...]
    device_classes: tuple[str, ...]
    reference: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "fingerprint": self.fingerprint,
            "size": len(self.nodes),
            "nodes": list(self.nodes),
            "device_classes": list(self.device_classes),
            "reference": self.reference,
        }


@dataclass(frozen=True, slots=True)
class Spread(Value):
    """One field that is not the same on every probed node: value -> the nodes holding it.

    `absent`: nodes without the field (for a golden hash: the nodes of its device class that ran no
    self-test, which are not checked); `common`: the most frequent value (None: absent is)."""

    key: str
    severity: str
    reason: str
    values: dict[str, tuple[str, ...]]
    absent: tuple[str, ...]
    common: str | None

    @property
    def golden(self) -> bool:
        return self.key.startswith(GOLDEN_PREFIX)

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "severity": self.severity,
            "reason": self.reason,
            "common": self.common,
            "values": {v: list(n) for v, n in self.values.items()},
            "absent": list(self.absent),
        }


@dataclass(frozen=True, slots=True)
class GoldenGroup(Value):
    """The golden training hashes of one device class: consistent when at most one hash was seen."""

    device_class: str
    hashes: dict[str, tuple[str, ...]]
    unchecked: tuple[str, ...]

    @property
    def consistent(self) -> bool:
        return len(self.hashes) <= 1

    def to_json(self) -> dict[str, Any]:
        return {
            "device_class": self.device_class,
            "consistent": self.consistent,
            "hashes": {h: list(n) for h, n in self.hashes.items()},
            "unchecked": list(self.unchecked),
        }


@dataclass(frozen=True, slots=True)
class FleetResult(Value):
    nodes: tuple[Node, ...]
    classes: tuple[NodeClass, ...]
    spreads: tuple[Spread, ...]
    informational: tuple[str, ...]
    golden: tuple[GoldenGroup, ...]
    outliers: tuple[str, ...]
    #: What the user said to expect, if anything; missing nodes it names are in `nodes` (status MISSING).
    expected: Expected | None = None
    #: Nodes missing from a count (--expect N): they have no names, so they are only counted.
    unnamed_missing: int = 0
    #: Nodes found that the expected names do not list, and nodes found beyond an expected count.
    unexpected: tuple[str, ...] = ()
    surplus: int = 0
    #: Multi-worker self-tests read with the reports (envpin.fleet.multiworker): a worker that did not run fails
    #: the fleet, workers or runs that differ are a breaking difference.
    multiworker: tuple[MultiWorker, ...] = ()
    _by_name: dict[str, Node] = field(default_factory=dict, repr=False, compare=False)

    def node(self, name: str) -> Node:
        if not self._by_name:
            self._by_name.update((n.name, n) for n in self.nodes)
        return self._by_name[name]

    def status_nodes(self, status: str) -> list[Node]:
        return [n for n in self.nodes if n.status == status]

    def counts(self) -> dict[str, int]:
        """`nodes` counts every node the result knows of: probed, failed, timed out and missing."""
        sev = Counter(s.severity for s in self.spreads)
        return {
            "nodes": len(self.nodes) + self.unnamed_missing,
            OK: len(self.status_nodes(OK)),
            FAILED: len(self.status_nodes(FAILED)),
            TIMED_OUT: len(self.status_nodes(TIMED_OUT)),
            MISSING: len(self.status_nodes(MISSING)) + self.unnamed_missing,
            "unexpected": len(self.unexpected) + self.surplus,
            "classes": len(self.classes),
            "outliers": len(self.outliers),
            "breaking": sev["breaking"],
            "risk": sev["risk"],
            "info": len(self.informational),
        }

    def found(self) -> int:
        """The nodes that left a report or an error file."""
        return len(self.nodes) - len(self.status_nodes(MISSING))

    def problems(self) -> list[str]:
        """Why the fleet cannot be called consistent whatever its reports say: each node that failed, timed
        out or is missing, and nodes that were not expected, named (a count names none)."""
        out = []
        for status, word in ((FAILED, "failed"), (TIMED_OUT, "timed out"), (MISSING, "missing")):
            names = [n.name for n in self.status_nodes(status)]
            if names:
                out.append(f"{_n(len(names), 'node')} {word} ({_few(names)})")
        count = self.expected.count if self.expected is not None else 0
        if self.unnamed_missing:
            out.append(f"{_n(self.unnamed_missing, 'node')} missing ({self.found()} of {count} expected nodes found)")
        if self.unexpected:
            listed = shown(self.expected.origin, 80) if self.expected and self.expected.origin else "the expected nodes"
            out.append(f"{_n(len(self.unexpected), 'node')} not in {listed} ({_few(self.unexpected)})")
        if self.surplus:
            out.append(f"{_n(self.surplus, 'node')} more than expected ({self.found()} found, {count} expected)")
        out += [m.line() for m in self.multiworker if m.status == FAILED]
        return out

    @property
    def status(self) -> str:
        """FAILED: a node failed, timed out or is missing, an unexpected node turned up, or none was probed;
        DIFFERS: a breaking difference between the probed nodes; CONSISTENT: neither."""
        c = self.counts()
        if c[FAILED] or c[TIMED_OUT] or c[MISSING] or c["unexpected"] or not c[OK]:
            return FAILED
        if any(m.status == FAILED for m in self.multiworker):
            return FAILED
        return DIFFERS if c["breaking"] or any(m.status == DIFFERS for m in self.multiworker) else CONSISTENT

    @property
    def exit_code(self) -> int:
        """0: every node probed (every expected one, when the user said which) and nothing breaking differs."""
        return 0 if self.status == CONSISTENT else 1

    def verdict(self) -> str:
        """One line, the status first: "failed: " and the nodes without a report lead whenever there are any,
        so a fleet with a node missing or failed never reads as consistent."""
        c = self.counts()
        problems = self.problems()
        if c["breaking"]:
            probed = (
                f"{_n(c['breaking'], 'breaking difference')} across {_n(c['classes'], 'class', 'classes')}; "
                f"{_n(c['outliers'], 'outlier')}"
            )
        elif not c[OK]:
            probed = "no node was probed"
        elif problems:  # what the probed nodes show, without calling the fleet consistent
            probed = (
                f"{_n(c[OK], 'probed node')}: no breaking difference, {_n(c['risk'], 'risk difference')}"
                if c["risk"]
                else f"{_n(c[OK], 'probed node')}: no breaking or risk difference"
            )
        elif c["risk"]:
            probed = f"{_n(c[OK], 'node')} consistent (no breaking differences); {_n(c['risk'], 'risk difference')}"
        else:
            probed = f"{_n(c[OK], 'node')} consistent" + (" except informational differences" if c["info"] else "")
        differing = [m.line() for m in self.multiworker if m.status == DIFFERS]
        agreeing = [m.line() for m in self.multiworker if m.status == CONSISTENT]
        if self.status == FAILED:
            return "failed: " + "; ".join([*problems, probed, *differing, *agreeing])
        if differing:
            return "; ".join([*differing, probed, *agreeing])
        return "; ".join([probed, *agreeing])

    def to_json(self) -> dict[str, Any]:
        """The whole result; print it with sorted keys (envpin.views.console.print_json)."""
        return {
            "fleet_schema": FLEET_SCHEMA,
            "status": self.status,
            "verdict": self.verdict(),
            "counts": self.counts(),
            "expected": None
            if self.expected is None
            else {**self.expected.to_json(), "unexpected": list(self.unexpected)},
            "classes": [c.to_json() for c in self.classes],
            "outliers": list(self.outliers),
            "differences": [s.to_json() for s in self.spreads],
            "informational": list(self.informational),
            "golden": [g.to_json() for g in self.golden],
            "nodes": {n.name: n.to_json() for n in self.nodes},
            # Only when there is one: fleet results without a self-test read as they always did.
            **(
                {"multiworker": [m.to_json() | {"source": m.source} for m in self.multiworker]}
                if self.multiworker
                else {}
            ),
        }


def _multiworker_json(m: MultiWorker) -> dict[str, Any]:
    return m.to_json() | {"source": m.source}


def to_json_text(result: FleetResult) -> str:
    """Canonical JSON: sorted keys, two-space indent, trailing newline, ASCII (a report can carry undecodable
    bytes as lone surrogates, which only a \\u escape can hold; the probe writes its reports the same way)."""
    return json.dumps(result.to_json(), sort_keys=True, indent=2, ensure_ascii=True) + "\n"


def _n(count: int, word: str, plural: str | None = None) -> str:
    return f"{count} {word if count == 1 else (plural or word + 's')}"


def _few(names: Sequence[str]) -> str:
    """Node names for one line: control characters escaped (names come from reports), at most VERDICT_NAMES."""
    head = ", ".join(shown(n, 60) for n in names[:VERDICT_NAMES])
    return head + (f" and {len(names) - VERDICT_NAMES} more" if len(names) > VERDICT_NAMES else "")


def unique_names(names: Sequence[str]) -> list[str]:
    """The names with later duplicates suffixed '#2', '#3'... (never colliding with a name given as is)."""
    given = set(names)
    taken: set[str] = set()
    out = []
    for name in names:
        base = name or "node"
        candidate, i = base, 2
        while candidate in taken or (candidate != base and candidate in given):
            candidate = f"{base}#{i}"
            i += 1
        taken.add(candidate)
        out.append(candidate)
    return out


def kubernetes_node_name(report: Mapping[str, Any]) -> str | None:
    """The node name the Kubernetes manifest gives the probe (env.ENVPIN_NODE_NAME), if the report has it."""
    body = report.get("env")
    f = body.get(NODE_NAME_ENV) if isinstance(body, dict) else None
    value = f.get("value") if isinstance(f, dict) else None
    return value.strip() if isinstance(value, str) and value.strip() else None


def node_name(report: Mapping[str, Any], fallback: str) -> str:
    """The node a report came from: the node name the Kubernetes manifest sets (a pod's host name is the
    pod's own name), else the host name, else `fallback`."""
    host = report.get("host")
    f = host.get("hostname") if isinstance(host, dict) else None
    value = f.get("value") if isinstance(f, dict) else None
    hostname = value.strip() if isinstance(value, str) and value.strip() else None
    return kubernetes_node_name(report) or hostname or fallback


class Compact:
    """One probed node as the fleet keeps it: only the fields in which its report differs from the first
    report its Reducer read (which the Reducer keeps whole), the result-affecting fields reduced to the
    same kind of difference (equal keys: equal fingerprint fields), its device class, golden hash and
    whether it computes on a GPU. The report itself is not kept: a fleet costs the fields that vary
    between nodes (host name, PID, time, GPU UUIDs: about 2 KB a node), not the whole parsed report."""

    __slots__ = ("changed", "device_class", "goldens", "gpu", "key", "missing", "reducer")

    def __init__(
        self,
        reducer: Reducer,
        changed: dict[str, str],
        missing: frozenset[str],
        key: tuple[frozenset[tuple[str, str]], frozenset[str]],
        device_class: str,
        goldens: tuple[tuple[str, str], ...],
        gpu: bool,
    ) -> None:
        self.reducer, self.changed, self.missing, self.key = reducer, changed, missing, key
        self.device_class, self.goldens, self.gpu = device_class, goldens, gpu

    @property
    def golden(self) -> str | None:
        """The golden training hash (of the node's own device class); the multi-replica ones are in goldens."""
        return next((h for dc, h in self.goldens if dc == self.device_class), None)

    def get(self, key: str) -> str | None:
        """The report's flattened value of `key` (envpin.probe.fields.flatten), None when it has none."""
        if key in self.changed:
            return self.changed[key]
        if key in self.missing:
            return None
        return self.reducer.base.get(key)

    def fp_fields(self) -> dict[str, str]:
        """The node's result-affecting fields (envpin.environment.lockfile.fingerprint_fields)."""
        changed, missing = self.key
        out = {k: v for k, v in self.reducer.base_fp.items() if k not in missing}
        out.update(changed)
        return out


_NONE: frozenset[Any] = frozenset()

#: Checks the nesting of a part of a report at its level (the report is level 1): envpin.fleet.inputs.read
#: passes one that refuses a report nested deeper than envpin.files.read.MAX_JSON_DEPTH.
Nesting = Callable[[Any, int], None]


def _as_section(value: Any) -> dict[str, Any]:
    """A report's section as flatten reads it: a value that is not an object holds no fields."""
    return value if isinstance(value, dict) else {}


def _leaves(node: Any, path: tuple[Any, ...], out: list[tuple[tuple[Any, ...], Any]]) -> bool:
    """Collect the booleans and numbers under `node` with their paths. Two parts that are equal (==) flatten
    to the same text unless such a leaf differs in type (1, 1.0, true) or sign (0.0, -0.0), which their
    repr tells; False when `node` holds something else equality cannot vouch for (a value of no JSON type,
    a key that is not a string)."""
    kind = type(node)
    if kind is str or node is None:
        return True
    if kind is dict:
        return all(type(k) is str and _leaves(v, (*path, k), out) for k, v in node.items())
    if kind is list:
        return all(_leaves(v, (*path, i), out) for i, v in enumerate(node))
    if kind is bool or kind is int or kind is float:
        out.append((path, node))
        return True
    return False


class _Leaves:
    """The booleans and numbers of a section (_leaves: path from the section, value, the field holding it),
    grouped by the length of their path, so that another report's section is checked against them without a
    loop in Python over its leaves: the types must be the same, and a float zero's sign (repr)."""

    __slots__ = ("groups", "zeros")

    def __init__(self, paths: list[tuple[Any, ...]], values: list[Any], owners: list[str]) -> None:
        by_length: dict[int, list[tuple[tuple[Any, ...], Any, str]]] = {}
        for path, value, owner in zip(paths, values, owners, strict=True):
            by_length.setdefault(len(path), []).append((path, value, owner))
        self.groups = [
            (
                tuple(zip(*(p for p, _, _ in group), strict=True)),
                tuple(type(v) for _, v, _ in group),
                tuple(o for *_, o in group),
            )
            for _, group in sorted(by_length.items())
        ]
        self.zeros = tuple(
            (p, repr(v), o) for p, v, o in zip(paths, values, owners, strict=True) if type(v) is float and v == 0
        )

    def retyped(self, tree: dict[str, Any]) -> set[str] | None:
        """The fields whose booleans and numbers are not of the same types in `tree` (None: one of them is not
        where it is here)."""
        out: set[str] = set()
        try:
            for columns, types, owners in self.groups:
                found: Iterator[Any] = map(tree.__getitem__, columns[0])
                for keys in columns[1:]:
                    found = map(getitem, found, keys)
                out.update(compress(owners, map(is_not, map(type, found), types)))
            for path, text, owner in self.zeros:
                if repr(reduce(getitem, path, tree)) != text:
                    out.add(owner)
        except (KeyError, IndexError, TypeError):
            return None
        return out


class _Section:
    """One section of a Reducer's first report: the parsed section, its flattened fields (all, and per field
    when no field's name is a dotted prefix of another's, so that fields flatten to keys of their own), and
    where its booleans and numbers are (_leaves), so that an equal section or field of another report is
    known to flatten the same without flattening it."""

    __slots__ = ("fields", "flat", "leaves", "names", "tree", "untrusted", "values")

    def __init__(self, name: str, tree: dict[str, Any], share: Callable[[str], str]) -> None:
        from envpin.probe import fields

        self.tree = tree
        self.names = tuple(tree)
        self.values = tuple(tree.values())
        self.fields: dict[str, dict[str, str]] | None = {}
        self.flat: dict[str, str] = {}
        paths: list[tuple[Any, ...]] = []
        values: list[Any] = []
        owners: list[str] = []
        untrusted: set[str] = set()
        for field_name in sorted(tree):
            own: dict[str, str] = {}
            fields.flatten_field(f"{name}.{field_name}", tree[field_name], own)
            own = {share(k): share(v) for k, v in own.items()}
            self.fields[field_name] = own
            self.flat.update(own)
            found: list[tuple[tuple[Any, ...], Any]] = []
            if not _leaves(tree[field_name], (field_name,), found):
                untrusted.add(field_name)
            for path, value in found:
                paths.append(path)
                values.append(value)
                owners.append(field_name)
        self.leaves = _Leaves(paths, values, owners)
        self.untrusted = frozenset(untrusted)
        if any(n[:i] in tree for n in tree for i, c in enumerate(n) if c == "."):
            self.fields = None

    def same(self, tree: dict[str, Any]) -> bool:
        """Whether another report's section flattens as this one does, told without flattening it."""
        if tree is self.tree:
            return True
        if self.untrusted or tree != self.tree:
            return False
        return self.leaves.retyped(tree) == set()

    def unequal(self, tree: dict[str, Any]) -> list[str] | None:
        """The fields of `tree` (another report's section) that may not flatten as this one's do: not equal, or
        equal with a number of another type; None when the section is to be flattened whole (fields added,
        removed, or named so that their keys can overlap)."""
        if self.fields is None or tree.keys() != self.tree.keys():
            return None
        names = set(compress(self.names, map(ne, map(tree.__getitem__, self.names), self.values)))
        retyped = self.leaves.retyped(tree)
        return sorted(names | self.untrusted | (set(self.names) if retyped is None else retyped))

    def diff(
        self, tree: dict[str, Any], name: str, fields_: list[str] | None, changed: dict[str, str], missing: list[str]
    ) -> None:
        """Add what `tree` (another report's section `name`) flattens to where it differs from this one to
        `changed` (key -> its value there) and `missing` (keys it lacks), flattening only `fields_` (unequal)."""
        from envpin.probe import fields

        now: dict[str, str] = {}
        if fields_ is None:
            for field_name in sorted(tree):
                fields.flatten_field(f"{name}.{field_name}", tree[field_name], now)
            old: Iterable[str] = self.flat
        else:
            for field_name in fields_:
                fields.flatten_field(f"{name}.{field_name}", tree[field_name], now)
            assert self.fields is not None  # unequal() gives fields only then
            old = chain.from_iterable(map(self.fields.__getitem__, fields_))
        _differences(self.flat, now, old, changed, missing)


def _differences(
    base: Mapping[str, str], now: dict[str, str], old: Iterable[str], changed: dict[str, str], missing: list[str]
) -> None:
    """What `now` holds that `base` does not (or otherwise) into `changed`; the keys of `old` (base's) that
    `now` lacks into `missing`."""
    changed.update(compress(now.items(), map(ne, map(base.get, now), now.values())))
    missing.extend(filterfalse(now.__contains__, old))


class Reducer:
    """Reports to Compact records as they are read, so a fleet's parsed reports need never be held at once
    (envpin.fleet.inputs.read hands each report to `add` and keeps only the record). Field names and values
    seen before are shared, not stored again. One Reducer per fleet: its records are differences from the
    first report it read.

    The first report is flattened whole and kept (parsed, and flattened per section and field); each later
    one is compared with it section by section (a section that is the first report's own object, as
    envpin.files.read.Members makes the sections whose text is the same, at no cost) and, in a section that
    is not equal, field by field: only the fields that differ are flattened and have their nesting checked,
    and the fingerprint's fields are the flat differences that are result-affecting
    (envpin.probe.fields.fingerprinted), so a report costs less than parsing it."""

    def __init__(self) -> None:
        self.base: dict[str, str] = {}
        self.base_fp: dict[str, str] = {}
        self._first = True
        self._pool: dict[str, str] = {}
        self._tree: dict[str, Any] = {}
        self._sections: dict[str, _Section] = {}
        self._raw: tuple[Any, ...] = ()
        self._sections_flat: dict[str, str] = {}
        self._golden: dict[str, str] = {}
        self._cpu_compute = False

    def _shared(self, text: str) -> str:
        return self._pool.setdefault(text, text)

    @property
    def reference(self) -> Mapping[str, Any] | None:
        """The first report, as the Reducer keeps it to compare the others with (None before it); a reader
        that shares its unchanged parts with the reports it reads next (envpin.files.read.Members) makes
        those comparisons free. Never to be changed."""
        return None if self._first else self._tree

    def add(self, report: Mapping[str, Any], origin: str | None = None, *, nesting: Nesting | None = None) -> Compact:
        """The record of one report; with `origin` (what an error message calls it) it is checked first
        (envpin.reports.diff.check_report), else the caller has checked it. Raises ReportError.

        `nesting`: for a report whose nesting was not checked when it was parsed (envpin.files.read.parse_json
        with depth=False): called on every part of it that differs from the first report (the first report
        whole), so a report too deep is refused as its parser would have refused it."""
        from envpin.environment import lockfile
        from envpin.probe import fields
        from envpin.reports import diff

        report = dict(report)
        if origin is not None:
            diff.check_report(report, origin)
        if self._first:
            if nesting is not None:
                nesting(report, 1)
            return self._add_first(report)
        share = self._shared
        # The sections that may flatten otherwise than the first report's: not the same object (envpin.files.
        # read.Members shares the sections whose text is the same), and not equal, or equal with a number of
        # another type (1, 1.0, true).
        sections = self._sections
        others = list(compress(sections, map(is_not, map(report.get, sections), self._raw)))
        redo = [n for n in others if not sections[n].same(_as_section(report.get(n)))]
        # Which fields to flatten, and the nesting of all that is new checked before anything is flattened.
        work = []
        deep: list[Any] = []
        for name in redo:
            tree = _as_section(report.get(name))
            fields_ = sections[name].unequal(tree)
            deep.append(tree if fields_ is None else [tree[n] for n in fields_])
            work.append((name, tree, fields_))
        if nesting is not None:
            first = self._tree
            deep += [report[k] for k in report.keys() - sections.keys() if report[k] is not first.get(k)]
            deep += [report.get(n) for n in others if not isinstance(report.get(n), dict)]  # not flattened
            nesting(deep, 1)  # all of it at once: its items are at level 2, the fields in them at 3
        changed: dict[str, str] = {}
        missing: list[str] = []
        for name, tree, fields_ in work:
            self._sections[name].diff(tree, name, fields_, changed, missing)
        flat = dict(self._sections_flat)
        flat.update(changed)
        for k in missing:
            del flat[k]
        gpu = fields.gpu_present(flat)
        device_class = share(fields.device_class(report, flat))
        golden = dict(fields.golden_fields(report, flat))
        goldens = tuple((share(k[len(GOLDEN_PREFIX) :]), share(h)) for k, h in golden.items())
        base_fp, cpu = self.base_fp, not gpu
        if cpu == self._cpu_compute:  # the same fields are result-affecting as in the first report
            fp_changed = (
                frozenset((share(k), share(v)) for k, v in changed.items() if fields.fingerprinted(k, cpu)) or _NONE
            )
            fp_missing = frozenset(share(k) for k in missing if k in base_fp) or _NONE
        else:  # a CPU-only report among GPU ones, or the other way round: CPU features count for one of them
            flat.update(golden)
            fp = lockfile.fingerprint_fields(report, flat)
            base = self.base
            fp_changed = (
                frozenset((share(k), share(changed.get(k, base.get(k, v)))) for k, v in fp.items() - base_fp.items())
                or _NONE
            )
            fp_missing = frozenset(k for k in base_fp if k not in fp) or _NONE
        _differences(self._golden, golden, self._golden, changed, missing)
        pool = self._pool.setdefault
        record = {pool(k, k): pool(v, v) for k, v in changed.items()}
        gone = frozenset(pool(k, k) for k in missing) or _NONE
        return Compact(self, record, gone, (fp_changed, fp_missing), device_class, goldens, gpu)

    def _add_first(self, report: dict[str, Any]) -> Compact:
        """The first report: flattened whole, its fields kept to compare the next ones with."""
        import copy

        from envpin.environment import lockfile
        from envpin.probe import fields

        flat = fields.flatten(report)
        fp = lockfile.fingerprint_fields(report, flat)
        share = self._shared
        device_class = share(fields.device_class(report, flat))
        goldens = tuple((share(dc), share(h)) for dc, h in lockfile.report_goldens(report))
        gpu = fields.gpu_present(flat)
        self._first = False
        self.base = {share(k): share(v) for k, v in flat.items()}
        self.base_fp = {share(k): self.base[k] for k in fp}
        self._cpu_compute = not gpu
        self._tree = copy.deepcopy(report)  # the caller's report may change after this
        for name in fields.SECTIONS:
            tree = self._tree.get(name)
            self._sections[name] = _Section(name, tree if isinstance(tree, dict) else {}, share)
        self._sections_flat = {k: v for section in self._sections.values() for k, v in section.flat.items()}
        self._raw = tuple(map(self._tree.get, self._sections))
        self._golden = {k: v for k, v in self.base.items() if k not in self._sections_flat}
        return Compact(self, {}, _NONE, (_NONE, _NONE), device_class, goldens, gpu)


@dataclass(slots=True)
class _Probed(Value):
    name: str
    source: str | None
    record: Compact


def aggregate(
    reports: Sequence[tuple[str, Mapping[str, Any] | NodeFailure | Compact]],
    sources: Sequence[str | None] | None = None,
    expected: Expected | None = None,
    multiworker: Sequence[MultiWorker] = (),
) -> FleetResult:
    """The fleet view of (node name, report, Compact record or NodeFailure) pairs; duplicate names get
    '#2', '#3'... Records must all come from one Reducer (reports given as such join it). With `expected`,
    the nodes it names (or counts) that no pair accounts for are missing, and nodes it does not name (or
    beyond its count) unexpected: either makes the fleet failed.

    Raises ReportError for an entry that is neither a probe report nor a NodeFailure."""
    if sources is not None and len(sources) != len(reports):
        raise ValueError("sources must have one entry per report")
    names = unique_names([str(name) for name, _ in reports])
    reducer = next((item.reducer for _, item in reports if isinstance(item, Compact)), None) or Reducer()
    nodes: dict[str, Node] = {}
    probed: list[_Probed] = []
    for i, (name, (_, item)) in enumerate(zip(names, reports, strict=True)):
        source = sources[i] if sources is not None else None
        if isinstance(item, NodeFailure):
            nodes[name] = Node(name, item.status, source, item.reason)
            continue
        if isinstance(item, Compact):
            if item.reducer is not reducer:
                raise ValueError("the records of one fleet come from one Reducer")
            record = item
        elif not isinstance(item, Mapping):
            raise ReportError(f"node {name}: {type(item).__name__} is not a probe report")
        else:
            record = reducer.add(item, f"node {name}" + (f" ({source})" if source else ""))
        probed.append(_Probed(name, source, record))

    classes = _classes(probed)
    class_of = {n: c.id for c in classes for n in c.nodes}
    for p in probed:
        nodes[p.name] = Node(p.name, OK, p.source, None, class_of[p.name], p.record.device_class, p.record.golden)
    spreads, informational = _spreads(probed)
    golden = _golden(probed, [(mg, m.nodes) for m in multiworker if (mg := m.golden()) is not None])
    spreads += [_golden_spread(g) for g in golden if not g.consistent]
    spreads.sort(key=lambda s: (_ORDER.get(s.severity, 9), s.key))
    outliers = {n for c in classes if not c.reference for n in c.nodes}
    for g in golden:
        if not g.consistent:
            common = _most_common({h: len(n) for h, n in g.hashes.items()})
            outliers |= {n for h, ns in g.hashes.items() if h != common for n in ns}
    unnamed_missing = surplus = 0
    unexpected: list[str] = []
    if expected is not None and expected.names is not None:
        missing, unexpected = match_expected(expected.names, list(nodes))
        where = f" (listed in {expected.origin})" if expected.origin else ""
        for name in missing:
            nodes[name] = Node(
                name,
                MISSING,
                expected.origin,
                f"nothing was found for this node: no report, error file or probe pod{where}",
            )
    elif expected is not None:
        unnamed_missing, surplus = max(0, expected.count - len(nodes)), max(0, len(nodes) - expected.count)
    return FleetResult(
        nodes=tuple(nodes[n] for n in sorted(nodes)),
        classes=tuple(classes),
        spreads=tuple(spreads),
        informational=tuple(informational),
        golden=tuple(golden),
        outliers=tuple(sorted(outliers)),
        expected=expected,
        unnamed_missing=unnamed_missing,
        unexpected=tuple(unexpected),
        surplus=surplus,
        multiworker=tuple(multiworker),
    )


def match_expected(listed: Sequence[str], found: Sequence[str]) -> tuple[list[str], list[str]]:
    """(listed names no found node answers to, found names nobody listed). A listed name matches a node of
    that name, else the one node with the same short host name (up to the first dot): Slurm and Kubernetes
    list gpu01 where the report's host name may read gpu01.cluster.local, and the other way round."""
    free = set(found)
    matched: set[str] = set()
    for name in listed:
        if name in free:
            matched.add(name)
            free.discard(name)
    by_short: dict[str, list[str]] = {}
    for name in sorted(free):
        by_short.setdefault(name.split(".", 1)[0], []).append(name)
    for name in listed:
        if name in matched:
            continue
        candidates = [n for n in by_short.get(name.split(".", 1)[0], ()) if n in free]
        if len(candidates) == 1:
            matched.add(name)
            free.discard(candidates[0])
    return [n for n in listed if n not in matched], sorted(free)


def _classes(probed: list[_Probed]) -> list[NodeClass]:
    """Largest first (ties: by the first node's name); the first is the reference."""
    from envpin.probe import fields

    groups: dict[tuple[frozenset[tuple[str, str]], frozenset[str]], list[_Probed]] = {}
    for p in probed:
        groups.setdefault(p.record.key, []).append(p)
    ordered = sorted(groups.values(), key=lambda g: (-len(g), min(p.name for p in g)))
    return [
        NodeClass(
            i + 1,
            fields.fingerprint_of_fields(g[0].record.fp_fields()),
            tuple(sorted(p.name for p in g)),
            tuple(sorted({p.record.device_class for p in g})),
            i == 0,
        )
        for i, g in enumerate(ordered)
    ]


def _most_common(counts: Mapping[Any, int]) -> Any:
    """The most frequent key; ties go to the smallest (None, for 'absent', first)."""
    return min(counts, key=lambda k: (-counts[k], k is not None, k or ""))


def _spreads(probed: list[_Probed]) -> tuple[list[Spread], list[str]]:
    """Breaking and risk fields that differ (with values), and the informational ones (names only)."""
    from envpin.probe import fields

    if not probed:
        return [], []
    # Most fields are equal on every node: each record holds only what differs from its Reducer's first
    # report, so the keys to look at are those differences (a key may still turn out equal everywhere).
    differing: set[str] = set()
    for p in probed:
        differing.update(p.record.changed)
        differing.update(p.record.missing)
    spreads: list[Spread] = []
    informational: list[str] = []
    # envpin diff's rule for a pair: CPU features are breaking when either side computes on its CPU.
    cpu_compute = any(not p.record.gpu for p in probed)
    for key in sorted(k for k in differing if not k.startswith(GOLDEN_PREFIX)):
        values: dict[str, list[str]] = {}
        absent: list[str] = []
        for p in probed:
            value = p.record.get(key)
            if value is None:
                absent.append(p.name)
            else:
                values.setdefault(value, []).append(p.name)
        if not absent and len(values) < 2:  # equal on every node given (differs from a report not given)
            continue
        # Only present-versus-absent pairs differ when a single value was seen.
        severity, reason = fields.severity(key, cpu_compute, absent=len(values) < 2)
        if severity == fields.INFO:
            informational.append(key)
            continue
        counts: dict[str | None, int] = {v: len(n) for v, n in values.items()}
        if absent:
            counts[None] = len(absent)
        spreads.append(
            Spread(
                key,
                severity,
                reason,
                {v: tuple(sorted(values[v])) for v in sorted(values)},
                tuple(sorted(absent)),
                _most_common(counts),
            )
        )
    return spreads, informational


def _golden(probed: list[_Probed], across: Sequence[tuple[tuple[str, str], tuple[str, ...]]] = ()) -> list[GoldenGroup]:
    """Per device class that has at least one golden hash: the hashes and who gave them. A multi-replica
    hash's class is its node's class counted (envpin.probe.fields.counted_class); the nodes of that base
    class without it were not checked. `across`: ((class, hash), nodes) of verdicts across nodes (the
    multi-worker self-test), whose nodes gave that hash together."""
    from envpin.probe import fields

    by_class: dict[str, list[_Probed]] = {}
    hashes: dict[str, dict[str, list[str]]] = {}
    for p in probed:
        by_class.setdefault(p.record.device_class, []).append(p)
        for dc, h in p.record.goldens:
            hashes.setdefault(dc, {}).setdefault(h, []).append(p.name)
    for (dc, h), names in across:
        given = hashes.setdefault(dc, {}).setdefault(h, [])
        given += [n for n in names if n not in given]
    out = []
    for dc in sorted(hashes):
        found = hashes[dc]
        gave = {n for names in found.values() for n in names}
        members = by_class.get(fields.base_class(dc), [])
        out.append(
            GoldenGroup(
                dc,
                {h: tuple(sorted(found[h])) for h in sorted(found)},
                tuple(sorted(p.name for p in members if p.name not in gave)),
            )
        )
    return out


def _golden_spread(g: GoldenGroup) -> Spread:
    from envpin.probe import fields

    common = _most_common({h: len(n) for h, n in g.hashes.items()})
    return Spread(GOLDEN_PREFIX + g.device_class, fields.BREAKING, GOLDEN_REASON, dict(g.hashes), g.unchecked, common)
