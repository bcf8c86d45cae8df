"""`envpin probe`, `diff`, `verify`: fingerprints of this machine or an image, compared with each other or a lock."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envpin.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

    from envpin.image.probing import ImageProbe
    from envpin.reports.diff import Difference

@dataclass(frozen=True)
class VerifyResult:
    """`envpin verify`: how this machine (or a report) compares with the lock's recorded reference."""

    diffs: list[Difference]
    recorded: list[str]
    notes: list[str]
    expected_fingerprint: str
    actual_fingerprint: str
    lock: Path
    source: str
    exit_code: int


def verify_environment(lock: Path, report: Path | None = None, record: bool = False) -> VerifyResult:
    """Compare a report (or a live probe) with the lock; with record=True first add what is missing.

    Recording writes the lock only when something new was added, and never overwrites a recorded value."""
    from envpin import probe
    from envpin.environment import lockfile
    from envpin.reports import diff

    actual = diff.load_report(report) if report is not None else probe.collect()
    done: list[str] = []
    if record:
        from envpin.fsutil import exclusive

        with exclusive(lock.parent):  # read, add, write as one step against other envpin writers
            locked, _ = lockfile.read_checked(lock)
            locked, done = locked.record(actual)
            if done:
                locked.write(lock)
    else:
        locked, _ = lockfile.read_checked(lock)
    checked = locked.verify(actual, str(lock))
    return VerifyResult(
        diffs=checked.differences,
        recorded=done,
        notes=checked.notes,
        expected_fingerprint=checked.expected_fingerprint,
        actual_fingerprint=checked.actual_fingerprint,
        lock=lock,
        source=str(report) if report is not None else "live probe",
        exit_code=diff.exit_code(checked.differences),
    )


@dataclass(frozen=True)
class ProbeResult:
    fingerprint: str
    fingerprinted: int
    errors: int
    written: list[str]
    report_on_stdout: bool
    selftest: str | None = None  # the self-test's one-line outcome, when it ran or was asked for
    exit_code: int = 0  # 1 when the self-test failed


def probe_machine(
    *,
    out: Path | None = None,
    json_file: Path | None = None,
    markdown: Path | None = None,
    with_tf: bool = False,
    selftest: bool = False,
    quick: bool = False,
    anonymize: bool = False,
) -> ProbeResult:
    """Probe this machine and write the report(s); with no destination the JSON goes to stdout."""
    from envpin import probe
    from envpin.fsutil import check_output_path

    for path, option in ((out, "--out"), (json_file, "--output"), (markdown, "--markdown")):
        if path is not None and str(path) != "-":
            check_output_path(path, option)
    report = probe.collect(selftest=selftest, quick=quick, with_tf=with_tf, anonymize=anonymize)
    try:
        written = probe.write_reports(
            report,
            out_dir=str(out) if out else None,
            json_path=str(json_file) if json_file else None,
            markdown_path=str(markdown) if markdown else None,
        )
    except OSError as exc:
        raise UsageError(f"cannot write the report: {exc}", hint="check the output path") from None
    on_stdout = not (out or json_file or markdown) or "-" in (str(json_file), str(markdown))
    failed, line = False, None
    if "selftest" in report:
        from envpin.probe.selftest.run import verdict

        failed, line = verdict(report["selftest"], insisted=True)
    return ProbeResult(report["fingerprint"], len(probe.fingerprint_fields(report)),
                       len(report["probe"]["errors"]["value"]), [w for w in written if w != "-"], on_stdout,
                       line, 1 if failed else 0)


def probe_image(
    image: str, *, out: Path | None = None, gpus: str = "auto", selftest: bool | None = None, quick: bool = False,
    anonymize: bool = False, progress: Callable[[str], None] | None = None,
) -> ImageProbe:
    """`envpin probe --image`: the probe in a throwaway container of `image`, reports into `out` (./reports);
    the self-test runs where the image has TensorFlow unless selftest is False."""
    from envpin.environment.plan import validate_image_ref
    from envpin.fsutil import check_output_path
    from envpin.image import probing
    from envpin.image.docker import docker_client

    ref = validate_image_ref(image)
    if out is not None:
        check_output_path(out, "--out")
    if gpus not in probing.GPU_CHOICES:
        raise UsageError(f"--gpus must be one of {', '.join(probing.GPU_CHOICES)}",
                         hint="the default, auto, asks the host")
    client = docker_client()
    try:
        return probing.run(client, ref, out or Path("reports"), gpu_access=_gpu_access, gpus=gpus,
                              selftest=selftest, quick=quick, anonymize=anonymize, progress=progress)
    finally:
        client.close()


def _gpu_access() -> str | None:
    """How this host gives containers its GPUs, as `envpin doctor` reads it (the engine, CDI specs, hooks)."""
    import shutil

    from envpin import doctor

    readings = doctor.Readings(
        docker=doctor.read_docker(),
        cdi_specs=doctor.read_cdi_specs(),
        container_hooks=tuple(h for h in doctor.GPU_HOOKS if shutil.which(h)),
    )
    return readings.gpu_access


@dataclass(frozen=True)
class DiffResult:
    diffs: list[Difference]
    a: Path
    b: Path
    fingerprint_a: str | None
    fingerprint_b: str | None

    @property
    def exit_code(self) -> int:
        from envpin.reports import diff

        return diff.exit_code(self.diffs)


def diff_files(a: Path, b: Path) -> DiffResult:
    """Every difference between two probe reports, classified."""
    from envpin.reports import diff

    ra, rb = diff.load_report(a), diff.load_report(b)
    return DiffResult(diff.diff_reports(ra, rb), a, b, ra.get("fingerprint"), rb.get("fingerprint"))


@dataclass(frozen=True)
class HostProbeRequest:
    """`envpin probe`: this machine; with no destination the JSON report goes to stdout."""

    out: Path | None = None
    json_file: Path | None = None
    markdown: Path | None = None
    with_tf: bool = False
    selftest: bool = False  # opt-in on this machine
    quick: bool = False
    anonymize: bool = False


@dataclass(frozen=True)
class ImageProbeRequest:
    """`envpin probe --image`: a throwaway container of `image`, both reports into `out` (./reports)."""

    image: str
    out: Path | None = None
    gpus: str = "auto"
    selftest: bool | None = None  # None: where the image has TensorFlow, as in every image the probe runs in
    quick: bool = False
    anonymize: bool = False


def run_probe(
    request: HostProbeRequest | ImageProbeRequest, progress: Callable[[str], None] | None = None,
) -> ProbeResult | ImageProbe:
    """`envpin probe`: this machine or an image, as the request says."""
    if isinstance(request, ImageProbeRequest):
        return probe_image(request.image, out=request.out, gpus=request.gpus, selftest=request.selftest,
                           quick=request.quick, anonymize=request.anonymize, progress=progress)
    return probe_machine(out=request.out, json_file=request.json_file, markdown=request.markdown,
                         with_tf=request.with_tf, selftest=request.selftest, quick=request.quick,
                         anonymize=request.anonymize)
