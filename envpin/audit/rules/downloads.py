"""Downloads: ADD of a URL without a checksum, and scripts fetched with curl/wget and run unverified."""

from __future__ import annotations

from envpin.audit.check import COMMIT, Check, Context, RunRule
from envpin.audit.parser import Instruction
from envpin.audit.rule import EXAMPLE_BASE, Rule
from envpin.audit.shell import Command
from envpin.audit.words import expand, split_words

_SHA = "0" * 64  # a placeholder checksum: take the real one from the file you reviewed

ADD_URL = Rule(
    id="add-url",
    severity="warning",
    title="ADD downloads a URL without a checksum",
    finds="`ADD https://...` (or a git URL not pinned to a commit with `#SHA`) without `--checksum=`, in any stage.",
    why="The file behind a URL can change. Use ADD --checksum=sha256:... (BuildKit), or download in "
    "RUN and verify with sha256sum -c.",
    bad=EXAMPLE_BASE + "ADD https://example.com/models/resnet50-v1.5.tar.gz /opt/models/\n",
    good=EXAMPLE_BASE + f"ADD --checksum=sha256:{_SHA} \\\n"
    "    https://example.com/models/resnet50-v1.5.tar.gz /opt/models/\n",
    autofix="Leaves a comment above the instruction: the checksum must come from a file someone has checked, not "
    "from whatever the URL serves during the fix.",
    references=(("Docker: ADD --checksum", "https://docs.docker.com/reference/dockerfile/#add---checksum"),),
)

CURL_PIPE_SHELL = Rule(
    id="curl-pipe-shell",
    severity="warning",
    title="downloaded script piped to a shell",
    finds='`curl`/`wget` piped to `sh`/`bash`/`python` (also `sh -c "$(curl ...)"`, `bash <(curl ...)`, '
    "`eval`), in any stage. A script downloaded to a file and run in a second step is not reported.",
    why="curl | sh runs whatever the server sends on the day of the build, unverified. Download a "
    "pinned version, check its sha256, then run it.",
    bad=EXAMPLE_BASE + "RUN curl -fsSL https://example.com/install.sh | bash\n",
    good=EXAMPLE_BASE + "RUN curl -fsSLo /tmp/install.sh https://example.com/v1.2.3/install.sh \\\n"
    f" && echo '{_SHA}  /tmp/install.sh' | sha256sum -c - \\\n"
    " && bash /tmp/install.sh\n",
    autofix="Leaves a comment above the instruction: which version to pin and its checksum are for a person to check.",
    references=(("Not checked", "#not-checked"),),
)

RULES: tuple[Rule, ...] = (ADD_URL, CURL_PIPE_SHELL)


def check_add_url(ctx: Context) -> None:
    """Every ADD of a URL without --checksum (a git URL pinned to a commit with #SHA is fine)."""
    for st in ctx.df.stages:
        for ins in st.instructions:
            if ins.keyword != "ADD" or "checksum" in ins.flags:
                continue
            if ins.exec_form is not None:
                words = ins.exec_form
            else:
                words = [
                    expand(w, ins.scope, escape=ctx.df.escape).value for w, _, _ in split_words(ins.args, ctx.df.escape)
                ]
            for src in words[:-1]:
                if not src.startswith(("http://", "https://", "git@")):
                    continue
                if (".git" in src or src.startswith("git@")) and "#" in src and COMMIT.match(src.rsplit("#", 1)[1]):
                    continue
                ctx.add(
                    ADD_URL,
                    ins.line,
                    f"ADD {src} downloads at build time without a checksum",
                    "use ADD --checksum=sha256:… (BuildKit) or download in RUN and verify with sha256sum -c",
                )


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
    """The finding for one fetch: its URL (or its arguments) and how its output is run."""
    url = next((a for a in fetch.argv[1:] if "://" in a), " ".join(fetch.argv[1:]))
    ctx.add(
        CURL_PIPE_SHELL,
        ins.line,
        f"{fetch.name} {url} {how}: the script is whatever the server sends",
        "download a pinned version, verify its sha256 (sha256sum -c), then run it",
    )


CHECKS: tuple[Check, ...] = (check_add_url,)
RUN_RULES: tuple[type[RunRule], ...] = (_CurlPipe,)
