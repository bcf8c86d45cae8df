"""How pip is called: the install/wheel/download calls of a command with their options sorted out, `pip config
set`, and what a requirement specifier pins. Shared by the pip and Horovod rule families; no rule lives here.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from envpin.audit.check import COMMIT
from envpin.audit.shell import Command
from envpin.record import Value

_PIP = re.compile(r"^pip(\d(\.\d+)?)?$")
_PYTHON = re.compile(r"^python(\d(\.\d+)?)?$")
_REQ = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*(.*)$")
_PIP_VALUE = frozenset(
    {
        "-r",
        "--requirement",
        "-c",
        "--constraint",
        "-e",
        "--editable",
        "-i",
        "--index-url",
        "--extra-index-url",
        "-f",
        "--find-links",
        "-t",
        "--target",
        "--prefix",
        "--root",
        "--src",
        "--upgrade-strategy",
        "--progress-bar",
        "--platform",
        "--python-version",
        "--implementation",
        "--abi",
        "--only-binary",
        "--no-binary",
        "--global-option",
        "--install-option",
        "-C",
        "--config-settings",
        "--trusted-host",
        "--cache-dir",
        "--log",
        "--log-file",
        "--proxy",
        "--retries",
        "--timeout",
        "--exists-action",
        "--cert",
        "--client-cert",
        "--python",
        "--report",
        "-w",
        "--wheel-dir",
        "-d",
        "--dest",
        "-b",
        "--build",
        "--use-feature",
        "--use-deprecated",
        "--keyring-provider",
        "--root-user-action",
        "--python-executable",
    }
)
_PIP_GLUED = ("-r", "-c", "-e", "-i", "-f", "-t", "-C", "-w", "-d")
_INDEX_OPTS = frozenset({"-i", "--index-url", "--extra-index-url", "-f", "--find-links"})


@dataclass(slots=True)
class PipCall(Value):
    """One pip install/wheel/download call: what it installs and from where, as the pip rules judge it.
    ``extra``: the sources pip reads besides the (default or --index-url) index: --extra-index-url,
    --find-links."""

    subcommand: str
    specs: list[str] = field(default_factory=list)
    editables: list[str] = field(default_factory=list)
    requirements: list[str] = field(default_factory=list)
    constraints: list[str] = field(default_factory=list)
    indexes: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    trusted: list[str] = field(default_factory=list)
    require_hashes: bool = False


#: How the name of every command that installs with pip (or configures it) starts.
PIP_NAMES = ("pip", "python", "uv")


def pip_call(cmd: Command) -> PipCall | None:
    """The install/wheel/download call a command makes, with its options sorted out, or None."""
    rest = _pip_arguments(cmd)
    if rest is None:
        return None
    opts, positional = _options(rest)
    if not positional or positional[0] not in ("install", "wheel", "download"):
        return None
    call = PipCall(positional[0], specs=_requirements(positional[1:]))
    for option, given in opts:
        if option in ("-r", "--requirement") and given:
            call.requirements.append(given)
        elif option in ("-c", "--constraint") and given:
            call.constraints.append(given)
        elif option in ("-e", "--editable") and given:
            call.editables.append(given)
        elif option in _INDEX_OPTS and given:
            call.indexes.append(given)
            if option not in ("-i", "--index-url"):
                call.extra.append(given)
        elif option == "--trusted-host" and given:
            call.trusted.append(given)
        elif option == "--require-hashes":
            call.require_hashes = True
    return call


def _pip_arguments(cmd: Command) -> list[str] | None:
    """What a command gives pip (`pip ...`, `python -m pip ...`, `uv pip ...`), or None when it runs no pip."""
    argv = cmd.argv
    if not cmd.name.startswith(PIP_NAMES):
        return None
    if _PIP.match(cmd.name):
        return argv[1:]
    if _PYTHON.match(cmd.name) and len(argv) > 2 and argv[1] == "-m" and _PIP.match(argv[2]):
        return argv[3:]
    if cmd.name == "uv" and argv[1:2] == ["pip"]:
        return argv[2:]
    return None


def _options(rest: list[str]) -> tuple[list[tuple[str, str | None]], list[str]]:
    """pip's arguments as (option, its value or None) in order, and the positional words (everything after
    `--` among them): `--opt=value`, `--opt value` for the options that take one, `-rFILE` glued."""
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
    return opts, positional


def _requirements(words: list[str]) -> list[str]:
    """The requirements named after the subcommand, a PEP 508 direct reference (NAME @ URL) as one."""
    specs = []
    j = 0
    while j < len(words):
        if j + 2 < len(words) and words[j + 1] == "@":
            specs.append(f"{words[j]} @ {words[j + 2]}")
            j += 3
        else:
            specs.append(words[j])
            j += 1
    return specs


def is_local(spec: str) -> bool:
    """A path or archive on the builder (., /, a .whl): not pinned by name, its dependencies resolved at build."""
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
    if not m or "://" in spec or is_local(spec):
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
            return "pinned" if COMMIT.match(ref) else "unpinned"
        return "pinned"
    if spec.startswith("$"):
        return "unknown"
    if is_local(spec):
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
