"""`envpin audit`: reproducibility hazards in existing Dockerfiles and Python training scripts, with file:line,
severity and the fix.

A `.py` file is a training script (envpin.audit.python): judged against the TensorFlow of a Dockerfile audited in
the same run, else --tf, else the lock.

Everything is read and parsed before anything is reported or written. A line the builder would reject is a
`parse-error` finding and the rest is still audited; a file that cannot be read at all (missing, binary,
not UTF-8) stops the whole run (exit 2), as does any parse problem with --fix, and nothing is written.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from envpin.audit.check import Finding, finding
from envpin.audit.config import AuditConfig, unknown_marks
from envpin.audit.config import apply as apply_config
from envpin.audit.engine import audit
from envpin.audit.fix import FixOutcome, fix  # eager: a later import of the module would rebind `fix`
from envpin.audit.parser import Dockerfile, DockerfileError, parse, read
from envpin.audit.python import is_script, source_lines
from envpin.audit.rule import SEVERITIES, Rule
from envpin.audit.rules import RULES
from envpin.audit.rules.syntax import SUPPRESSION_UNKNOWN
from envpin.errors import UsageError, param, shown
from envpin.files.read import read_regular
from envpin.portable.lazy import lazy_exports
from envpin.record import Value

#: Public names whose module loads on first use (envpin.portable.lazy reads this block; `name as name` exports
#: it): the Python-script audit, which no Dockerfile-only call needs at import (the script fixer is imported by
#: --fix itself), and MECHANICAL, which reads every family's rules (the script families' too).
TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from envpin.audit.mechanical import MECHANICAL as MECHANICAL
    from envpin.audit.python.audit import ScriptTarget as ScriptTarget
    from envpin.audit.python.audit import audit_script as audit_script
    from envpin.audit.python.audit import read_script as read_script
    from envpin.audit.python.audit import target_for as target_for


__all__ = [
    "MECHANICAL",
    "RULES",
    "SEVERITIES",
    "AuditRun",
    "DockerfileError",
    "Finding",
    "Rule",
    "ScriptTarget",
    "audit",
    "audit_script",
    "audit_text",
    "fix",
    "is_script",
    "parse",
    "parse_build_args",
    "read",
    "read_script",
    "run",
    "target_for",
]

FIX_SUFFIX = ".envpin-fixed"


@dataclass(frozen=True, slots=True)
class FixedFile(Value):
    """One file --fix wrote: its source, where the corrected copy went, and what was changed."""

    source: str
    output: str
    outcome: FixOutcome


@dataclass(frozen=True, slots=True)
class AuditRun(Value):
    """What `envpin audit` found (and with --fix wrote); its exit code follows --fail-on. `output` is the format
    the caller asked the report in (envpin.audit.report.FORMATS; envpin.views.audit writes it)."""

    files: list[str]
    findings: list[Finding]
    fail_on: str
    fixed: list[FixedFile] = field(default_factory=list)
    output: str = "tty"
    #: With explain: why each script is judged to train or not (path -> words).
    explained: dict[str, str] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        limit = SEVERITIES.index(self.fail_on)
        return 1 if any(SEVERITIES.index(f.severity) <= limit for f in self.findings) else 0


def parse_build_args(values: Sequence[str]) -> dict[str, str]:
    """NAME=VALUE strings, as `docker build --build-arg` takes them, by name (a later one wins)."""
    out: dict[str, str] = {}
    for value in values:
        name, eq, val = value.partition("=")
        if not eq or not name:
            raise UsageError(
                f"{param('build_args')} {value!r} is not NAME=VALUE",
                hint=f"e.g. {param('build_args')} TF_TAG=22.03-tf2-py3",
            )
        out[name] = val
    return out


def check_output(output: str) -> str:
    """`output` when the report can be written in it (envpin.audit.report.FORMATS), else a UsageError."""
    from envpin.audit.report import FORMATS

    if output not in FORMATS:
        raise UsageError(
            f"unknown output format '{shown(output)}'", hint=f"use {param('output')} " + ", ".join(FORMATS)
        )
    return output


def audit_text(text: str, path: str = "Dockerfile", **kwargs: object) -> list[Finding]:
    """Parse and audit Dockerfile text (what the tests and the corpus use)."""
    build_args = kwargs.pop("build_args", None)
    tolerant = bool(kwargs.pop("tolerant", False))
    df = parse(text, path, build_args, tolerant=tolerant)  # type: ignore[arg-type]
    return audit(df, **kwargs)  # type: ignore[arg-type]


class _Lines:
    """What suppression needs of a file: its path and lines (a parsed Dockerfile, or a script's text)."""

    def __init__(self, path: str, lines: list[str]) -> None:
        self.path, self.lines = path, lines


def _kept(df: Dockerfile | _Lines, findings: list[Finding], config: AuditConfig) -> list[Finding]:
    """Findings after suppressions, plus one for each suppression that names no rule."""
    marks = [
        finding(
            SUPPRESSION_UNKNOWN,
            df.path,
            line,
            f"'# envpin: ignore={rid}' names no rule that can be suppressed",
            "use the rule id the finding shows (docs/audit.md lists them)",
        )
        for line, rid in unknown_marks(df.lines)
    ]
    lines_of = {df.path: df.lines}
    for f in findings:  # requirement files of the build context carry suppressions too
        if f.file not in lines_of:
            try:
                lines_of[f.file] = read_regular(f.file).decode("utf-8").splitlines()
            except (OSError, UnicodeDecodeError):
                lines_of[f.file] = []
    kept = apply_config([*findings, *marks], lines_of, config)
    return sorted(kept, key=lambda f: (f.file != df.path, f.file, f.line, f.rule))


def _output_path(source: str, fix_out: Path | None, in_place: bool) -> Path:
    if in_place:
        return Path(source)
    if fix_out is not None:
        return fix_out
    return Path(source + FIX_SUFFIX)


def run(
    paths: Sequence[str],
    *,
    fail_on: str = "warning",
    build_args: dict[str, str] | None = None,
    target: str | None = None,
    tf: str | None = None,
    do_fix: bool = False,
    fix_out: Path | None = None,
    in_place: bool = False,
    resolve: Callable[[str], str] | None = None,
    config: AuditConfig | None = None,
    context: Path | None = None,
    read_context: bool = True,
    lock_target: ScriptTarget | None = None,
    output: str = "tty",
    explain: bool = False,
) -> AuditRun:
    """Audit files (Dockerfiles, and Python scripts: `.py`); with do_fix, write corrected copies and report what
    is left in them. `config` (from pyproject.toml) and inline suppressions silence findings before anything is
    fixed or reported. `lock_target`: the lock's TensorFlow, for scripts no Dockerfile or --tf speaks for.
    `output`: the report's format, kept in the result. Errors name the parameters of envpin.api.audit_files,
    which passes its own on (do_fix is its `fix`)."""
    config = config or AuditConfig()
    check_output(output)
    if fail_on not in SEVERITIES:
        raise UsageError(f"{param('fail_on')} {fail_on!r} is not a severity", hint="use error, warning or info")
    if not paths:
        raise UsageError("no Dockerfile or script given", hint=f"name them in {param('dockerfiles')}")
    if (fix_out is not None or in_place) and not do_fix:
        raise UsageError(
            f"{param('fix_out')} and {param('in_place')} only make sense with {param('fix')}",
            hint=f"add {param('fix')}",
        )
    if fix_out is not None and in_place:
        raise UsageError(f"{param('fix_out')} and {param('in_place')} exclude each other", hint="choose one")
    if fix_out is not None and len(paths) != 1:
        raise UsageError(
            f"{param('fix_out')} names one output file, but several files were given",
            hint=f"fix them one at a time, or drop {param('fix_out')} to write <file>.envpin-fixed",
        )
    paths = _expanded(paths)
    # a file named twice (Dockerfile and ./Dockerfile, a glob that also matches it) is audited once, as it was
    # first named: its findings are not reported twice, nor counted as two files
    firsts: dict[str, str] = {}
    for p in paths:
        firsts.setdefault(os.path.realpath(p), p)
    paths = list(firsts.values())
    with _few_collections():
        return _run(
            paths,
            fail_on,
            build_args,
            target,
            tf,
            do_fix,
            fix_out,
            in_place,
            resolve,
            config,
            context,
            read_context,
            lock_target,
            explain,
        ).replace(output=output)


@contextlib.contextmanager
def _few_collections() -> Iterator[None]:
    """Python's cyclic garbage collector scans every live object on each full pass; an audit builds hundreds of
    thousands of small objects and frees them all at once at the end, so the default thresholds made a 100k-line
    Dockerfile spend a third of its time in collections. Collect rarely while auditing, as before afterwards."""
    old, off = gc.get_threshold(), not gc.isenabled()
    gc.set_threshold(100_000, 50, 100)
    gc.enable()  # a caller may have turned it off: an audit of any size collects
    try:
        yield
    finally:
        gc.set_threshold(*old)
        if off:
            gc.disable()


def _run(
    paths: Sequence[str],
    fail_on: str,
    build_args: dict[str, str] | None,
    target: str | None,
    tf: str | None,
    do_fix: bool,
    fix_out: Path | None,
    in_place: bool,
    resolve: Callable[[str], str] | None,
    config: AuditConfig,
    context: Path | None,
    read_context: bool,
    lock_target: ScriptTarget | None = None,
    explain: bool = False,
) -> AuditRun:
    # Plain audits go on past lines the builder rejects (each is a parse-error finding); --fix rewrites
    # files, so it needs every line understood.
    parsed: list[Dockerfile] = [read(p, build_args, tolerant=not do_fix) for p in paths if not is_script(p)]
    scripts: dict[str, str] = {}
    encodings: dict[str, str] = {}  # a script's own (PEP 263), which --fix writes it back in
    if any(map(is_script, paths)):  # the script audit loads only for a run with scripts
        from envpin.audit.python.audit import audit_script, peers_of, read_script_encoded

        for p in paths:
            if is_script(p):
                scripts[p], encodings[p] = read_script_encoded(p)

    def where(df: Dockerfile) -> Path | None:
        """The build context: --context DIR, else the Dockerfile's folder; None with --no-context."""
        return None if not read_context else (context if context is not None else Path(df.path).parent)

    findings = {df.path: _kept(df, audit(df, target=target, tf=tf, context=where(df)), config) for df in parsed}
    if TYPE_CHECKING:
        from envpin.audit.python.script import Peer
    peers: dict[str, Peer] = {}
    explained: dict[str, str] = {}
    if scripts:
        aim = _script_target(parsed, target, tf, lock_target)
        # the scripts of one run see each other: a model or trainer imported from another one counts
        peers = peers_of(scripts, aim) if len(scripts) > 1 else {}
        for path, text in scripts.items():
            findings[path] = _kept(_Lines(path, source_lines(text)), audit_script(text, path, aim, peers), config)
        if explain:
            from envpin.audit.python.audit import explain as why

            explained = {path: why(text, path, aim, peers) for path, text in scripts.items()}
    if not do_fix:
        return AuditRun(list(paths), [f for p in paths for f in findings.get(p, [])], fail_on, explained=explained)
    for path in scripts:
        broken = next((f for f in findings[path] if f.rule == "parse-error"), None)
        if broken is not None:
            raise UsageError(
                f"{path}:{broken.line}: {broken.message}", hint=f"{param('fix')} needs a script Python parses"
            )
    fixed: list[FixedFile] = []
    remaining: list[Finding] = []
    outputs: dict[Path, tuple[bytes, int]] = {}
    # The Dockerfiles first: the scripts run in the image the fixed Dockerfile builds, so they are judged, fixed
    # and re-audited against it (a switch its ENV now sets is not inserted into a script again).
    refixed: list[Dockerfile] = []
    df_left: list[Finding] = []
    df_outputs: dict[Path, tuple[bytes, int]] = {}
    for df in parsed:
        out = _output_path(df.path, fix_out, in_place)
        _check_output(out, Path(df.path), in_place)
        outcome = fix(df, findings[df.path], target=target, tf=tf, resolve=resolve, build_args=build_args)
        again = parse(outcome.text, str(out), build_args)
        refixed.append(again)
        df_left.extend(_kept(again, audit(again, target=target, tf=tf, context=where(df)), config))
        fixed.append(FixedFile(df.path, str(out), outcome))
        df_outputs[out] = (outcome.text.encode("utf-8"), os.stat(df.path).st_mode & 0o777)
    if scripts and parsed:  # judged against the image the fixed Dockerfile builds
        aim = _script_target(refixed, target, tf, lock_target)
    script_fixes, script_left, script_outputs = (
        _fix_scripts(scripts, encodings, findings, aim, bool(parsed), fix_out, in_place, config)
        if scripts
        else ([], [], {})
    )
    remaining.extend(script_left)
    outputs.update(script_outputs)
    fixed = script_fixes + fixed
    remaining.extend(df_left)
    outputs.update(df_outputs)
    from envpin.files.write import atomic_write_many

    # All or nothing: every fixed file is staged beside its target before any is renamed into place.
    atomic_write_many(
        {out: data for out, (data, _) in outputs.items()},
        {out: mode for out, (_, mode) in outputs.items()},
        make_parents=False,
    )
    return AuditRun([str(o) for o in outputs], remaining, fail_on, fixed, explained=explained)


def _fix_scripts(
    scripts: dict[str, str],
    encodings: dict[str, str],
    findings: dict[str, list[Finding]],
    aim: ScriptTarget,
    rejudge: bool,
    fix_out: Path | None,
    in_place: bool,
    config: AuditConfig,
) -> tuple[list[FixedFile], list[Finding], dict[Path, tuple[bytes, int]]]:
    """--fix of the scripts of one run: each fixed (its findings judged again first where `rejudge`: against the
    image the fixed Dockerfiles build), then the fixed scripts re-audited together, as one run (a switch inserted
    into the run's entry counts for the modules it imports). The fixed files, the findings left in them and the
    bytes and mode to write to each output."""
    from envpin.audit.python.audit import audit_script, peers_of
    from envpin.audit.python.fixer import fix_script

    peers = peers_of(scripts, aim) if rejudge and len(scripts) > 1 else {}
    outcomes: dict[str, tuple[Path, FixOutcome]] = {}
    for path, text in scripts.items():
        out = _output_path(path, fix_out, in_place)
        _check_output(out, Path(path), in_place)
        mine = (
            _kept(_Lines(path, source_lines(text)), audit_script(text, path, aim, peers), config)
            if rejudge
            else findings[path]
        )
        outcomes[path] = (out, fix_script(text, path, mine, aim))
    texts = {str(out): outcome.text for out, outcome in outcomes.values()}
    fixed_peers = peers_of(texts, aim) if len(texts) > 1 else {}
    done: list[FixedFile] = []
    left: list[Finding] = []
    outputs: dict[Path, tuple[bytes, int]] = {}
    for path, (out, outcome) in outcomes.items():
        lines = _Lines(str(out), source_lines(outcome.text))
        left.extend(_kept(lines, audit_script(outcome.text, str(out), aim, fixed_peers), config))
        done.append(FixedFile(path, str(out), outcome))
        outputs[out] = (_encoded(outcome.text, encodings[path], path), os.stat(path).st_mode & 0o777)
    return done, left, outputs


#: Folders an audit of a package never descends into: environments, caches, VCS data.
_SKIPPED = frozenset({".git", ".hg", ".venv", "venv", "__pycache__", "node_modules", "site-packages", ".tox"})


def _expanded(paths: Sequence[str]) -> list[str]:
    """The paths with each folder replaced by the Python scripts under it, sorted (`envpin audit src/`: a package
    is audited as a whole, so its modules see each other's imports); a folder with none is a usage error."""
    out: list[str] = []
    for p in paths:
        if not os.path.isdir(p):
            out.append(p)
            continue
        found: list[str] = []
        for root, dirs, files in os.walk(p):
            dirs[:] = sorted(d for d in dirs if d not in _SKIPPED and not d.startswith("."))
            found.extend(os.path.join(root, f) for f in sorted(files) if f.endswith((".py", ".pyw")))
        if not found:
            raise UsageError(f"{p}: is a folder with no Python script in it", hint="name the scripts or Dockerfiles")
        out.extend(found)
    return out


def _encoded(text: str, encoding: str, path: str) -> bytes:
    """A fixed script in the encoding it was read in, still declaring that encoding (the fixes insert and
    comment lines below a coding line, never above it); a UsageError, before anything is written, otherwise."""
    from envpin.audit.python.audit import declared_encoding

    try:
        data = text.encode(encoding)
    except UnicodeEncodeError as exc:
        raise UsageError(
            f"{path}: the fixed script has {text[exc.start]!r}, which {encoding} cannot hold",
            hint=f"save the script as UTF-8 and run {param('fix')} again",
        ) from None
    if declared_encoding(data, path) != encoding:
        raise UsageError(
            f"{path}: the fixed script would no longer declare {encoding}",
            hint=f"move the coding line to the script's first line and run {param('fix')} again",
        )
    return data


def _script_target(
    parsed: list[Dockerfile], target: str | None, tf: str | None, lock_target: ScriptTarget | None
) -> ScriptTarget:
    """The TensorFlow scripts are judged against: the first Dockerfile of the run whose base's TensorFlow is
    known (with the ENV its produced image sets), else --tf, else the lock's."""
    from envpin.audit.base import identify
    from envpin.audit.python.audit import ScriptTarget, target_for

    image: tuple[str, dict[str, str]] | None = None  # the first Dockerfile's ENV, whatever TensorFlow it holds
    for df in parsed:
        if not df.stages:
            continue
        stage = df.stage(target)
        info = identify(df, stage, tf)
        env = {k: v.value for k, v in stage.env.items() if v.value is not None and not v.unresolved}
        if info.tf_version is not None:
            return ScriptTarget(f"{df.path}: {info.label}", info.tf_version, info.recipe, env)
        image = image or (f"{df.path}: {info.label}", env)
    if tf is not None:
        return target_for(tf, "stock", None, f"{param('tf')} {tf}", image[1] if image else None)
    if image is None:
        return lock_target or ScriptTarget()
    # the Dockerfile of the run builds the image: what its ENV sets counts for the script, over the lock's
    if lock_target is None:
        return ScriptTarget(image[0], image_env=image[1])
    return lock_target.replace(image_env={**lock_target.image_env, **image[1]})


def _check_output(out: Path, source: Path, in_place: bool) -> None:
    """Refuse a destination the fixed file of `source` must not replace or create, before anything is written."""
    from envpin.files.write import check_output_path

    if out.resolve() == source.resolve() and not in_place:
        raise UsageError(
            f"{param('fix_out')} {out} is the input file", hint=f"use {param('in_place')} to overwrite the input"
        )
    how = "fix the file it names instead" if in_place else f"choose another {param('fix_out')}"
    if out.is_symlink():
        raise UsageError(
            f"{out} is a symbolic link: writing the fixed file would replace the link with a file",
            hint=how if not in_place else f"fix the file it points to: {os.path.realpath(out)}",
        )
    if out.is_dir():
        raise UsageError(f"{out} is a directory", hint="give the path of the fixed file, not a folder")
    check_output_path(out, "in_place" if in_place else "fix_out")
    if out.exists() and not os.stat(out).st_mode & 0o222:
        raise UsageError(f"{out} is read-only", hint=f"make it writable (chmod u+w {out}) if it should change")


lazy_exports(__name__)
