"""Compare probe reports (``envpin diff``); the lock's own comparison (``envpin verify``) is in envpin.lock.

The classification itself lives with the probe (envpin.probe.fields), so the fingerprint computed inside an
image and the differences shown on a host use the same rules.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from envpin.errors import ReportError, param, shown
from envpin.files.read import parse_json, read_regular
from envpin.probe import fields
from envpin.probe.report import PROBE_SCHEMA
from envpin.record import Value

_ORDER = {fields.BREAKING: 0, fields.RISK: 1, fields.INFO: 2}
ABSENT = "(absent)"


@dataclass(frozen=True, slots=True)
class Difference(Value):
    """One field that differs between two sides (a, b); a side lacking the field holds None."""

    key: str
    severity: str
    a: str | None
    b: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def load_report(path: str | Path) -> dict[str, Any]:
    """Read a probe report, refusing anything that is not one (one-line ReportError)."""
    p = Path(path)
    try:
        text = read_regular(p).decode("utf-8")
    except FileNotFoundError:
        raise ReportError(
            f"report {p} does not exist", hint=f"write one with '{param('json_file', command='probe')} FILE'"
        ) from None
    except UnicodeDecodeError:
        raise ReportError(f"cannot read report {p}: it is not UTF-8 text") from None
    except OSError as exc:
        raise ReportError(f"cannot read report {p}: {exc.strerror or exc}") from None
    data = parse_json(text, f"report {p}", ReportError, hint="write it again with `envpin probe`")
    check_report(data, str(p))
    report: dict[str, Any] = data  # check_report: an object
    return report


def check_report(data: Any, name: str = "report") -> None:
    """The structural minimum diff and verify rely on; the full JSON Schema ships as
    envpin/probe/report.schema.json."""
    if not isinstance(data, dict):
        raise ReportError(f"{name} is not a probe report (a JSON object was expected)")
    version = data.get("probe_schema")
    if type(version) is not int or version < 1:  # not bool: true is not schema 1
        raise ReportError(
            f"{name} is not a probe report (probe_schema must be a positive integer, not {shown(version)})"
            if "probe_schema" in data
            else f"{name} is not a probe report (no probe_schema)"
        )
    if version > PROBE_SCHEMA:
        raise ReportError(
            f"{name} uses probe schema {version}; this envpin reads up to {PROBE_SCHEMA}",
            hint="upgrade envpin on this machine",
        )
    for section in (*fields.SECTIONS, "selftest"):
        if section in data and not isinstance(data[section], dict):
            raise ReportError(f"{name}: section '{section}' is not an object")


def fingerprint_of(report: dict[str, Any], name: str) -> tuple[str, str | None]:
    """The fingerprint of the report's fields (what is compared), and a note when the one the report records
    is another: the report was edited, or written with other fingerprint rules."""
    computed = fields.fingerprint(report)
    recorded = report.get("fingerprint")
    if recorded is None or recorded == computed:
        return computed, None
    return computed, (
        f"{name} records the fingerprint {shown(recorded, 80)}, but its fields' fingerprint is "
        f"{computed} (the report was edited, or written with other fingerprint rules)"
    )


def sort(diffs: list[Difference]) -> list[Difference]:
    """Breaking first, then risk, then info; by field name within each."""
    return sorted(diffs, key=lambda d: (_ORDER.get(d.severity, 9), d.key))


def compare_flat(a: dict[str, str], b: dict[str, str], cpu_compute: bool) -> list[Difference]:
    """Differences between two flat field maps (dotted key -> string)."""
    out = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if va == vb:
            continue
        severity, reason = fields.severity(key, cpu_compute, absent=va is None or vb is None)
        out.append(Difference(key, severity, va, vb, reason))
    return sort(out)


def diff_reports(a: dict[str, Any], b: dict[str, Any]) -> list[Difference]:
    """Every field that differs between two reports, classified breaking / risk / info."""
    fa, fb = fields.flatten(a), fields.flatten(b)
    cpu_compute = not (fields.gpu_present(fa) and fields.gpu_present(fb))
    return compare_flat(fa, fb, cpu_compute)


@dataclass(frozen=True, slots=True)
class Environment(Value):
    """What a report made in one environment (an envpin image) must not contradict (envpin.environment.lockfile
    fills it from a lock)."""

    #: image.envpin_plan.<key> -> the value the image's plan.json must have (None: not known, not compared).
    baked: dict[str, str | None]
    tf_version: str
    #: 'cuda'/'cudnn' -> (the version, where it comes from in words).
    versions: dict[str, tuple[str | None, str]]
    #: The recipe's environment: variables set, variables that must not be.
    env: dict[str, str]
    unset: tuple[str, ...] = ()


#: Where a report says which CUDA and cuDNN it found: loaded library, declared, ENV.
_VERSION_KEYS = {
    "cuda": ("cuda.runtime.version", "cuda.declared.cuda", "env.CUDA_VERSION"),
    "cudnn": ("cuda.cudnn.version", "cuda.declared.cudnn", "env.CUDNN_VERSION"),
}


def contradictions(report: dict[str, Any], want: Environment) -> list[str]:
    """Why `report` was not made in `want`, one line per field; [] when nothing it says contradicts it.

    Compared where the report says something: the plan baked into the image (its digest, base digest, tag,
    TensorFlow, recipe), the TensorFlow it found or declares, CUDA and cuDNN (loaded, declared, ENV), and every
    variable of the recipe's environment. A probe of a host has no plan baked in: that alone contradicts."""
    from envpin.knowledge.imageconfig import DISAGREES, compare_version

    flat = fields.flatten(report)
    out: list[str] = []
    if not any(k.startswith("image.envpin_plan.") for k in flat):
        out.append(
            "image.envpin_plan is absent: the report was not made inside an image built from an "
            "envpin.lock (a probe of a host?)"
        )
    else:
        out += [
            f"image.envpin_plan.{key} is {_said(flat.get(f'image.envpin_plan.{key}'))}, but the lock's is "
            f"{_said(value)}"
            for key, value in want.baked.items()
            if value is not None and flat.get(f"image.envpin_plan.{key}") != value
        ]
    for key in ("tensorflow.version", "env.TENSORFLOW_VERSION"):
        have = _version_in(flat.get(key))
        if have is not None and compare_version(want.tf_version, have) == DISAGREES:
            out.append(f"{key} is {_said(have)}, but the lock is for TensorFlow {want.tf_version}")
    for what, (expected, source) in want.versions.items():
        for key in _VERSION_KEYS[what]:
            have = _version_in(flat.get(key))
            if expected and have is not None and compare_version(str(expected), have) == DISAGREES:
                out.append(f"{key} is {_said(have)}, but {source} is {_said(str(expected))}")
    for name, value in sorted(want.env.items()):
        have = flat.get(f"env.{name}")
        if have != value:
            said = "not set" if have is None else _said(have)
            out.append(f"env.{name} is {said}, but the recipe sets {_said(value)}")
    out += [
        f"env.{name} is set ({_said(flat[f'env.{name}'])}), but the recipe unsets it"
        for name in want.unset
        if f"env.{name}" in flat
    ]
    return out


def _version_in(text: str | None) -> str | None:
    """A report's value when it is a version ('2.1.0', '10.2'), None for 'unavailable', errors and the like."""
    if text is None or not text[:1].isdigit():
        return None
    head = text.split()[0].split("+")[0]
    return head if all(part.isdigit() for part in head.split(".")) else None


def _said(value: str | None) -> str:
    text = ABSENT if value is None else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def counts(diffs: list[Difference]) -> dict[str, int]:
    out = {s: 0 for s in fields.SEVERITIES}
    for d in diffs:
        out[d.severity] = out.get(d.severity, 0) + 1
    return out


def verdict(diffs: list[Difference]) -> str:
    """One line: 'identical', 'identical except informational differences', 'N risk differences (no
    breaking)' or 'N breaking differences'."""
    c = counts(diffs)
    if c[fields.BREAKING]:
        n = c[fields.BREAKING]
        return f"{n} breaking difference{'s' if n != 1 else ''}"
    if c[fields.RISK]:
        n = c[fields.RISK]
        return f"no breaking differences; {n} risk difference{'s' if n != 1 else ''}"
    if c[fields.INFO]:
        return "identical except informational differences"
    return "identical"


def exit_code(diffs: list[Difference]) -> int:
    """0: no breaking difference; 1: at least one."""
    return 1 if any(d.severity == fields.BREAKING for d in diffs) else 0


def to_json(diffs: list[Difference], **extra: Any) -> dict[str, Any]:
    return {
        "verdict": verdict(diffs),
        "counts": counts(diffs),
        "differences": [d.to_dict() for d in diffs],
        **extra,
    }
