"""pip: every install/wheel/download call of every stage (a builder stage's output ends up in the image too), and
the requirement and constraint files they install, read from the build context as pip reads them.

One finding per rule and RUN lists every package of every pip call in it. Package sources written into pip's
configuration (nvidia-pyindex, `pip config set`) count for every later call in the stage and the stages built
on it. A requirements file's findings point at its own lines.
"""

from __future__ import annotations

import posixpath
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from envpin.audit.check import Check, Context, RunRule
from envpin.audit.context import MAX_BYTES, MAX_INCLUDES, BuildContext
from envpin.audit.parser import Instruction, Stage
from envpin.audit.pipspec import PIP_NAMES, PipCall, is_local, pip_call, pip_config, req_name, spec_state
from envpin.audit.rule import EXAMPLE_BASE, Rule
from envpin.audit.shell import Command, RunScript
from envpin.errors import param
from envpin.files.read import read_regular
from envpin.record import Value

_LOCKED = "COPY requirements.lock .\nRUN pip install --require-hashes --no-deps -r requirements.lock\n"
_REPEATABLE = ("pip: repeatable installs", "https://pip.pypa.io/en/stable/topics/repeatable-installs/")
_SECURE = ("pip: secure installs (hash-checking mode)", "https://pip.pypa.io/en/stable/topics/secure-installs/")
_CONTEXT = ("The build context", "#the-build-context")
_COMMENT = "Leaves a comment above the instruction: "

PIP_UNPINNED = Rule(
    id="pip-unpinned",
    severity="warning",
    title="pip installs packages without == pins",
    finds="`pip install/wheel/download` (also `python -m pip`, `uv pip`) of a name without `==`/`===`, or a VCS "
    "URL without a commit; in a requirements file from the build context, such a line.",
    why="An unpinned requirement resolves to whatever is newest on the day of the build. Pin exact "
    "versions, ideally in a requirements lock with hashes (`envpin render --requirements`).",
    bad=EXAMPLE_BASE + "RUN pip install --no-cache-dir pandas 'scikit-learn>=1.3'\n",
    good=EXAMPLE_BASE + _LOCKED,
    autofix=_COMMENT + "which versions to pin is a choice the audit cannot make (`envpin lock` makes a hashed "
    "lock from the versions you name).",
    references=(_REPEATABLE, ("envpin lock", "lock.md"), _CONTEXT),
)

PIP_NO_HASHES = Rule(
    id="pip-no-hashes",
    severity="warning",
    title="pip installs without hash checking",
    finds="pip installs named packages or URLs without `--require-hashes` (or `PIP_REQUIRE_HASHES`, or "
    "`#sha256=` on a URL); in a requirements file, lines without `--hash` (one finding with the count when "
    "no line has one, one per line when some do, since pip then refuses the file).",
    why="Without --require-hashes (hashes come from a requirements file) pip accepts any file the "
    "index serves for that version, including wheels uploaded later. Install from a requirements "
    "file with --hash entries and --require-hashes.",
    bad=EXAMPLE_BASE + "RUN pip install --no-cache-dir pandas==2.1.4\n",
    good=EXAMPLE_BASE + _LOCKED,
    autofix=_COMMENT + "hashes come from the files the index serves, which the audit does not download.",
    references=(_SECURE, ("envpin lock", "lock.md"), _CONTEXT),
)

PIP_REQUIREMENTS_FILE = Rule(
    id="pip-requirements-file",
    severity="info",
    title="requirements file not checked",
    finds="A `-r`/`-c` file (installed without `--require-hashes`) that the build context does not provide: "
    "copied from another stage, downloaded, in the base image, named by a variable, missing from the "
    "context, or not read (`--no-context`).",
    why="The audit reads requirement and constraint files that a COPY or ADD brings in from the build "
    "context (--context DIR, default the Dockerfile's folder) line by line. This one could not be read: "
    "it comes from another stage, a download or the base image, its name is a variable, or the "
    "context is not read (--no-context). Make sure it pins every package with == and --hash, or install "
    "it with --require-hashes so pip enforces that.",
    bad=EXAMPLE_BASE + "RUN pip install --no-cache-dir -r /opt/app/requirements.txt\n",
    good=EXAMPLE_BASE + "RUN pip install --no-cache-dir --require-hashes -r /opt/app/requirements.txt\n",
    autofix=_COMMENT + "the file is not the Dockerfile's to change.",
    references=(_CONTEXT,),
)

PIP_EXTRA_INDEX = Rule(
    id="pip-extra-index",
    severity="warning",
    title="extra or alternative package source without hash checking",
    finds="`--extra-index-url`, `--index-url`/`-i`, `--find-links`/`-f`, `PIP_*_URL`, `pip config set "
    "...index-url/find-links`, or an earlier `pip install nvidia-pyindex` (it writes NVIDIA's index into "
    "pip's configuration, for the rest of the stage and the stages built on it), with packages not "
    "hash-checked; in a requirements file, such a source line.",
    why="With --extra-index-url, --index-url, --find-links (-f), the PIP_* variables, `pip config set` or "
    "nvidia-pyindex (which writes extra-index-url into pip's configuration), pip takes the highest "
    "version any source offers, and for a pinned version whichever file a source serves: a name can "
    "be served by a different source tomorrow (dependency confusion). Pin exact versions with hashes "
    "(--require-hashes), or install from one index only.",
    bad=EXAMPLE_BASE + "RUN pip install --extra-index-url https://pypi.example.com/simple mylib==1.2.0\n",
    good=EXAMPLE_BASE + "COPY requirements.lock .\n"
    "RUN pip install --require-hashes --extra-index-url https://pypi.example.com/simple -r requirements.lock\n",
    autofix=_COMMENT + "which source a package should come from is for its owner to say.",
    references=(
        _SECURE,
        ("pip install --extra-index-url", "https://pip.pypa.io/en/stable/cli/pip_install/#cmdoption-extra-index-url"),
    ),
)

PIP_TRUSTED_HOST = Rule(
    id="pip-trusted-host",
    severity="warning",
    title="pip trusts a host without TLS verification",
    finds="`--trusted-host`, `PIP_TRUSTED_HOST` or `pip config set global.trusted-host` (in a `RUN`, or in a "
    "requirements file): no TLS verification for that host.",
    why="--trusted-host (or PIP_TRUSTED_HOST, or `pip config set global.trusted-host`) turns off certificate "
    "checks for that host, so anyone on the network path can serve the packages. Give pip the CA that "
    "signs the host's certificate (--cert or PIP_CERT) instead, and install with hashes.",
    bad=EXAMPLE_BASE + "RUN pip install --trusted-host pypi.example.com \\\n"
    "    --index-url http://pypi.example.com/simple mylib==1.2.0\n",
    good=EXAMPLE_BASE + "COPY corp-ca.pem /etc/ssl/certs/corp-ca.pem\n"
    "RUN pip install --cert /etc/ssl/certs/corp-ca.pem \\\n"
    "    --index-url https://pypi.example.com/simple mylib==1.2.0\n",
    autofix=_COMMENT + "the CA to trust instead is not in the Dockerfile.",
    references=(("pip: HTTPS certificates", "https://pip.pypa.io/en/stable/topics/https-certificates/"),),
)

RULES: tuple[Rule, ...] = (PIP_UNPINNED, PIP_NO_HASHES, PIP_REQUIREMENTS_FILE, PIP_EXTRA_INDEX, PIP_TRUSTED_HOST)

_PIP_INDEX_ENV = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS")
#: What installing nvidia-pyindex adds to pip's configuration (its setup writes extra-index-url).
NVIDIA_PYINDEX = "https://pypi.ngc.nvidia.com (added by nvidia-pyindex)"
_CONFIG_INDEX_KEYS = ("index-url", "extra-index-url", "find-links")
#: Sources read besides the index itself: with two sources, even a pinned version may come from either.
_EXTRA_ENV = ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS")


#: The variables that change what pip installs from (read from the RUN's ARG/ENV scope and the command's own).
_PIP_ENV = ("PIP_REQUIRE_HASHES", "PIP_TRUSTED_HOST", *_PIP_INDEX_ENV)


def _pip_env(ins: Instruction, cmd: Command) -> dict[str, str]:
    """The PIP_* settings a call sees: the RUN's ARG/ENV scope, overridden by the command's own NAME=VALUE."""
    out = {k: v.value for k in _PIP_ENV if (v := ins.scope.get(k)) is not None and v.value is not None}
    out.update((k, cmd.assigns[k]) for k in _PIP_ENV if k in cmd.assigns)
    return out


class _Pip(RunRule):
    """One finding per rule and RUN, listing every package of every pip call in it. Package sources written
    into pip's configuration (nvidia-pyindex, `pip config set`) count for every later call in the stage and in
    the stages built on it."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.configured: dict[int, tuple[list[str], list[str], list[str]]] = {}
        self.indexes: list[str] = []
        self.extra: list[str] = []
        self.trusted: list[str] = []
        #: What the RUN's pip calls found; made at its first pip call (most RUNs have none).
        self.acc: _PipFindings | None = None

    def stage(self, st: Stage) -> None:
        up = self.configured.get(st.parent, ([], [], [])) if st.parent is not None else ([], [], [])
        self.indexes, self.extra, self.trusted = list(up[0]), list(up[1]), list(up[2])

    def run(self, ins: Instruction, run: RunScript) -> None:
        self.acc = None

    def wants(self, name: str, assigns: bool) -> bool:
        return name.startswith(PIP_NAMES)

    def command(self, cmd: Command) -> None:
        if not cmd.argv or not cmd.name.startswith(PIP_NAMES):  # neither pip_call nor pip_config
            return
        indexes, extra = self.indexes, self.extra
        call = pip_call(cmd)
        if call is not None:
            env = _pip_env(self.ins, cmd)
            if self.acc is None:
                self.acc = _PipFindings()
            self.acc.add(call, env, indexes, extra, self.trusted)
            if "nvidia-pyindex" in {req_name(x) for x in call.specs} and NVIDIA_PYINDEX not in indexes:
                indexes.append(NVIDIA_PYINDEX)
                extra.append(NVIDIA_PYINDEX)
        setting = pip_config(cmd)
        if setting is not None and setting[0] in _CONFIG_INDEX_KEYS:
            indexes.append(setting[1])
            if setting[0] != "index-url":
                extra.append(setting[1])
        elif setting is not None and setting[0] == "trusted-host":
            self.trusted.append(setting[1])

    def run_end(self) -> None:
        if self.acc is not None:
            self.acc.report(self.ctx, self.ins, self.st)

    def stage_end(self) -> None:
        self.configured[self.st.index] = (self.indexes, self.extra, self.trusted)


@dataclass(slots=True)
class _PipFindings(Value):
    """What the pip calls of one RUN found, reported as one finding per rule (see report())."""

    verbs: list[str] = field(default_factory=list)
    unpinned: list[str] = field(default_factory=list)
    unhashed: list[str] = field(default_factory=list)
    files: list[tuple[str, str]] = field(default_factory=list)
    indexed: list[str] = field(default_factory=list)
    indexes: list[str] = field(default_factory=list)
    trusted: list[str] = field(default_factory=list)
    #: What each list holds, for membership in O(1): a RUN of many pip calls stays linear.
    _seen: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set), init=False, repr=False, compare=False)

    def _extend(self, name: str, items: Iterable[str]) -> None:
        """self.<name> += the items it does not hold yet (as it was before this call: repeats among `items`
        are all added, as `lst += [x for x in items if x not in lst]` adds them)."""
        seen = self._seen[name]
        new = [x for x in items if x not in seen]
        getattr(self, name).extend(new)
        seen.update(new)

    def add(
        self,
        call: PipCall,
        env: dict[str, str],
        configured: Sequence[str] = (),
        configured_extra: Sequence[str] = (),
        configured_trust: Sequence[str] = (),
    ) -> None:
        """One call's packages, files, sources and trusted hosts; `configured*` come from pip's configuration."""
        verb = f"pip {call.subcommand}"
        if verb not in self.verbs:
            self.verbs.append(verb)
        require_hashes = call.require_hashes or env.get("PIP_REQUIRE_HASHES", "").lower() in ("1", "true", "yes", "on")
        specs = call.specs + [e for e in call.editables if not is_local(e)]
        states = {s: spec_state(s) for s in specs}
        # (an empty list adds nothing: most calls have no constraints, indexes or trusted hosts)
        if not call.constraints:
            unpinned = [s for s, state in states.items() if state == "unpinned"]
            if unpinned:
                self._extend("unpinned", unpinned)
        if not require_hashes:
            unhashed = [s for s, state in states.items() if state in ("pinned", "unpinned") and "#sha256=" not in s]
            if unhashed:
                self._extend("unhashed", unhashed)
            self.files += [("requirements", f) for f in call.requirements]
            self.files += [("constraints", f) for f in call.constraints]
        indexes = call.indexes + [env[k] for k in _PIP_INDEX_ENV if env.get(k)] + list(configured)
        if indexes:
            extra = call.extra + [env[k] for k in _EXTRA_ENV if env.get(k)] + list(configured_extra)
            exposed = [
                s
                for s, state in states.items()
                if state == "unpinned" or (extra and state == "pinned" and not require_hashes and "#sha256=" not in s)
            ]
            if exposed:
                self._extend("indexed", exposed)
                self._extend("indexes", indexes)
        trusted = call.trusted + env.get("PIP_TRUSTED_HOST", "").split() + list(configured_trust)
        if trusted:
            self._extend("trusted", trusted)

    def report(self, ctx: Context, ins: Instruction, stage: Stage) -> None:
        """The RUN's findings, and the audit of each requirements file it installs from the build context."""
        verb = "/".join(self.verbs)
        if self.unpinned:
            ctx.add(
                PIP_UNPINNED,
                ins.line,
                f"{verb} without == pins: {', '.join(self.unpinned)}",
                "pin exact versions (NAME==X.Y.Z), ideally in a hashed requirements lock",
            )
        if self.unhashed:
            ctx.add(
                PIP_NO_HASHES,
                ins.line,
                f"{verb} of {', '.join(self.unhashed)} without hash checking",
                "install from a requirements file with --hash entries and --require-hashes",
            )
        for kind, name in dict.fromkeys(self.files):
            if ctx.build is None:
                ctx.add(
                    PIP_REQUIREMENTS_FILE,
                    ins.line,
                    f"cannot check {kind} file {name} (the build context is not read: {param('no_context')})",
                    f"pin every line of {name} with == and --hash, and install with --require-hashes",
                )
                continue
            if "$" in name:
                ctx.add(
                    PIP_REQUIREMENTS_FILE,
                    ins.line,
                    f"cannot check {kind} file {name}: its name is a variable the audit cannot follow",
                    "pin every line of it with == and --hash, and install with --require-hashes",
                )
                continue
            found = ctx.build.locate(ctx.df.chain(stage), ins, name)
            if found is not None and ctx.build.done(found):
                continue  # already audited through another RUN or an include
            if found is None:
                ctx.add(
                    PIP_REQUIREMENTS_FILE,
                    ins.line,
                    f"cannot check {kind} file {name}: no COPY or ADD brings it in from the build context "
                    f"{ctx.build.root}",
                    f"pin every line of {name} with == and --hash, and install with "
                    f"--require-hashes (or audit with {param('context')} DIR)",
                )
                continue
            audit_requirements(found, kind, ctx.add_at, ctx.build, _shown_path(found))
        if self.indexed:
            ctx.add(
                PIP_EXTRA_INDEX,
                ins.line,
                f"{verb} from {', '.join(self.indexes)} without hash checking of {', '.join(self.indexed)}: "
                "any of the sources may serve them",
                "pin exact versions with --hash and --require-hashes, or install from one index only",
            )
        if self.trusted:
            ctx.add(
                PIP_TRUSTED_HOST,
                ins.line,
                f"{verb} trusts {', '.join(self.trusted)} without TLS verification",
                "drop --trusted-host and give pip the host's CA with --cert (or PIP_CERT)",
            )


def _shown_path(path: Path) -> str:
    """A context file as findings name it: relative to the working directory when below it."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


#: add_at(rule, file, line, message, fix): where a requirements file's findings go.
Report = Callable[[Rule, str, int, str, str], None]


def audit_requirements(
    path: Path, kind: str, report: Report, ctx: BuildContext, shown: str, require_hashes: bool = False, depth: int = 0
) -> None:
    """Audit one requirements (or constraints) file; `shown` is how findings name it."""
    key = path.resolve()
    if key in ctx.seen or depth > MAX_INCLUDES:
        return
    ctx.seen.add(key)
    try:
        raw = read_regular(path, MAX_BYTES, truncate=True)
        text = raw.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        report(
            PIP_REQUIREMENTS_FILE,
            shown,
            1,
            f"cannot read {kind} file {shown}: {exc}",
            "make it a readable UTF-8 text file",
        )
        return
    from envpin.environment.requirements import logical_lines  # only for a requirements file in the context

    lines = logical_lines(text)
    hashed_somewhere = any("--hash" in line for _, line in lines)
    unhashed: list[tuple[int, str]] = []
    extra: list[tuple[int, str]] = []
    specs: list[tuple[int, str, str]] = []
    for no, line in lines:
        words = line.split()
        head = words[0]
        if head in ("-r", "--requirement", "-c", "--constraint") or head.startswith(
            ("-r", "-c", "--requirement=", "--constraint=")
        ):
            name = _option_value(words)
            if name:
                kind_of = "constraints" if head.startswith(("-c", "--constraint")) else "requirements"
                _include(path, name, kind_of, report, ctx, (shown, no), require_hashes, depth)
            continue
        if head in ("-i", "--index-url", "--extra-index-url", "-f", "--find-links") or head.startswith(
            ("--index-url=", "--extra-index-url=", "--find-links=", "-f", "-i")
        ):
            if not head.startswith(("-i", "--index-url")):
                extra.append((no, _option_value(words) or "?"))
            continue
        if head == "--trusted-host" or head.startswith("--trusted-host="):
            report(
                PIP_TRUSTED_HOST,
                shown,
                no,
                f"{shown} trusts {_option_value(words) or '?'} without TLS verification",
                "drop --trusted-host and give pip the host's CA with --cert (or PIP_CERT)",
            )
            continue
        spec = _package(line, words)
        if spec is None:
            continue  # --no-binary, --pre, --require-hashes ...: options, not packages
        state = spec_state(spec)
        if state == "local":
            continue
        specs.append((no, spec, state))
        if kind == "requirements" and not ("--hash" in line or require_hashes) and state in ("pinned", "unpinned"):
            unhashed.append((no, req_name(spec) or spec))
    if kind == "requirements":
        _report_unpinned(specs, report, shown)
    _report_unhashed(unhashed, len(specs), hashed_somewhere, report, shown)
    exposed = [
        s
        for _, s, state in specs
        if state == "unpinned" or (state == "pinned" and not (hashed_somewhere or require_hashes))
    ]
    for no, source in extra:
        if exposed:
            report(
                PIP_EXTRA_INDEX,
                shown,
                no,
                f"{shown} adds the package source {source}; "
                f"{', '.join(exposed[:5])}{' …' if len(exposed) > 5 else ''} may come from it or from the index",
                "pin exact versions with --hash, or install from one index only",
            )


def _include(
    path: Path,
    name: str,
    kind: str,
    report: Report,
    ctx: BuildContext,
    where: tuple[str, int],
    require_hashes: bool,
    depth: int,
) -> None:
    """A `-r`/`-c` line (at `where`: the including file as findings name it, and the line) of the file at `path`:
    the file it names audited in turn, when the build context holds it."""
    shown, no = where
    included = path.parent / name
    if included.is_file() and ctx.inside(included):
        audit_requirements(
            included, kind, report, ctx, posixpath.join(posixpath.dirname(shown), name), require_hashes, depth + 1
        )
    else:
        report(
            PIP_REQUIREMENTS_FILE,
            shown,
            no,
            f"{shown} includes {name}, which is not in the build context",
            f"add {name} to the context, pinned with == and --hash",
        )


def _package(line: str, words: list[str]) -> str | None:
    """The requirement a line names (an editable's target), or None for a line of options."""
    head = words[0]
    if head in ("-e", "--editable"):
        return words[1] if len(words) > 1 else ""
    if head.startswith("-"):
        return None
    return line.split(" --hash")[0].strip()


def _report_unpinned(specs: list[tuple[int, str, str]], report: Report, shown: str) -> None:
    """Each requirement (line, spec, state) not pinned: to a version with ==, a URL to a commit."""
    for no, spec, state in specs:
        if state != "unpinned":
            continue
        if "://" in spec or spec.startswith(("git+", "hg+", "svn+", "bzr+")):
            report(
                PIP_UNPINNED,
                shown,
                no,
                f"{spec} in {shown} is not pinned to a commit",
                "name the commit: git+https://host/repo@<40-hex sha>",
            )
        else:
            report(
                PIP_UNPINNED,
                shown,
                no,
                f"{spec} in {shown} is not pinned with ==",
                "pin it: NAME==X.Y.Z (with --hash lines)",
            )


def _report_unhashed(
    unhashed: list[tuple[int, str]], count: int, hashed_somewhere: bool, report: Report, shown: str
) -> None:
    """Requirements (line, name) without --hash: one finding where no line of the file has one (of `count`
    requirements), else one per line, as pip then refuses each."""
    if unhashed and not hashed_somewhere:
        no, name = unhashed[0]
        report(
            PIP_NO_HASHES,
            shown,
            no,
            f"{len(unhashed)} of {count} requirements in {shown} have no --hash (first: {name})",
            "generate hashes (pip-compile --generate-hashes, or envpin lock) and install with --require-hashes",
        )
    elif unhashed:
        for no, name in unhashed:
            report(
                PIP_NO_HASHES,
                shown,
                no,
                f"{name} in {shown} has no --hash, while other lines have one (pip will refuse it)",
                "add its --hash lines",
            )


def _option_value(words: list[str]) -> str | None:
    head = words[0]
    if "=" in head and head.startswith("--"):
        return head.split("=", 1)[1]
    if head in (
        "-r",
        "-c",
        "-i",
        "-f",
        "-e",
        "--requirement",
        "--constraint",
        "--index-url",
        "--extra-index-url",
        "--find-links",
        "--trusted-host",
        "--editable",
    ):
        return words[1] if len(words) > 1 else None
    if head.startswith(("-r", "-c", "-i", "-f")) and len(head) > 2:
        return head[2:]
    return None


CHECKS: tuple[Check, ...] = ()
RUN_RULES: tuple[type[RunRule], ...] = (_Pip,)
