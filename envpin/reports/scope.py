"""What a verification compared and what it could not: the lines that qualify its verdict.

"identical" alone over-claims when the report has no self-test (no golden training hash to check or record),
when its probe did not check installed files against RECORD, or when the lock's reference predates a field.
Each line is built from what the report and the lock hold; nothing is assumed where they say nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from envpin.errors import param
from envpin.probe import fields
from envpin.record import Value

#: Fields whose comparison a verdict names when the lock's reference holds them, and says is missing otherwise.
HOOKS_KEY = "packages.startup_hooks"


@dataclass(frozen=True, slots=True)
class Scope(Value):
    """checked: what was compared, one line each; unchecked: what was not, each with why."""

    checked: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Subject(Value):
    """The image a verification probed, as the host knows it (None: a report or this machine)."""

    image_id: str | None = None
    engine: str | None = None


@dataclass(frozen=True, slots=True)
class Reference(Value):
    """What the lock holds to compare with (envpin.environment.lockfile.Lock, read by the caller): its
    [expected.fields] (None: no fields, only a fingerprint), its golden hashes by device class, and the image
    ID and engine ('podman 4.3.1') of its [image] when that was built from the lock's inputs."""

    fields: dict[str, str] | None
    golden: dict[str, str]
    image_id: str | None = None
    image_engine: str | None = None


def _field(report: dict[str, Any], section: str, name: str) -> Any:
    part = report.get(section)
    return part.get(name) if isinstance(part, dict) else None


def _selftest_absence(report: dict[str, Any]) -> str:
    """Why a report holds no golden training hash, in its own words where it has them."""
    selftest = report.get("selftest")
    if selftest is None:
        return f"the report has no self-test: probe with `{param('selftest', command='probe')}`"
    if isinstance(selftest, dict):
        for key in ("skipped", "error"):
            if isinstance(selftest.get(key), str):
                return f"no self-test ran: {selftest[key]}"
    return "the self-test gave no golden training hash"


def _record_check(report: dict[str, Any], checked: list[str], unchecked: list[str]) -> None:
    found = _field(report, "packages", "record_check")
    totals = found.get("value") if isinstance(found, dict) else None
    if isinstance(totals, dict) and isinstance(totals.get("files"), int):
        line = (
            f"{totals['files']:,} installed files of {totals.get('distributions', 0):,} distributions against "
            f"their RECORD hashes ({totals.get('bytes', 0) / 2**30:.2f} GiB)"
        )
        without = totals.get("distributions_without_record")
        if isinstance(without, int) and without:
            line += f"; {without:,} distributions have no RECORD and were not checked"
        checked.append(line)
    elif isinstance(found, dict) and isinstance(found.get("unavailable"), str):
        unchecked.append(
            f"installed files against RECORD: the probe left them out (a probe of the host checks them with "
            f"`{param('check_files', command='probe')}`; `verify` and a probe inside an image always do)"
        )
    elif isinstance(found, dict) and "error" in found:
        unchecked.append(f"installed files against RECORD: the probe could not check them ({found['error']})")
    else:
        unchecked.append("installed files against RECORD: the report's probe does not check them (an older envpin)")


def _hooks(report: dict[str, Any], ref: Reference, checked: list[str], unchecked: list[str]) -> None:
    found = _field(report, "packages", "startup_hooks")
    hooks = found.get("value") if isinstance(found, dict) else None
    if not isinstance(hooks, list):
        unchecked.append("start-up hooks (sitecustomize, usercustomize, .pth): the report does not list them")
    elif ref.fields and HOOKS_KEY not in ref.fields:
        unchecked.append(
            f"start-up hooks ({len(hooks)} in the report): the lock's reference was recorded by a probe that did "
            "not list them"
        )
    else:
        checked.append(f"start-up hooks: {len(hooks)} (sitecustomize, usercustomize, .pth files with import lines)")


def _golden(report: dict[str, Any], ref: Reference, record: bool, checked: list[str], unchecked: list[str]) -> None:
    found = [(key.split(".", 1)[1], digest) for key, digest in fields.golden_fields(report)]
    if not found:
        done = "recorded or checked" if record else "checked"
        unchecked.append(f"golden training hash: none {done} ({_selftest_absence(report)})")
        return
    for device, _digest in found:
        if device in ref.golden:
            checked.append(f"golden training hash for {device}")
        else:
            unchecked.append(f"golden training hash for {device}: the lock records none for this device class")


def _image(ref: Reference, subject: Subject, unchecked: list[str]) -> None:
    """The lock's [image] is the ID a reproducible (podman) build gives ('podman 4.3.1'); `verify` probes
    Docker images only (envpin.image.probing.lock_image), and a report does not record its image's ID, so
    the line says which of the two keeps them apart."""
    if ref.image_id is None or ref.image_engine is None:
        return
    said = f"image ID: the lock records {ref.image_id[:19]}… ({ref.image_engine})"
    if subject.image_id is None:
        unchecked.append(f"{said}; a report does not record the ID of the image it ran in")
    elif ref.image_engine.split(" ")[0] != subject.engine:  # verify probes through Docker only
        unchecked.append(
            f"{said}; the probed image "
            f"{subject.image_id[:19]}… comes from {subject.engine}, whose IDs differ from that engine's"
        )


def verification_scope(
    report: dict[str, Any], ref: Reference, fingerprinted: int, record: bool, subject: Subject
) -> Scope:
    """What `envpin verify` compared for `report` against the lock's reference, and what it could not."""
    checked = [f"{fingerprinted:,} fingerprint fields"]
    unchecked: list[str] = []
    _record_check(report, checked, unchecked)
    _hooks(report, ref, checked, unchecked)
    _golden(report, ref, record, checked, unchecked)
    _image(ref, subject, unchecked)
    return Scope(checked, unchecked)
