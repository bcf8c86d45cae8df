"""`envpin probe`, `diff`, `verify`: fingerprints of this machine or an image, compared with each other or a lock."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envpin.errors import UsageError, param
from envpin.record import Value

if TYPE_CHECKING:
    from collections.abc import Callable

    from envpin.environment.lockfile import Lock
    from envpin.image.probing import ImageProbe
    from envpin.record import ProgressCallback, ProgressEvent
    from envpin.reports.diff import Difference
    from envpin.reports.scope import Subject


@dataclass(frozen=True, slots=True)
class VerifyResult(Value):
    """`envpin verify`: how the lock's image (or a report, or this machine) compares with the lock's recorded
    reference; `compared` says which of them, and from which lock."""

    diffs: list[Difference]
    recorded: list[str]
    notes: list[str]
    expected_fingerprint: str
    actual_fingerprint: str
    lock: Path
    source: str
    exit_code: int
    #: The first line: what was compared with what ("verify: image sha256:… (from L) against the lock's reference").
    compared: str = ""
    #: What --record --force recorded over: the report's contradictions of the lock.
    warnings: list[str] = field(default_factory=list)
    #: What was compared, one line each (fingerprint fields, installed files, start-up hooks, golden hashes).
    checked: list[str] = field(default_factory=list)
    #: What could not be compared, each with why (no self-test, no image ID to compare, an older reference).
    unchecked: list[str] = field(default_factory=list)


def verify_environment(
    lock: Path | None = None,
    report: Path | None = None,
    record: bool = False,
    *,
    host: bool = False,
    force: bool = False,
    progress: Callable[[str], None] | None = None,
) -> VerifyResult:
    """Compare the lock's image (probed in a throwaway container), a report, or with host=True this machine,
    with the lock's reference; with record=True first add what is missing.

    The lock is found as every command finds it (envpin.environment.render.find_lock) and re-derived before use.
    Recording refuses a report whose environment contradicts the lock (another image, TensorFlow, CUDA or
    cuDNN, or the recipe's environment not in force), naming the fields, unless force=True; it writes the lock
    only when something new was added, and never overwrites a recorded value. UsageError for `report` with
    `host`, and for `force` without `record`."""
    from envpin.environment.lockfile import fingerprint_fields, golden_not_checked
    from envpin.environment.render import checked_lock, find_lock
    from envpin.reports import diff, scope

    if report is not None and host:
        raise UsageError(
            f"give {param('report')} FILE or {param('host')}, not both",
            hint=f"{param('host')} probes this machine instead of reading a report",
        )
    if force and not record:
        raise UsageError(
            f"{param('force')} only applies to {param('record')}",
            hint=f"add {param('record')}, or drop {param('force')}",
        )
    path = find_lock(lock)
    locked, plan = checked_lock(path)
    if not record and locked.expected is None:
        locked.verify({}, str(path))  # the LockError that says there is no reference yet, before any probe
    actual, subject, source, probed = _verify_subject(locked, path, report, host, progress)
    done: list[str] = []
    warnings: list[str] = []
    if record:
        from envpin.files.write import exclusive

        contradictions = locked.contradictions(actual, plan)
        if contradictions and not force:
            how = "probes it" if report is not None or host else "probed it"
            raise UsageError(
                f"{subject} does not come from the environment {path} describes, so it cannot be its reference: "
                + "; ".join(contradictions),
                hint=f"record a probe of the lock's image (`{param('lock', command='verify')} {path} "
                f"{param('record')}` {how}), or add {param('force')} to record it anyway",
            )
        warnings = [f"recorded although {line}" for line in contradictions]
        with exclusive(path.parent):  # read, add, write as one step against other envpin writers
            locked, _ = checked_lock(path)
            locked, done = locked.record(actual)
            if done:
                locked.write(path)
    checked = locked.verify(actual, str(path))
    image = locked.expected_image()
    reference = scope.Reference(
        fields=dict(locked.expected.fields) if locked.expected is not None and locked.expected.fields else None,
        golden=dict(locked.golden),
        image_id=image.id if image is not None else None,
        image_engine=image.engine if image is not None else None,
    )
    covered = scope.verification_scope(actual, reference, len(fingerprint_fields(actual)), record, probed)
    return VerifyResult(
        diffs=checked.differences,
        recorded=done,
        notes=[n for n in checked.notes if n != golden_not_checked()],  # said with its reason in `unchecked`
        expected_fingerprint=checked.expected_fingerprint,
        actual_fingerprint=checked.actual_fingerprint,
        lock=path,
        source=source,
        exit_code=diff.exit_code(checked.differences),
        compared=f"verify: {subject} (from {path}) against the lock's reference"
        if report is None and not host
        else f"verify: {subject} against the reference of {path}",
        warnings=warnings,
        checked=covered.checked,
        unchecked=covered.unchecked,
    )


def _verify_subject(
    locked: Lock,
    path: Path,
    report: Path | None,
    host: bool,
    progress: Callable[[str], None] | None,
) -> tuple[dict[str, Any], str, str, Subject]:
    """(the report to compare, how the first line names it, what the JSON names as its source, the image
    probed as the host knows it)."""
    from envpin.reports import diff
    from envpin.reports.scope import Subject

    if report is not None:
        return diff.load_report(report), f"report {report}", str(report), Subject()
    if host:
        from envpin.probe.report import collect

        # verify hashes the installed files as the image probe does: a verdict must see a file edited in place
        if progress is not None:
            progress("checking the installed files against their RECORD hashes")
        report_ = collect(check_files=True)
        return report_, f"this machine ({param('host')}: the host, not the lock's image)", "host", Subject()
    import tempfile

    from envpin.errors import EngineError
    from envpin.image import probing
    from envpin.image.docker import docker_client

    image = probing.lock_image(locked, path, docker_client)  # connects only when there is a build to look for
    client = image.client
    try:
        with tempfile.TemporaryDirectory(prefix="envpin-verify-") as tmp:
            out = Path(tmp) / "reports"
            probed = probing.run(client, image.id, out, gpu_access=_gpu_access, progress=progress)
            if probed.exit_code != 0:
                tail = " | ".join(probed.log_tail[-3:]) or "no output"
                raise EngineError(
                    f"the probe failed inside {image.id[:19]}… ({image.tag}), exit {probed.exit_code}: {tail}",
                    hint=f"`{param('image', command='probe')} {image.tag}` shows all of it",
                )
            written = [Path(w) for w in probed.written if w.endswith(".json")]
            if not written:
                raise EngineError(
                    f"the probe inside {image.tag} wrote no report",
                    hint=f"`{param('image', command='probe')} {image.tag}` shows what happens",
                )
            actual = diff.load_report(written[0])
    finally:
        client.close()
    return actual, f"image {image.id[:19]}… ({image.tag})", f"image {image.id}", Subject(image.id, image.engine)


@dataclass(frozen=True, slots=True)
class ProbeResult(Value):
    fingerprint: str
    fingerprinted: int
    errors: int
    written: list[str]
    report_on_stdout: bool
    selftest: str | None = None  # the self-test's one-line outcome, when it ran or was asked for
    exit_code: int = 0  # 1 when the self-test failed, 2 when it did not finish in time (inconclusive)
    #: The report itself when it was asked for a summary rather than written anywhere (`summary`).
    report: dict[str, object] | None = field(default=None, repr=False, compare=False)


def probe_machine(
    *,
    out: Path | None = None,
    json_file: Path | None = None,
    markdown: Path | None = None,
    with_tf: bool = False,
    selftest: bool = False,
    quick: bool = False,
    anonymize: bool = False,
    replicas: int | None = None,
    timeout: float | None = None,
    summary: bool = False,
    check_files: bool = False,
    progress: ProgressCallback | None = None,
) -> ProbeResult:
    """Probe this machine and write the report(s): both into the folder `out`, the JSON to `json_file`, the
    Markdown to `markdown` ('-': stdout); with no destination the JSON goes to stdout, or with `summary` the
    report comes back in the result instead (for a person's summary). `quick` shortens the self-test, which
    runs here only with `selftest` (UsageError otherwise); `replicas` adds the multi-replica self-test to it;
    `timeout` limits each self-test child (CPU seconds); `check_files` hashes every installed file against its
    RECORD (seconds with TensorFlow installed; off by default on a host). `progress` hears how far the
    self-test is, and that it ended before anything is written."""
    from envpin.api.selftest import _SELFTEST_TITLE, _check_replicas, _check_timeout, _parts_reported
    from envpin.files.write import check_output_file, check_output_folder
    from envpin.probe.fields import fingerprint_fields
    from envpin.probe.report import collect, one_file, write_reports

    if quick and not selftest:
        raise UsageError(
            f"{param('quick')} shortens the self-test, which runs on this machine only with {param('selftest')}",
            hint=f"add {param('selftest')}, or drop {param('quick')}",
        )
    if replicas is not None and not selftest:
        raise UsageError(
            f"{param('replicas')} adds to the self-test, which runs on this machine only with {param('selftest')}",
            hint=f"add {param('selftest')}, or drop {param('replicas')}",
        )
    _check_replicas(replicas)
    _check_timeout(timeout, selftest)
    both = one_file(str(json_file) if json_file else None, str(markdown) if markdown else None)
    if both is not None:
        raise UsageError(
            f"{param('json_file')} and {param('markdown')} both name {both}: one report would replace the other",
            hint="give each report its own file",
        )
    for path, name in ((out, "out"), (json_file, "json_file"), (markdown, "markdown")):
        if path is not None and (str(path) != "-" or name == "out"):  # '-': stdout, except for a folder
            (check_output_folder if name == "out" else check_output_file)(path, name)
    try:
        report = collect(
            selftest=selftest,
            quick=quick,
            with_tf=with_tf,
            anonymize=anonymize,
            replicas=replicas,
            timeout=timeout,
            progress=_parts_reported(progress) if selftest else None,
            check_files=check_files,
        )
    finally:
        if progress is not None and selftest:
            from envpin.record import ProgressEvent

            progress(ProgressEvent(_SELFTEST_TITLE, done=True))
    kept = summary and not (out or json_file or markdown)
    try:
        written = (
            []
            if kept
            else write_reports(
                report,
                out_dir=str(out) if out else None,
                json_path=str(json_file) if json_file else None,
                markdown_path=str(markdown) if markdown else None,
            )
        )
    except BrokenPipeError:
        raise  # stdout's reader went away (`envpin probe | head`): the CLI ends quietly
    except OSError as exc:
        from envpin.files.write import write_hint

        raise UsageError(f"cannot write the report: {exc}", hint=write_hint(exc)) from None
    on_stdout = not (out or json_file or markdown or kept) or "-" in (str(json_file), str(markdown))
    failed, line, unfinished = False, None, False
    if "selftest" in report:
        from envpin.probe.selftest.run import timed_out, verdict

        failed, line = verdict(report["selftest"], insisted=True)
        unfinished = not failed and bool(timed_out(report["selftest"]))
    return ProbeResult(
        report["fingerprint"],
        len(fingerprint_fields(report)),
        len(report["probe"]["errors"]["value"]),
        [w for w in written if w != "-"],
        on_stdout,
        line,
        1 if failed else 2 if unfinished else 0,
        report if kept else None,
    )


def probe_image(
    image: str,
    *,
    out: Path | None = None,
    gpus: str = "auto",
    selftest: bool | None = None,
    quick: bool = False,
    anonymize: bool = False,
    progress: Callable[[str], None] | None = None,
    replicas: int | None = None,
    timeout: float | None = None,
) -> ImageProbe:
    """`envpin probe --image`: the probe in a throwaway container of `image`, reports into `out` (./reports);
    the self-test runs where the image has TensorFlow unless selftest is False."""
    from envpin.api.selftest import _check_replicas, _check_timeout
    from envpin.environment.plan import validate_image_ref
    from envpin.files.write import check_output_folder
    from envpin.image import probing
    from envpin.image.docker import docker_client

    ref = validate_image_ref(image)
    if replicas is not None and selftest is False:
        raise UsageError(
            f"{param('replicas')} adds to the self-test, which {param('selftest')} false leaves out",
            hint=f"drop {param('replicas')}",
        )
    _check_replicas(replicas)
    _check_timeout(timeout, selftest is not False)
    if out is not None:
        check_output_folder(out, "out")
    if gpus not in probing.GPU_CHOICES:
        raise UsageError(
            f"{param('gpus')} must be one of {', '.join(probing.GPU_CHOICES)}", hint="the default, auto, asks the host"
        )
    client = docker_client()
    try:
        return probing.run(
            client,
            ref,
            out or Path("reports"),
            gpu_access=_gpu_access,
            gpus=gpus,
            selftest=selftest,
            quick=quick,
            anonymize=anonymize,
            progress=progress,
            replicas=replicas,
            timeout=timeout,
        )
    finally:
        client.close()


def _gpu_access() -> str | None:
    """How this host gives containers its GPUs, as `envpin doctor` reads it (the engine, CDI specs, hooks)."""
    import shutil

    from envpin.doctor.readings import GPU_HOOKS, Readings, read_cdi_specs, read_docker

    readings = Readings(
        docker=read_docker(),
        cdi_specs=read_cdi_specs(),
        container_hooks=tuple(h for h in GPU_HOOKS if shutil.which(h)),
    )
    return readings.gpu_access


@dataclass(frozen=True, slots=True)
class DiffResult(Value):
    diffs: list[Difference]
    a: Path
    b: Path
    #: The fingerprints of the fields compared (equal whenever no fingerprinted field differs).
    fingerprint_a: str | None
    fingerprint_b: str | None
    #: A report whose recorded fingerprint is not that of its fields, named.
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        from envpin.reports import diff

        return diff.exit_code(self.diffs)


def diff_files(a: Path, b: Path) -> DiffResult:
    """Every difference between two probe reports, classified."""
    from envpin.reports import diff

    ra, rb = diff.load_report(a), diff.load_report(b)
    (fa, note_a), (fb, note_b) = diff.fingerprint_of(ra, a.name), diff.fingerprint_of(rb, b.name)
    return DiffResult(diff.diff_reports(ra, rb), a, b, fa, fb, [n for n in (note_a, note_b) if n])


@dataclass(frozen=True, slots=True)
class HostProbeRequest(Value):
    """`envpin probe`: this machine; with no destination the JSON report goes to stdout."""

    out: Path | None = None
    json_file: Path | None = None
    markdown: Path | None = None
    with_tf: bool = False
    selftest: bool = False  # opt-in on this machine
    quick: bool = False
    anonymize: bool = False
    replicas: int | None = None  # the multi-replica self-test too
    timeout: float | None = None  # CPU seconds per self-test child
    summary: bool = False  # no destination: the report comes back for a summary, not as JSON on stdout
    check_files: bool = False  # installed files against RECORD (the image probe always checks them)


@dataclass(frozen=True, slots=True)
class ImageProbeRequest(Value):
    """`envpin probe --image`: a throwaway container of `image`, both reports into `out` (./reports)."""

    image: str
    out: Path | None = None
    gpus: str = "auto"
    selftest: bool | None = None  # None: where the image has TensorFlow, as in every image the probe runs in
    quick: bool = False
    anonymize: bool = False
    replicas: int | None = None  # the multi-replica self-test too
    timeout: float | None = None  # CPU seconds per self-test child


def run_probe(
    request: HostProbeRequest | ImageProbeRequest,
    progress: Callable[[str | ProgressEvent], None] | None = None,
) -> ProbeResult | ImageProbe:
    """`envpin probe`: this machine or an image, as the request says. `progress` hears the image probe's steps
    (text), and this machine's self-test as events with done/total."""
    if isinstance(request, ImageProbeRequest):
        return probe_image(
            request.image,
            out=request.out,
            gpus=request.gpus,
            selftest=request.selftest,
            quick=request.quick,
            anonymize=request.anonymize,
            progress=progress,
            replicas=request.replicas,
            timeout=request.timeout,
        )
    return probe_machine(
        out=request.out,
        json_file=request.json_file,
        markdown=request.markdown,
        with_tf=request.with_tf,
        selftest=request.selftest,
        quick=request.quick,
        anonymize=request.anonymize,
        replicas=request.replicas,
        timeout=request.timeout,
        summary=request.summary,
        progress=progress,
        check_files=request.check_files,
    )
