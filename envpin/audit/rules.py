"""The audit rules: each hazard with its id, severity, the line it is on, and the fix.

Rules read the parsed Dockerfile (instructions, stages, scopes) and the shell view of each RUN; none
of them looks at raw text. Determinism rules judge the image the build produces (the last stage, or
--target) including the ENV it inherits from stages it builds on; supply-chain rules (pins, hashes,
downloads) apply to every stage, because a builder stage's output ends up in the image too.
"""

from __future__ import annotations

import functools
import posixpath
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from envpin.audit.base import BaseInfo, identify
from envpin.audit.context import BuildContext, audit_requirements
from envpin.audit.parser import Dockerfile, Instruction, Stage, Var, expand, split_words
from envpin.audit.shell import Command, RunScript, run_script
from envpin.knowledge import recipes
from envpin.portable import imageref

SEVERITIES = ("error", "warning", "info")
#: The switches a recipe may require; the other recipe variables have rules of their own.
SWITCHES = ("TF_DETERMINISTIC_OPS", "TF_CUDNN_DETERMINISTIC")
D9M_VARS = (*SWITCHES, "TF_CUDNN_USE_FRONTEND")
COMMON_VARS = ("PYTHONHASHSEED", "HOROVOD_FUSION_THRESHOLD")
TRUE = frozenset({"1", "true"})
_HEX = re.compile(r"^[0-9a-f]{7,40}$")
_SEED = re.compile(r"0*([0-9]{1,10})\Z")
_PIP = re.compile(r"^pip(\d(\.\d+)?)?$")
_PYTHON = re.compile(r"^python(\d(\.\d+)?)?$")
_REQ = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")
SNAPSHOT_HOSTS = ("snapshot.debian.org", "snapshot.ubuntu.com")
_SNAPSHOT_HOST = re.compile("|".join(map(re.escape, SNAPSHOT_HOSTS)))


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    title: str
    help: str


RULES: dict[str, Rule] = {
    r.id: r
    for r in (
        Rule("from-latest", "error", "FROM uses :latest, another floating tag, or no tag",
             "A base named by :latest (or by no tag, which means :latest) or by another tag that follows a moving "
             "line (latest-gpu, nightly, devel-gpu, ...) is whatever was pushed last: the same Dockerfile builds "
             "a different image next month. Name the exact release tag and pin its digest: "
             "FROM image:TAG@sha256:..."),
        Rule("from-no-digest", "warning", "FROM pins a tag but not a digest",
             "Tags are mutable: NVIDIA and Docker Hub re-push tags with security fixes. Append the digest "
             "the tag points to now (`envpin audit --fix` resolves it through the registry)."),
        Rule("from-unresolved", "warning", "FROM depends on a build argument without a value",
             "The base image is chosen by whoever runs the build, so the audit cannot check it and the "
             "image cannot be reproduced from the Dockerfile alone. Give the ARG a default (pinned by "
             "digest), or pass --build-arg to the audit."),
        Rule("d9m-env-missing", "error", "determinism environment missing for the base's TensorFlow",
             "The TensorFlow version the base image implies (NGC tag -> envpin catalog -> recipe) needs "
             "these variables set before TensorFlow starts, or GPU ops such as cuDNN convolutions pick "
             "nondeterministic algorithms. Add the recipe's ENV block (`envpin audit --fix` inserts it)."),
        Rule("d9m-env-wrong", "error", "determinism environment wrong for the base's TensorFlow",
             "A determinism variable is set to a value TensorFlow reads as false, or the image relies on "
             "a switch that this TensorFlow version does not read or that covers only cuDNN "
             "(TF_CUDNN_DETERMINISTIC where TF_DETERMINISTIC_OPS is needed). Use the recipe's ENV block."),
        Rule("d9m-unknown-tf", "info", "TensorFlow version of the base not known",
             "The determinism recipe depends on the TensorFlow version; when the base is not an NGC or "
             "tensorflow/tensorflow tag the catalog knows, the audit says so instead of guessing. Pass "
             "--tf MAJOR.MINOR after checking the image, or run `envpin catalog sync`."),
        Rule("d9m-unavailable", "info", "no GPU determinism switch for this TensorFlow",
             "TensorFlow before 1.14 (and NGC images before 19.06) has no switch that makes GPU ops "
             "deterministic; only a newer base can fix that."),
        Rule("cudnn-autotune-set", "error", "TF_CUDNN_USE_AUTOTUNE is set",
             "TensorFlow reads TF_CUDNN_USE_AUTOTUNE (tensorflow/core/util/use_cudnn.cc). Do not set it at "
             "all, in particular not to 0, together with TF_DETERMINISTIC_OPS or TF_CUDNN_DETERMINISTIC: "
             "turning autotuning off thwarts the deterministic cuDNN algorithm selection. Remove it."),
        Rule("env-no-effect", "warning", "a variable TensorFlow never reads",
             "TF_USE_CUDNN_AUTOTUNE is a misspelling (it appears in NVIDIA's determinism status notes); "
             "TensorFlow reads TF_CUDNN_USE_AUTOTUNE. Whoever set it believes autotuning is configured "
             "when it is not. Remove it, and do not set the real name either under determinism."),
        Rule("xla-auto-jit", "warning", "XLA auto-clustering enabled in an image that sets determinism",
             "TF_XLA_FLAGS=--tf_xla_auto_jit=1/2/fusible compiles clusters with XLA. Under determinism "
             "XLA's GPU reductions are deterministic from TensorFlow 2.2 but its Scatter only from 2.8, and "
             "auto-clustering decides per run what is fused, which changes numerics. Drop the flag, or "
             "enable XLA per function with jit_compile=True."),
        Rule("pip-unpinned", "warning", "pip installs packages without == pins",
             "An unpinned requirement resolves to whatever is newest on the day of the build. Pin exact "
             "versions, ideally in a requirements lock with hashes (`envpin render --requirements`)."),
        Rule("pip-no-hashes", "warning", "pip installs without hash checking",
             "Without --require-hashes (hashes come from a requirements file) pip accepts any file the "
             "index serves for that version, including wheels uploaded later. Install from a requirements "
             "file with --hash entries and --require-hashes."),
        Rule("pip-requirements-file", "info", "requirements file not checked",
             "The audit reads requirement and constraint files that a COPY or ADD brings in from the build "
             "context (--context DIR, default the Dockerfile's folder) line by line. This one could not be read: "
             "it comes from another stage, a download or the base image, its name is a variable, or the "
             "context is not read (--no-context). Make sure it pins every package with == and --hash, or install "
             "it with --require-hashes so pip enforces that."),
        Rule("pip-extra-index", "warning", "extra or alternative package source without hash checking",
             "With --extra-index-url, --index-url, --find-links (-f), the PIP_* variables, `pip config set` or "
             "nvidia-pyindex (which writes extra-index-url into pip's configuration), pip takes the highest "
             "version any source offers, and for a pinned version whichever file a source serves: a name can "
             "be served by a different source tomorrow (dependency confusion). Pin exact versions with hashes "
             "(--require-hashes), or install from one index only."),
        Rule("pip-trusted-host", "warning", "pip trusts a host without TLS verification",
             "--trusted-host (or PIP_TRUSTED_HOST, or `pip config set global.trusted-host`) turns off certificate "
             "checks for that host, so anyone on the network path can serve the packages. Give pip the CA that "
             "signs the host's certificate (--cert or PIP_CERT) instead, and install with hashes."),
        Rule("apt-unpinned", "warning", "apt installs packages without versions or a snapshot",
             "apt-get install NAME installs the archive's current version. Pin versions (NAME=VERSION) or "
             "point apt at a dated snapshot (snapshot.ubuntu.com, snapshot.debian.org)."),
        Rule("add-url", "warning", "ADD downloads a URL without a checksum",
             "The file behind a URL can change. Use ADD --checksum=sha256:... (BuildKit), or download in "
             "RUN and verify with sha256sum -c."),
        Rule("curl-pipe-shell", "warning", "downloaded script piped to a shell",
             "curl | sh runs whatever the server sends on the day of the build, unverified. Download a "
             "pinned version, check its sha256, then run it."),
        Rule("git-clone-unpinned", "warning", "git clone without a pinned commit",
             "A clone of a branch or tag gets whatever the branch points to at build time. Check out a "
             "commit: git clone URL dir && git -C dir checkout SHA (or git clone --revision=SHA)."),
        Rule("git-clone-tag", "info", "git clone pinned to a release tag, not a commit",
             "A tag is better than a branch, but it can be deleted and pushed again pointing elsewhere (and "
             "some projects move tags such as v2 or latest). Check out the commit the tag names now."),
        Rule("horovod-fusion-threshold", "warning", "Horovod installed but HOROVOD_FUSION_THRESHOLD is not 0",
             "Horovod's Tensor Fusion batches allreduces in an order that can vary from run to run; NVIDIA's "
             "determinism notes say you may need to disable it. Set HOROVOD_FUSION_THRESHOLD=0."),
        Rule("nvidia-disable-require", "warning", "NVIDIA_DISABLE_REQUIRE is set",
             "It turns off the container runtime's check that the host driver supports the image's CUDA, "
             "so the image starts on drivers it was not built for (forward compatibility included) and "
             "can fail or compute differently. Remove it and meet the driver requirement."),
        Rule("pythonhashseed-unset", "warning", "PYTHONHASHSEED is not fixed",
             "Without a fixed PYTHONHASHSEED, str and bytes hashes (set and dict-of-set iteration order) "
             "differ between processes. Set it to an integer with ENV, before Python starts."),
        Rule("parse-error", "error", "a line the builder rejects",
             "Docker stops the build at this line. The audit checked the rest of the file as if the line were "
             "not there. Fix the line; a common cause is a RUN whose previous line lost its trailing "
             "backslash, so the next command reads as an instruction."),
        Rule("suppression-unknown", "warning", "an inline suppression names no rule",
             "A `# envpin: ignore=...` comment names a rule that does not exist (or parse-error, which cannot be "
             "suppressed), so it silences nothing: usually a typo. Use the rule id the finding shows."),
        Rule("shell-unparsed", "info", "RUN command could not be split into words",
             "The audit could not split the command (an unterminated quote, usually), so it was not "
             "checked."),
    )
}


@dataclass(frozen=True)
class Finding:
    rule: str
    severity: str
    file: str
    line: int
    message: str
    fix: str

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.line,
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "fix": self.fix,
        }


@dataclass
class Context:
    df: Dockerfile
    target: Stage
    base: BaseInfo
    findings: list[Finding] = field(default_factory=list)
    #: The build context directory, when the audit reads it (requirement files COPY'd from it).
    build: BuildContext | None = None

    def add(self, rule: str, line: int, message: str, fix: str, severity: str | None = None) -> None:
        self.findings.append(
            Finding(rule, severity or RULES[rule].severity, self.df.path, line, message, fix)
        )

    def add_at(self, rule: str, file: str, line: int, message: str, fix: str) -> None:
        """A finding in another file of the build context (a requirements file's own line)."""
        self.findings.append(Finding(rule, RULES[rule].severity, file, line, message, fix))

    def chain(self) -> list[Stage]:
        return self.df.chain(self.target)

    def env(self) -> dict[str, Var]:
        return self.target.env

    def env_settings(self, name: str) -> Iterator[tuple[Instruction, str | None]]:
        """Every ENV in the produced image's stages that sets `name`: (instruction, value)."""
        for st in self.chain():
            for ins in st.instructions:
                if ins.keyword == "ENV":
                    for p in ins.pairs:
                        if p.key == name:
                            yield ins, p.value

    def run(self, ins: Instruction) -> RunScript:
        return run_script(ins, self.df.stages[ins.stage or 0].posix_shell)


def audit(df: Dockerfile, *, target: str | None = None, tf: str | None = None,
          context: Path | None = None) -> list[Finding]:
    """All findings for one parsed Dockerfile, sorted by line and rule (lines it could not parse included)."""
    problems = [Finding("parse-error", RULES["parse-error"].severity, df.path, p.line, p.message,
                        p.hint or "fix or remove the line") for p in df.problems]
    if not df.stages:
        return merge(problems)  # no FROM survived: nothing else to judge
    stage = df.stage(target)
    ctx = Context(df, stage, identify(df, stage, tf), findings=problems,
                  build=BuildContext(context) if context is not None else None)
    for check in CHECKS:
        check(ctx)
    return merge(ctx.findings)


class _Parts:
    """A message (or fix) that findings are merged into: its parts joined by '; ', each part once. Which parts it
    has is kept as a set (the parts of "a; b" are a and b), so merging n findings takes time linear in n."""

    __slots__ = ("parts", "seen")

    def __init__(self, text: str) -> None:
        self.parts = [text]
        self.seen = set(text.split("; "))

    def add(self, text: str) -> None:
        if text not in self.seen:
            self.parts.append(text)
            self.seen.update(text.split("; "))

    def text(self) -> str:
        return "; ".join(self.parts)


def merge(findings: list[Finding]) -> list[Finding]:
    """One finding per rule and instruction: two unpinned pip calls in one RUN are one hazard to fix there."""
    merged: dict[tuple[str, int, str], Finding] = {}
    joined: dict[tuple[str, int, str], tuple[_Parts, _Parts]] = {}
    for f in findings:
        key = (f.file, f.line, f.rule)
        m = merged.get(key)
        if m is None:
            merged[key] = f
            continue
        if key not in joined:
            joined[key] = (_Parts(m.message), _Parts(m.fix))
        message, fix = joined[key]
        message.add(f.message)
        fix.add(f.fix)
        if SEVERITIES.index(f.severity) < SEVERITIES.index(m.severity):
            merged[key] = replace(m, severity=f.severity)
    for key, (message, fix) in joined.items():
        merged[key] = replace(merged[key], message=message.text(), fix=fix.text())
    return sorted(merged.values(), key=lambda f: (f.file, f.line, f.rule))


# -- FROM --------------------------------------------------------------------------------------------
#: Words that make a tag follow a moving line rather than name a release (latest-gpu, nightly, devel-gpu-py3).
FLOATING_WORDS = frozenset({"latest", "nightly", "devel", "edge", "stable", "rolling", "main", "master", "dev"})


def floating_tag(tag: str) -> bool:
    """A tag that names a moving line: its first or last '-'-separated word is latest, nightly, devel..."""
    words = tag.lower().split("-")
    return words[0] in FLOATING_WORDS or words[-1] in FLOATING_WORDS


def check_from(ctx: Context) -> None:
    names = {s.name for s in ctx.df.stages if s.name}
    for st in ctx.df.stages:
        if st.parent is not None or st.image.lower() == "scratch":
            continue
        line = st.from_.line
        if st.unresolved:
            args = ", ".join(st.unresolved)
            ctx.add("from-unresolved", line,
                    f"FROM {st.image_raw}: build argument {args} has no value, so the base is chosen at build time",
                    f"give ARG {st.unresolved[0]} a default pinned by digest, or audit with --build-arg")
            continue
        if st.image.lower() in names:
            continue
        name, tag, digest = imageref.split(st.image)
        if digest:
            continue
        if tag is None or floating_tag(tag):
            what = "no tag (that is :latest)" if tag is None else f"the floating tag :{tag}"
            ctx.add("from-latest", line, f"FROM {st.image} uses {what}: the base changes whenever it is re-pushed",
                    f"name an exact tag and pin its digest: FROM {name}:TAG@sha256:…")
        else:
            ctx.add("from-no-digest", line, f"FROM {st.image} is not pinned by digest; the tag can be re-pushed",
                    f"pin the digest the tag points to now: FROM {st.image}@sha256:… (envpin audit --fix)")


# -- determinism environment -------------------------------------------------------------------------
def truthy(var: Var | None) -> bool:
    return var is not None and var.value is not None and var.value.strip().lower() in TRUE


def check_determinism(ctx: Context) -> None:
    base, env, line = ctx.base, ctx.env(), ctx.target.from_.line
    if base.recipe is None:
        ctx.add("d9m-unknown-tf", line, base.reason or f"the TensorFlow version of {base.label} is not known",
                "check the image's TensorFlow and audit with --tf MAJOR.MINOR (or run `envpin catalog sync`)")
        return
    recipe = base.recipe
    required = {k: v for k, v in recipe.env_dict().items() if k not in COMMON_VARS}
    what = f"{base.label} (TensorFlow {base.tf_version}, recipe {recipe.id})"
    if not any(k in SWITCHES for k in required):
        ctx.add("d9m-unavailable", line, f"{what} has no GPU determinism switch", "use a newer base image")
        return
    missing: list[str] = []
    for name, want in required.items():
        var = env.get(name)
        if var is None:
            missing.append(name)
        elif not var.unresolved and var.value is not None and var.value.strip().lower() not in TRUE:
            ctx.add("d9m-env-wrong", var.line,
                    f"{name}={var.value} is not a value TensorFlow reads as true; {what} needs {name}={want}",
                    f"set {name}={want}")
    for alt, needed in (("TF_CUDNN_DETERMINISTIC", "TF_DETERMINISTIC_OPS"),
                        ("TF_DETERMINISTIC_OPS", "TF_CUDNN_DETERMINISTIC")):
        var = env.get(alt)
        if needed in missing and alt not in required and var is not None and (truthy(var) or var.unresolved):
            reason = ("only makes cuDNN convolution and pooling deterministic"
                      if alt == "TF_CUDNN_DETERMINISTIC" else f"is not read by TensorFlow {base.tf_version}")
            ctx.add("d9m-env-wrong", var.line,
                    f"{alt} {reason}; {what} needs {needed}={required[needed]}",
                    f"set {needed}={required[needed]} (envpin audit --fix adds the recipe's ENV block)")
            missing.remove(needed)
    if missing:
        severity = "error" if any(m in SWITCHES for m in missing) else "warning"
        settings = " ".join(f"{m}={required[m]}" for m in missing)
        ctx.add("d9m-env-missing", line, f"{what} needs {settings}, which the image does not set",
                f"add ENV {settings} after FROM (envpin audit --fix adds the recipe's ENV block)", severity)


def check_autotune(ctx: Context) -> None:
    """The recipe table's must-not-set and no-effect names, wherever an ENV of the image sets them."""
    common = recipes.table()["common"]
    for item in common["unset"]:
        for ins, value in ctx.env_settings(item["name"]):
            ctx.add("cudnn-autotune-set", ins.line,
                    f"{item['name']}={value} is set; {item['why']}",
                    f"remove {item['name']} from ENV (envpin audit --fix removes it)")
    for item in common["no_effect"]:
        for ins, value in ctx.env_settings(item["name"]):
            ctx.add("env-no-effect", ins.line,
                    f"{item['name']}={value} has no effect: TensorFlow reads {item['instead']}",
                    f"remove {item['name']} from ENV (envpin audit --fix removes it); "
                    f"do not set {item['instead']} either")


def xla_auto_jit(flags: str) -> str | None:
    """The flag that turns auto-clustering on, if any (--tf_xla_auto_jit=1|2|fusible, CPU global jit)."""
    words = flags.split()
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if not eq and i + 1 < len(words) and not words[i + 1].startswith("-"):
            value = words[i + 1]
        if name == "--tf_xla_auto_jit" and value.strip("'\"") not in ("", "-1", "0"):
            return f"--tf_xla_auto_jit={value}"
        if name == "--tf_xla_cpu_global_jit" and value.lower() not in ("false", "0"):
            return word
    return None


def check_xla(ctx: Context) -> None:
    env = ctx.env()
    if not any(truthy(env.get(s)) for s in SWITCHES):
        return
    var = env.get("TF_XLA_FLAGS")
    flag = xla_auto_jit(var.value or "") if var is not None else None
    if var is not None and flag:
        ctx.add("xla-auto-jit", var.line,
                f"TF_XLA_FLAGS turns on XLA auto-clustering ({flag}) in an image that sets determinism",
                "drop --tf_xla_auto_jit from TF_XLA_FLAGS; use jit_compile=True per function if XLA is needed")


def check_nvidia_disable_require(ctx: Context) -> None:
    for ins, value in ctx.env_settings("NVIDIA_DISABLE_REQUIRE"):
        if value is None or value.strip().lower() not in ("", "0", "false", "f"):
            ctx.add("nvidia-disable-require", ins.line,
                    f"NVIDIA_DISABLE_REQUIRE={value} turns off the driver/CUDA compatibility check",
                    "remove NVIDIA_DISABLE_REQUIRE and run on a driver the image supports (envpin doctor)")


def check_hashseed(ctx: Context) -> None:
    var = ctx.env().get("PYTHONHASHSEED")
    if var is None:
        ctx.add("pythonhashseed-unset", ctx.target.from_.line,
                "PYTHONHASHSEED is not set, so str/bytes hashing (set iteration order) differs per process",
                "add ENV PYTHONHASHSEED=0 (envpin audit --fix adds it)")
    elif not var.unresolved and not seed_ok(var.value):
        ctx.add("pythonhashseed-unset", var.line,
                f"PYTHONHASHSEED={var.value} does not fix hashing (it must be an integer 0..4294967295)",
                "set ENV PYTHONHASHSEED=0")


def seed_ok(value: str | None) -> bool:
    """PYTHONHASHSEED as Python accepts it: ASCII decimal 0..4294967295 (leading zeros allowed). Matched
    before int(), so '٢' is refused and 5,000 digits are a finding, not int()'s ValueError."""
    m = _SEED.match(value.strip()) if value is not None else None
    return m is not None and int(m.group(1)) <= 4294967295


# -- RUN commands ------------------------------------------------------------------------------------
class RunRule:
    """A rule that reads the commands of RUN instructions. check_runs() walks the stages once and calls, in
    order: stage(st); for each RUN of the stage run(ins, run), pipeline() and command() for each pipeline and
    command (nested ones included, in Script.visit order), run_end(); stage_end() after the stage's last
    instruction; finish() after the last stage. `st`, `ins` and `run_script` say where the walk is."""

    st: Stage
    ins: Instruction
    run_script: RunScript
    #: Set by run() for a RUN whose every command command() must see, whatever wants() says of its name.
    every_command: bool = False

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def wants(self, name: str, assigns: bool) -> bool:
        """Whether command() can act on a command of this name (`assigns`: it sets NAME=VALUE before the program).
        check_runs asks once per name and hands command() only the commands it wants: a RUN has tens of
        thousands of commands in a long Dockerfile, and most rules read only a few programs."""
        return True

    def stage(self, st: Stage) -> None:
        """A stage starts."""

    def run(self, ins: Instruction, run: RunScript) -> None:
        """A RUN, before its commands."""

    def pipeline(self, pipe: list[Command]) -> None:
        """One pipeline of the RUN (Script.all_pipelines order)."""

    def command(self, cmd: Command) -> None:
        """One command of the RUN (Script.commands order)."""

    def run_end(self) -> None:
        """After the RUN's last command."""

    def stage_end(self) -> None:
        """After the stage's last instruction."""

    def finish(self) -> None:
        """After the last stage."""


class _Horovod(RunRule):
    """horovod-fusion-threshold: where Horovod comes in (the first line: an ENV/ARG HOROVOD_*, a HOROVOD_*
    build variable of a command, pip install horovod), then the produced image's HOROVOD_FUSION_THRESHOLD."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.sites: list[tuple[int, str]] = []

    def stage(self, st: Stage) -> None:
        for ins in st.instructions:
            if ins.keyword in ("ENV", "ARG"):
                for p in ins.pairs:
                    if p.key.startswith("HOROVOD_") and p.key != "HOROVOD_FUSION_THRESHOLD":
                        self.sites.append((ins.line, f"{ins.keyword} {p.key}"))

    def wants(self, name: str, assigns: bool) -> bool:
        return assigns or name.startswith(_PIP_NAMES)

    def command(self, cmd: Command) -> None:
        if not cmd.argv:
            return
        for key in cmd.assigns:
            if key.startswith("HOROVOD_") and key != "HOROVOD_FUSION_THRESHOLD":
                self.sites.append((self.ins.line, f"{key} build variable"))
        # a requirement named horovod has the word in it (any case): only then is the pip call worth reading
        if cmd.name.startswith(_PIP_NAMES) and "horovod" in " ".join(cmd.argv).lower():
            call = pip_call(cmd)
            if call and any(req_name(s) == "horovod" for s in call.specs):
                self.sites.append((self.ins.line, "pip install horovod"))

    def finish(self) -> None:
        if not self.sites:
            return
        ctx = self.ctx
        line, how = min(self.sites)
        var = ctx.env().get("HOROVOD_FUSION_THRESHOLD")
        if var is None:
            ctx.add("horovod-fusion-threshold", line,
                    f"Horovod is installed ({how}) but HOROVOD_FUSION_THRESHOLD is not set, so tensor fusion "
                    "reorders allreduces from run to run",
                    "add ENV HOROVOD_FUSION_THRESHOLD=0 (envpin audit --fix adds it)")
        elif not var.unresolved and (var.value or "").strip() != "0":
            ctx.add("horovod-fusion-threshold", var.line,
                    f"HOROVOD_FUSION_THRESHOLD={var.value} keeps Horovod's tensor fusion on ({how})",
                    "set ENV HOROVOD_FUSION_THRESHOLD=0")


# -- pip ---------------------------------------------------------------------------------------------
_PIP_VALUE = frozenset({
    "-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-i", "--index-url", "--extra-index-url",
    "-f", "--find-links", "-t", "--target", "--prefix", "--root", "--src", "--upgrade-strategy", "--progress-bar",
    "--platform", "--python-version", "--implementation", "--abi", "--only-binary", "--no-binary",
    "--global-option", "--install-option", "-C", "--config-settings", "--trusted-host", "--cache-dir", "--log",
    "--log-file", "--proxy", "--retries", "--timeout", "--exists-action", "--cert", "--client-cert", "--python",
    "--report", "-w", "--wheel-dir", "-d", "--dest", "-b", "--build", "--use-feature", "--use-deprecated",
    "--keyring-provider", "--root-user-action", "--python-executable",
})
_PIP_GLUED = ("-r", "-c", "-e", "-i", "-f", "-t", "-C", "-w", "-d")
_INDEX_OPTS = frozenset({"-i", "--index-url", "--extra-index-url", "-f", "--find-links"})
_PIP_INDEX_ENV = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS")
#: What installing nvidia-pyindex adds to pip's configuration (its setup writes extra-index-url).
NVIDIA_PYINDEX = "https://pypi.ngc.nvidia.com (added by nvidia-pyindex)"
_CONFIG_INDEX_KEYS = ("index-url", "extra-index-url", "find-links")
#: Sources read besides the index itself: with two sources, even a pinned version may come from either.
_EXTRA_ENV = ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS")


@dataclass
class PipCall:
    subcommand: str
    specs: list[str] = field(default_factory=list)
    editables: list[str] = field(default_factory=list)
    requirements: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    indexes: list[str] = field(default_factory=list)
    #: Sources pip reads besides the (default or --index-url) index: --extra-index-url, --find-links.
    extra: list[str] = field(default_factory=list)
    trusted: list[str] = field(default_factory=list)
    require_hashes: bool = False


#: How the name of every command that installs with pip (or configures it) starts.
_PIP_NAMES = ("pip", "python", "uv")


def pip_call(cmd: Command) -> PipCall | None:
    """The install/wheel/download call a command makes, with its options sorted out, or None."""
    argv = cmd.argv
    if not cmd.name.startswith(_PIP_NAMES):
        return None
    if _PIP.match(cmd.name):
        rest = argv[1:]
    elif _PYTHON.match(cmd.name) and len(argv) > 2 and argv[1] == "-m" and _PIP.match(argv[2]):
        rest = argv[3:]
    elif cmd.name == "uv" and argv[1:2] == ["pip"]:
        rest = argv[2:]
    else:
        return None
    opts: list[tuple[str, str | None]] = []
    positional: list[str] = []
    i = 0
    while i < len(rest):
        tok = rest[i]
        if tok == "--":
            positional.extend(rest[i + 1 :])
            break
        if tok.startswith("--") and "=" in tok:
            name, _, value = tok.partition("=")
            opts.append((name, value))
        elif tok in _PIP_VALUE:
            opts.append((tok, rest[i + 1] if i + 1 < len(rest) else ""))
            i += 1
        elif tok.startswith(_PIP_GLUED) and len(tok) > 2 and not tok.startswith("--"):
            opts.append((tok[:2], tok[2:]))
        elif tok.startswith("-") and tok != "-":
            opts.append((tok, None))
        else:
            positional.append(tok)
        i += 1
    if not positional or positional[0] not in ("install", "wheel", "download"):
        return None
    call = PipCall(positional[0])
    words = positional[1:]
    j = 0
    while j < len(words):  # PEP 508 direct references: NAME @ URL
        if j + 2 < len(words) and words[j + 1] == "@":
            call.specs.append(f"{words[j]} @ {words[j + 2]}")
            j += 3
        else:
            call.specs.append(words[j])
            j += 1
    for name, value in opts:
        if name in ("-r", "--requirement") and value:
            call.requirements.append(value)
        elif name in ("-c", "--constraint") and value:
            call.constraints.append(value)
        elif name in ("-e", "--editable") and value:
            call.editables.append(value)
        elif name in _INDEX_OPTS and value:
            call.indexes.append(value)
            if name not in ("-i", "--index-url"):
                call.extra.append(value)
        elif name == "--trusted-host" and value:
            call.trusted.append(value)
        elif name == "--require-hashes":
            call.require_hashes = True
    return call


def _is_local(spec: str) -> bool:
    if "://" in spec or spec.startswith(("git+", "hg+", "svn+", "bzr+")):
        return False
    return (
        spec.startswith((".", "/", "~"))
        or "/" in spec
        or spec.endswith((".whl", ".tar.gz", ".zip", ".tgz", ".tar.bz2"))
    )


_SEPARATORS = re.compile(r"[-_.]+")


@functools.lru_cache(maxsize=4096)  # the same few requirements are named by every RUN of a long Dockerfile
def req_name(spec: str) -> str | None:
    """A requirement's normalised project name ('Flask[async]>=2' -> 'flask'); None for URLs and local paths."""
    m = _REQ.match(spec.strip())
    if not m or "://" in spec or _is_local(spec):
        return None
    return _SEPARATORS.sub("-", m.group(1)).lower()


@functools.lru_cache(maxsize=4096)
def spec_state(spec: str) -> str:
    """'pinned', 'unpinned', 'local' or 'unknown' (a variable the audit cannot see)."""
    url = spec.split(" @ ", 1)[1] if " @ " in spec else spec
    if "://" in url or url.startswith(("git+", "hg+", "svn+", "bzr+")):
        if url.startswith(("git+", "hg+", "svn+", "bzr+")):
            path = url.split("://", 1)[-1].split("#", 1)[0]
            ref = path.rsplit("@", 1)[1] if "@" in path.rsplit("/", 1)[-1] else ""
            return "pinned" if _HEX.match(ref) else "unpinned"
        return "pinned"
    if spec.startswith("$"):
        return "unknown"
    if _is_local(spec):
        return "local"
    m = _REQ.match(spec.strip())
    if not m:
        return "unknown"
    constraint = m.group(3).split(";", 1)[0].strip()
    for clause in constraint.split(","):
        clause = clause.strip()
        if clause.startswith("===") or (clause.startswith("==") and "*" not in clause):
            return "pinned"
    if "$" in spec:
        return "unknown"
    return "unpinned"


#: The variables that change what pip installs from (read from the RUN's ARG/ENV scope and the command's own).
_PIP_ENV = ("PIP_REQUIRE_HASHES", "PIP_TRUSTED_HOST", *_PIP_INDEX_ENV)


def _pip_env(ins: Instruction, cmd: Command) -> dict[str, str]:
    out = {k: v.value for k in _PIP_ENV if (v := ins.scope.get(k)) is not None and v.value is not None}
    out.update((k, cmd.assigns[k]) for k in _PIP_ENV if k in cmd.assigns)
    return out


def pip_config(cmd: Command) -> tuple[str, str] | None:
    """`pip config set [global.]extra-index-url URL` and the like: (key, value) it writes, or None."""
    argv = cmd.argv
    if "config" not in argv:
        return None
    if _PIP.match(cmd.name):
        rest = argv[1:]
    elif _PYTHON.match(cmd.name) and len(argv) > 2 and argv[1] == "-m" and _PIP.match(argv[2]):
        rest = argv[3:]
    else:
        return None
    words = [w for w in rest if not w.startswith("-")]
    if len(words) >= 4 and words[:2] == ["config", "set"]:
        return words[2].rsplit(".", 1)[-1], words[3]
    return None


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
        return name.startswith(_PIP_NAMES)

    def command(self, cmd: Command) -> None:
        if not cmd.argv or not cmd.name.startswith(_PIP_NAMES):  # neither pip_call nor pip_config
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


@dataclass
class _PipFindings:
    verbs: list[str] = field(default_factory=list)
    unpinned: list[str] = field(default_factory=list)
    unhashed: list[str] = field(default_factory=list)
    files: list[tuple[str, str]] = field(default_factory=list)
    indexed: list[str] = field(default_factory=list)
    indexes: list[str] = field(default_factory=list)
    trusted: list[str] = field(default_factory=list)
    #: What each list above holds, for membership in O(1): a RUN of many pip calls stays linear.
    _seen: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))

    def _extend(self, name: str, items: Iterable[str]) -> None:
        """self.<name> += the items it does not hold yet (as it was before this call: repeats among `items`
        are all added, as `lst += [x for x in items if x not in lst]` adds them)."""
        seen = self._seen[name]
        new = [x for x in items if x not in seen]
        getattr(self, name).extend(new)
        seen.update(new)

    def add(self, call: PipCall, env: dict[str, str], configured: Sequence[str] = (),
            configured_extra: Sequence[str] = (), configured_trust: Sequence[str] = ()) -> None:
        verb = f"pip {call.subcommand}"
        if verb not in self.verbs:
            self.verbs.append(verb)
        require_hashes = call.require_hashes or env.get("PIP_REQUIRE_HASHES", "").lower() in ("1", "true", "yes", "on")
        specs = call.specs + [e for e in call.editables if not _is_local(e)]
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
            exposed = [s for s, state in states.items()
                       if state == "unpinned"
                       or (extra and state == "pinned" and not require_hashes and "#sha256=" not in s)]
            if exposed:
                self._extend("indexed", exposed)
                self._extend("indexes", indexes)
        trusted = call.trusted + env.get("PIP_TRUSTED_HOST", "").split() + list(configured_trust)
        if trusted:
            self._extend("trusted", trusted)

    def report(self, ctx: Context, ins: Instruction, stage: Stage) -> None:
        verb = "/".join(self.verbs)
        if self.unpinned:
            ctx.add("pip-unpinned", ins.line, f"{verb} without == pins: {', '.join(self.unpinned)}",
                    "pin exact versions (NAME==X.Y.Z), ideally in a hashed requirements lock")
        if self.unhashed:
            ctx.add("pip-no-hashes", ins.line, f"{verb} of {', '.join(self.unhashed)} without hash checking",
                    "install from a requirements file with --hash entries and --require-hashes")
        for kind, name in dict.fromkeys(self.files):
            if ctx.build is None:
                ctx.add("pip-requirements-file", ins.line,
                        f"cannot check {kind} file {name} (the build context is not read: --no-context)",
                        f"pin every line of {name} with == and --hash, and install with --require-hashes")
                continue
            if "$" in name:
                ctx.add("pip-requirements-file", ins.line,
                        f"cannot check {kind} file {name}: its name is a variable the audit cannot follow",
                        "pin every line of it with == and --hash, and install with --require-hashes")
                continue
            found = ctx.build.locate(ctx.df.chain(stage), ins, name)
            if found is not None and ctx.build.done(found):
                continue  # already audited through another RUN or an include
            if found is None:
                ctx.add("pip-requirements-file", ins.line,
                        f"cannot check {kind} file {name}: no COPY or ADD brings it in from the build context "
                        f"{ctx.build.root}", f"pin every line of {name} with == and --hash, and install with "
                        "--require-hashes (or audit with --context DIR)")
                continue
            audit_requirements(found, kind, ctx.add_at, ctx.build, _shown_path(found))
        if self.indexed:
            ctx.add("pip-extra-index", ins.line,
                    f"{verb} from {', '.join(self.indexes)} without hash checking of {', '.join(self.indexed)}: "
                    "any of the sources may serve them",
                    "pin exact versions with --hash and --require-hashes, or install from one index only")
        if self.trusted:
            ctx.add("pip-trusted-host", ins.line,
                    f"{verb} trusts {', '.join(self.trusted)} without TLS verification",
                    "drop --trusted-host and give pip the host's CA with --cert (or PIP_CERT)")


def _shown_path(path: Path) -> str:
    """A context file as findings name it: relative to the working directory when below it."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return str(path)


# -- apt -----------------------------------------------------------------------------------------------
_APT_NAMES = frozenset({"apt-get", "apt", "aptitude"})
#: A snapshot host with quotes or backslashes anywhere inside it (text that may become a word naming the host).
_QUOTED_SNAPSHOT_HOST = re.compile("|".join("[\"'\\\\]*".join(map(re.escape, h)) for h in SNAPSHOT_HOSTS))
_APT_VALUE = frozenset({"-o", "-c", "-t", "--option", "--config-file", "--target-release", "--default-release"})


class _Apt(RunRule):
    """apt-unpinned. Whether a snapshot source is set up is carried through the stage: a stage starts with its
    parent's state, so a chain of N stages costs N steps, not N² (stages build only on earlier ones)."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.ended: dict[int, bool] = {}
        self.snapshot = False

    def stage(self, st: Stage) -> None:
        self.snapshot = self.ended.get(st.parent, False) if st.parent is not None else False

    def run(self, ins: Instruction, run: RunScript) -> None:
        # a heredoc that writes sources.list comes before the commands that use it
        if len(run.texts) > 1 and not self.snapshot:
            self.snapshot = any(h in t for t in run.texts[1:] for h in SNAPSHOT_HOSTS)
        # Every command is searched for a snapshot host only where one may be: a word of a command is its text
        # with quotes and escapes taken off (heredoc bodies are substituted again before they are split).
        self.every_command = bool(ins.heredocs) or (
            bool(run.texts) and _QUOTED_SNAPSHOT_HOST.search(run.texts[0]) is not None)

    def wants(self, name: str, assigns: bool) -> bool:
        return name in _APT_NAMES

    def command(self, cmd: Command) -> None:
        # no host name has a blank, so one found in the joined words lies inside one word
        if _SNAPSHOT_HOST.search(" ".join(cmd.argv)):
            self.snapshot = True
        pkgs = _apt_install(cmd)
        if pkgs is None or pkgs[1]:  # not apt install, or apt --snapshot ID
            return
        loose = [p for p in pkgs[0] if "=" not in p and "$" not in p and "…" not in p
                 and not p.endswith(".deb") and not p.startswith(("/", "./"))]
        if loose and not self.snapshot:
            self.ctx.add("apt-unpinned", self.ins.line,
                         f"{cmd.name} install without versions or a snapshot source: {', '.join(loose)}",
                         "pin versions (NAME=VERSION) or install from a dated snapshot.ubuntu.com / "
                         "snapshot.debian.org source")

    def run_end(self) -> None:
        if not self.snapshot and any(map(_SNAPSHOT_HOST.search, self.run_script.texts)):
            self.snapshot = True

    def stage_end(self) -> None:
        self.ended[self.st.index] = self.snapshot


def _apt_install(cmd: Command) -> tuple[list[str], bool] | None:
    """(packages, uses --snapshot) for apt-get/apt install, else None."""
    if cmd.name not in _APT_NAMES:
        return None
    positional: list[str] = []
    snapshot = False
    i = 1
    argv = cmd.argv
    while i < len(argv):
        tok = argv[i]
        if tok in _APT_VALUE:
            value = argv[i + 1] if i + 1 < len(argv) else ""
            snapshot = snapshot or "snapshot" in value.lower()
            i += 2
            continue
        if tok in ("-S", "--snapshot") or tok.startswith("--snapshot="):
            snapshot = True
            i += 2 if tok in ("-S", "--snapshot") else 1
            continue
        if tok.startswith("-"):
            snapshot = snapshot or ("snapshot" in tok.lower() and tok.startswith("-o"))
        else:
            positional.append(tok)
        i += 1
    if not positional or positional[0] != "install":
        return None
    return positional[1:], snapshot


# -- downloads -----------------------------------------------------------------------------------------
def check_add_url(ctx: Context) -> None:
    for st in ctx.df.stages:
        for ins in st.instructions:
            if ins.keyword != "ADD" or "checksum" in ins.flags:
                continue
            if ins.exec_form is not None:
                words = ins.exec_form
            else:
                words = [expand(w, ins.scope, escape=ctx.df.escape).value
                         for w, _, _ in split_words(ins.args, ctx.df.escape)]
            for src in words[:-1]:
                if not src.startswith(("http://", "https://", "git@")):
                    continue
                if (".git" in src or src.startswith("git@")) and "#" in src and _HEX.match(src.rsplit("#", 1)[1]):
                    continue
                ctx.add("add-url", ins.line, f"ADD {src} downloads at build time without a checksum",
                        "use ADD --checksum=sha256:… (BuildKit) or download in RUN and verify with sha256sum -c")


_FETCHERS = frozenset({"curl", "wget"})


class _CurlPipe(RunRule):
    """curl-pipe-shell: a fetcher piped into an interpreter later in the pipeline, or run by one (sh -c, eval)."""

    def pipeline(self, pipe: list[Command]) -> None:
        ctx, ins = self.ctx, self.ins
        sinks: list[Command | None] | None = None
        for i, cmd in enumerate(pipe):
            if cmd.name in _FETCHERS:
                sinks = sinks or _next_interpreters(pipe)
                sink = sinks[i]
                if sink is not None:
                    _curl_finding(ctx, ins, cmd, f"piped to {sink.name}")
            if cmd.nested and (cmd.is_interpreter() or cmd.name in ("eval", "source", ".")):
                for sub in cmd.nested:
                    fetch = next((c for c in sub.commands() if c.name in _FETCHERS), None)
                    if fetch is not None:
                        _curl_finding(ctx, ins, fetch, f"run by {cmd.name}")


def _next_interpreters(pipe: list[Command]) -> list[Command | None]:
    """For each command of a pipeline, the first interpreter after it (None if none): one pass from the end."""
    out: list[Command | None] = []
    after: Command | None = None
    for cmd in reversed(pipe):
        out.append(after)
        if cmd.is_interpreter():
            after = cmd
    return out[::-1]


def _curl_finding(ctx: Context, ins: Instruction, fetch: Command, how: str) -> None:
    url = next((a for a in fetch.argv[1:] if "://" in a), " ".join(fetch.argv[1:]))
    ctx.add("curl-pipe-shell", ins.line, f"{fetch.name} {url} {how}: the script is whatever the server sends",
            "download a pinned version, verify its sha256 (sha256sum -c), then run it")


# -- git -------------------------------------------------------------------------------------------------
_GIT_GLOBAL_VALUE = frozenset({"-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"})
_CLONE_VALUE = frozenset({
    "-b", "--branch", "--depth", "-o", "--origin", "-c", "--config", "--reference", "--reference-if-able",
    "--separate-git-dir", "-u", "--upload-pack", "--template", "-j", "--jobs", "--filter", "--shallow-since",
    "--shallow-exclude", "--revision", "--server-option", "--bundle-uri",
})


@dataclass
class _Clone:
    ins: Instruction
    url: str
    path: str
    pinned: bool
    tag: str | None = None  # a release tag it is pinned to (which can move, unlike a commit)


def _git(cmd: Command, cwd: str) -> tuple[str, list[str], str] | None:
    """(subcommand, its arguments, the directory it runs in) for a git command."""
    if cmd.name != "git":
        return None
    argv, i = cmd.argv, 1
    where = cwd
    while i < len(argv) and argv[i].startswith("-"):
        if argv[i] in _GIT_GLOBAL_VALUE:
            if argv[i] == "-C" and i + 1 < len(argv):
                where = posixpath.normpath(posixpath.join(where, argv[i + 1]))
            i += 2
        else:
            i += 1
    if i >= len(argv):
        return None
    return argv[i], argv[i + 1 :], where


class _Git(RunRule):
    """git-clone-unpinned and git-clone-tag: each clone of a stage, pinned when a later checkout in the stage
    names a commit (or a tag) in its directory."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.clones: list[_Clone] = []
        self.cwd = "/"
        self.fetched: set[str] = set()

    def stage(self, st: Stage) -> None:
        self.clones = []

    def run(self, ins: Instruction, run: RunScript) -> None:
        self.cwd = ins.workdir
        self.fetched = set()

    def wants(self, name: str, assigns: bool) -> bool:
        return name in ("cd", "pushd", "git")

    def command(self, cmd: Command) -> None:
        if cmd.name in ("cd", "pushd") and len(cmd.argv) > 1 and "$" not in cmd.argv[1]:
            self.cwd = posixpath.normpath(posixpath.join(self.cwd, cmd.argv[-1]))
            return
        if cmd.name != "git":
            return
        call = _git(cmd, self.cwd)
        if call is None:
            return
        sub, args, where = call
        ins, clones = self.ins, self.clones
        if sub == "clone":
            clones.append(_clone(ins, args, where))
        elif sub in ("checkout", "switch", "reset"):
            refs = [_ref_value(a, ins) for a in args if not a.startswith("-")]
            if any(r is None or _HEX.match(r) for r in refs) or ("FETCH_HEAD" in refs and where in self.fetched):
                _pin(clones, where)
            elif any(_TAG.match(r) for r in refs if r):
                _pin(clones, where, tag=next(r for r in refs if r and _TAG.match(r)))
        elif sub == "fetch" and any(_HEX.match(a) for a in args):
            self.fetched.add(where)

    def stage_end(self) -> None:
        for c in self.clones:
            if c.pinned:
                continue
            if c.tag is not None:
                self.ctx.add("git-clone-tag", c.ins.line,
                             f"git clone {c.url} is pinned to the tag {c.tag}, which can be moved or re-created",
                             f"check out the commit the tag names: git -C {c.path} checkout SHA")
            else:
                self.ctx.add("git-clone-unpinned", c.ins.line,
                             f"git clone {c.url} is not pinned to a commit (it gets whatever the branch holds today)",
                             f"check out a commit after cloning: git -C {c.path} checkout SHA")


#: A release tag: v2.4.3, 1.15.5, r2.4, v0.19.0-rc1 (a branch name such as main or release/2.4 is not).
_TAG = re.compile(r"^(v|r|release-|version-)?[0-9]+(\.[0-9]+)+([-.+][0-9A-Za-z.]+)?$")
_VAR_REF = re.compile(r"^\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))$")


def _ref_value(ref: str, ins: Instruction) -> str | None:
    """The ref a checkout names: a $VARIABLE is looked up in the RUN's ARG/ENV scope; None when the audit cannot
    know its value (a build argument without a default), which counts as a commit: the clone is not flagged."""
    m = _VAR_REF.match(ref)
    if not m:
        return ref
    var = ins.scope.get(m.group(1) or m.group(2))
    return var.value if var is not None and var.value else None

def _clone(ins: Instruction, args: list[str], cwd: str) -> _Clone:
    positional: list[str] = []
    pinned = False
    tag = None
    i = 0
    while i < len(args):
        tok = args[i]
        name, _, value = tok.partition("=")
        if tok in _CLONE_VALUE:
            value = args[i + 1] if i + 1 < len(args) else ""
            name = tok
            i += 1
        if name == "--revision" and _HEX.match(value):
            pinned = True
        if name in ("-b", "--branch") and _TAG.match(value):
            tag = value
        if not tok.startswith("-"):
            positional.append(tok)
        i += 1
    url = positional[0] if positional else "?"
    target = positional[1] if len(positional) > 1 else posixpath.basename(url.rstrip("/")).removesuffix(".git")
    return _Clone(ins, url, posixpath.normpath(posixpath.join(cwd, target)), pinned, tag)


def _pin(clones: list[_Clone], where: str, tag: str | None = None) -> None:
    """Mark the clone checked out in `where` as pinned (to a commit), or as pinned to a release tag."""
    for matching in (lambda c: c.path == where or posixpath.basename(c.path) == posixpath.basename(where),
                     lambda c: True):
        for c in reversed(clones):
            if not c.pinned and matching(c):
                if tag is None:
                    c.pinned = True
                else:
                    c.tag = tag
                return


class _ShellSyntax(RunRule):
    """shell-unparsed: a RUN whose text could not be split into words."""

    def run(self, ins: Instruction, run: RunScript) -> None:
        if run.error and self.st.posix_shell:
            self.ctx.add("shell-unparsed", ins.line, f"RUN could not be split into words: {run.error}",
                         "check the quoting of this RUN")


#: The rules that read RUN commands, fed by one walk (check_runs).
RUN_RULES: tuple[type[RunRule], ...] = (_Horovod, _Pip, _Apt, _CurlPipe, _Git, _ShellSyntax)


def check_runs(ctx: Context) -> None:
    """Walk every stage's instructions once, each RUN's pipelines and commands once (nested scripts included),
    and hand each step to every rule of RUN_RULES: a RUN is split once and its commands built once for all of
    them, and nothing of it is kept after its last rule has seen it."""
    rules = [cls(ctx) for cls in RUN_RULES]

    def overrides(name: str) -> list[RunRule]:
        return [r for r in rules if getattr(type(r), name) is not getattr(RunRule, name)]

    on_run, on_run_end = [r.run for r in overrides("run")], [r.run_end for r in overrides("run_end")]
    on_pipeline = [r.pipeline for r in overrides("pipeline")]
    readers = overrides("command")
    #: The command() handlers that want a command, by its name, for commands without and with assignments.
    plain: dict[str, list[Callable[[Command], None]]] = {}
    assigning: dict[str, list[Callable[[Command], None]]] = {}

    def pipelines(pipe: list[Command]) -> None:
        for f in on_pipeline:
            f(pipe)

    pipeline = on_pipeline[0] if len(on_pipeline) == 1 else pipelines

    def command(cmd: Command) -> None:
        by_name = assigning if cmd.assigns else plain
        found = by_name.get(cmd.name)
        if found is None:
            found = by_name[cmd.name] = [r.command for r in readers if r.wants(cmd.name, bool(cmd.assigns))]
        for f in found:
            f(cmd)

    def every_command(cmd: Command) -> None:
        for r in readers:
            r.command(cmd)

    for st in ctx.df.stages:
        for r in rules:
            r.st = st
            r.stage(st)
        for ins in st.instructions:
            if ins.keyword != "RUN":
                continue
            run = ctx.run(ins)
            for r in rules:
                r.ins, r.run_script = ins, run
            for f in on_run:
                f(ins, run)
            walker = command
            for r in readers:
                if r.every_command:
                    walker = every_command
            run.script.visit(pipeline, walker)
            for f in on_run_end:
                f()
        for r in rules:
            r.stage_end()
    for r in rules:
        r.finish()


CHECKS = (
    check_from,
    check_determinism,
    check_autotune,
    check_xla,
    check_nvidia_disable_require,
    check_hashseed,
    check_runs,
    check_add_url,
)
