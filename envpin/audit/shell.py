"""RUN commands as the shell sees them: pipelines of simple commands with real argv (split by shlex).

The audit rules look at argv, never at raw text: ``pip install`` is recognised as pip whether it is
spelled ``pip3``, ``python3 -m pip`` or ``sudo -H pip``, after ``&&``/``||``/``;``/``|``, inside
``sh -c "..."``, ``$(...)`` or a heredoc. Redirections and their targets are dropped from argv.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field

from envpin.audit.parser import Instruction, expand

_PUNCT = ";&|()<>\n"
_OPERATORS = (
    "&>>", "<<<", "<<-", "&&", "||", ";;", "|&", ">>", "<<", ">&", "<&", "&>", ">|", "<>", "<(", ">(",
    ";", "|", "&", "(", ")", "<", ">", "\n",
)
_SEPARATORS = frozenset({"&&", "||", ";", ";;", "&", "\n"})
_PIPES = frozenset({"|", "|&"})
_REDIRECTS = frozenset({"&>>", "<<<", "<<-", ">>", "<<", ">&", "<&", "&>", ">|", "<>", "<", ">"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
#: Reserved words that may start a simple command and are not the command.
_PREFIX_WORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{", "}", "time"})
_SKIP_COMMANDS = frozenset({"for", "case", "esac", "fi", "done", "in", "select", "function"})
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ash", "ksh"})
_PYTHON = re.compile(r"^python(\d(\.\d+)?)?$")


@dataclass
class Command:
    """A simple command: argv after assignments and wrappers (sudo, env, nohup...) are taken off."""

    argv: list[str]
    assigns: dict[str, str] = field(default_factory=dict)
    nested: list[Script] = field(default_factory=list)  # $(...), <(...), sh -c '...', eval
    via_c: list[Script] = field(default_factory=list)  # the subset run by sh -c / eval
    #: The program's base name ('/usr/bin/pip3' -> 'pip3'): set once, every rule asks it of every command.
    name: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.name = self.argv[0].rpartition("/")[2] if self.argv else ""  # posixpath.basename, without its cost

    @property
    def text(self) -> str:
        return shlex.join(self.argv)

    def is_shell(self) -> bool:
        return self.name in SHELLS

    def is_interpreter(self) -> bool:
        """A program that would run code read from stdin: a shell or Python."""
        return self.is_shell() or bool(_PYTHON.match(self.name)) or self.name in ("perl", "ruby")


@dataclass
class Script:
    pipelines: list[list[Command]] = field(default_factory=list)

    def commands(self) -> Iterator[Command]:
        """Every command in order, nested ones (sh -c, $(...)) right after the command holding them."""
        for pipe in self.pipelines:
            for cmd in pipe:
                yield cmd
                for sub in cmd.nested:
                    yield from sub.commands()

    def all_pipelines(self) -> Iterator[list[Command]]:
        for pipe in self.pipelines:
            yield pipe
            for cmd in pipe:
                for sub in cmd.nested:
                    yield from sub.all_pipelines()


class ShellSyntaxError(ValueError):
    """shlex could not split the text (an unterminated quote, usually)."""


def _normalize(text: str) -> str:
    """Rewrite what shlex cannot see as one unit: `cmd` becomes $(cmd) (the same command substitution), and
    an arithmetic expansion $((...)) becomes the number it stands for, so neither is read as commands.

    Single-quoted text is left alone; escaped backticks stay literal."""
    if "`" not in text and "$((" not in text:
        return text
    out: list[str] = []
    i, n, quote = 0, len(text), ""
    while i < n:
        c = text[i]
        if quote == "'":
            out.append(c)
            quote = "" if c == "'" else quote
            i += 1
            continue
        if c == "\\" and i + 1 < n:
            out.append(text[i : i + 2])
            i += 2
            continue
        if c == "'" and not quote:
            quote = "'"
        elif c == '"':
            quote = "" if quote == '"' else '"'
        if text.startswith("$((", i):
            depth, k = 0, i + 1
            while k < n:
                depth += {"(": 1, ")": -1}.get(text[k], 0)
                k += 1
                if depth == 0:
                    break
            out.append("0")
            i = k
            continue
        if c == "`":
            k = i + 1
            while k < n and text[k] != "`":
                k += 2 if text[k] == "\\" else 1
            if k < n:
                out.append("$(" + _normalize(text[i + 1 : k]) + ")")
                i = k + 1
                continue
        out.append(c)
        i += 1
    return "".join(out)


_TOKEN = re.compile(
    r"""(?P<ws>[ \t\r]+)
    | (?P<op>[;&|()<>\n]+)
    | (?P<word>(?:[^ \t\r;&|()<>\n"'\\]+ | "(?:[^"\\]|\\.)*" | '[^']*' | \\.)+)
    """,
    re.X | re.S,
)
_DQ_ESCAPE = re.compile(r'\\([\\"])')
_PIECE = re.compile(r""""((?:[^"\\]|\\.)*)"|'([^']*)'|\\(.)|([^"'\\]+)""", re.S)


def split_tokens(text: str) -> list[tuple[str, bool]]:
    """(token, is_operator) as shlex.shlex(posix=True, punctuation_chars=";&|()<>\\n", whitespace " \\t\\r",
    whitespace_split=True, no comments) splits it, in linear time with one regular expression.

    Quotes are removed as a POSIX shell removes them: '...' literally, "..." with \\\\ and \\" unescaped,
    \\x outside quotes is x. An unterminated quote or a trailing backslash is a ShellSyntaxError."""
    tokens: list[tuple[str, bool]] = []
    matched = 0
    for ws, op, word in _TOKEN.findall(text):
        if word:
            matched += len(word)
            tokens.append((_unquote(word) if _QUOTING.search(word) else word, False))
        elif op:
            matched += len(op)
            tokens.extend(_operator_tokens(op))
        else:
            matched += len(ws)
    if matched != len(text):  # findall skipped what no alternative matches: an unterminated quote or escape
        pos = _first_gap(text)
        rest = text[pos:]
        trailing = len(rest) - len(rest.rstrip("\\"))
        if trailing % 2 and not (rest.startswith("'") and rest.count("'") == 1):
            raise ShellSyntaxError("No escaped character")  # the text ends inside an escape, as shlex says
        raise ShellSyntaxError("No closing quotation")
    return tokens


def _first_gap(text: str) -> int:
    """Where the first character no token alternative matches is (only computed for a text that fails)."""
    pos = 0
    for m in _TOKEN.finditer(text):
        if m.start() != pos:
            break
        pos = m.end()
    return pos


_QUOTING = re.compile(r"[\"'\\]")


@functools.lru_cache(maxsize=256)
def _operator_tokens(run: str) -> tuple[tuple[str, bool], ...]:
    """The operators of a punctuation run, as tokens (few distinct runs occur: cached)."""
    return tuple((op, True) for op in _split_operators(run))


def _unquote(word: str) -> str:
    out = []
    for m in _PIECE.finditer(word):
        group = m.lastindex
        out.append(_DQ_ESCAPE.sub(r"\1", m.group(1)) if group == 1 else m.group(group or 4))
    return "".join(out)


#: Deepest nesting of $(...), <(...) and sh -c scripts that is parsed; deeper code is taken as words, so a
#: pathological line costs linear time and no recursion.
MAX_NESTING = 8


def parse_script(text: str, depth: int = 0) -> Script:
    return _build(split_tokens(_normalize(text)), depth)


def _split_operators(run: str) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(run):
        for op in _OPERATORS:
            if run.startswith(op, i):
                out.append(op)
                i += len(op)
                break
        else:  # unreachable: every punctuation character is an operator on its own
            out.append(run[i])
            i += 1
    return out


def _matching(tokens: list[tuple[str, bool]], i: int) -> int:
    """Index just after the ')' that closes a '(' / '<(' / '$(' opened before tokens[i]."""
    depth = 1
    while i < len(tokens):
        tok, op = tokens[i]
        if op and tok in ("(", "<(", ">("):
            depth += 1
        elif op and tok == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def _build(tokens: list[tuple[str, bool]], depth: int) -> Script:
    script = Script()
    pipe: list[Command] = []
    words: list[str] = []
    nested: list[Script] = []
    redirect = False

    def end_command() -> None:
        nonlocal words, nested
        if words or nested:
            pipe.append(_command(words, nested, depth))
        words, nested = [], []

    def end_pipeline() -> None:
        nonlocal pipe
        end_command()
        if pipe:
            script.pipelines.append(pipe)
        pipe = []

    i = 0
    while i < len(tokens):
        tok, op = tokens[i]
        if not op:
            if redirect:
                redirect = False
            elif tok.endswith("$") and i + 1 < len(tokens) and tokens[i + 1] == ("(", True) and depth < MAX_NESTING:
                end = _matching(tokens, i + 2)
                nested.append(_build(tokens[i + 2 : end - 1], depth + 1))
                words.append(tok + "(…)")
                i = end
                continue
            else:
                words.append(tok)
                if "$(" in tok and depth < MAX_NESTING:
                    nested.extend(parse_script(sub, depth + 1) for sub in _substitutions(tok))
            i += 1
            continue
        if tok in ("<(", ">(") and depth < MAX_NESTING:
            end = _matching(tokens, i + 1)
            nested.append(_build(tokens[i + 1 : end - 1], depth + 1))
            words.append(tok + "…)")
            i = end
            continue
        if tok in _REDIRECTS:
            if words and words[-1].isdigit() and len(words[-1]) <= 2:
                words.pop()  # the file descriptor of 2>&1
            redirect = True
        elif tok in _PIPES:
            end_command()
        else:  # separators and subshell parentheses
            end_pipeline()
        i += 1
    end_pipeline()
    return script


def _substitutions(word: str) -> list[str]:
    """The texts of $(...) inside one (quoted) word. Backticks were turned into $(...) before splitting
    (_normalize); one left in a word was quoted literally ('`...`' or \\`)."""
    if "$(" not in word:
        return []
    out: list[str] = []
    i = 0
    while i < len(word):
        if word.startswith("$(", i) and not word.startswith("$((", i):
            depth, k = 1, i + 2
            while k < len(word) and depth:
                depth += {"(": 1, ")": -1}.get(word[k], 0)
                k += 1
            out.append(word[i + 2 : k - 1])
            i = k
        else:
            i += 1
    return out


_SUDO_VALUE = frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"})
_XARGS_VALUE = frozenset({"-n", "-I", "-P", "-d", "-L", "-s", "-E", "-a"})


def _command(words: list[str], nested: list[Script], depth: int) -> Command:
    assigns: dict[str, str] = {}
    argv = list(words)
    while argv:
        if _ASSIGNMENT.match(argv[0]):
            key, _, value = argv.pop(0).partition("=")
            assigns[key] = value
        elif argv[0] in _PREFIX_WORDS:
            argv.pop(0)
        else:
            break
    argv = _unwrap(argv, assigns)
    if argv and argv[0] in _SKIP_COMMANDS:
        argv = []
    cmd = Command(argv, assigns, list(nested))
    if cmd.name == "export":
        for word in argv[1:]:
            if _ASSIGNMENT.match(word):
                key, _, value = word.partition("=")
                cmd.assigns[key] = value
    script = _inline_script(cmd)
    if script is not None and depth < MAX_NESTING:
        sub = parse_script(script, depth + 1)
        cmd.nested.append(sub)
        cmd.via_c.append(sub)
    return cmd


def _unwrap(argv: list[str], assigns: dict[str, str]) -> list[str]:
    """Drop sudo/env/nohup/nice/exec/command/xargs and their options; env's NAME=VALUE become assigns."""
    while argv:
        head = argv[0].rpartition("/")[2]
        if head in ("sudo", "doas"):
            i = 1
            while i < len(argv) and argv[i].startswith("-"):
                i += 2 if argv[i] in _SUDO_VALUE else 1
            argv = argv[i:]
        elif head == "env":
            i = 1
            while i < len(argv) and (argv[i].startswith("-") or _ASSIGNMENT.match(argv[i])):
                if _ASSIGNMENT.match(argv[i]):
                    key, _, value = argv[i].partition("=")
                    assigns[key] = value
                    i += 1
                else:
                    i += 2 if argv[i] in ("-u", "--unset", "-C", "--chdir") else 1
            argv = argv[i:]
        elif head in ("nohup", "exec", "command", "time", "stdbuf"):
            i = 1
            while i < len(argv) and argv[i].startswith("-"):
                i += 1
            argv = argv[i:]
        elif head == "nice":
            argv = argv[3:] if len(argv) > 2 and argv[1] == "-n" else argv[1:]
        elif head == "xargs":
            i = 1
            while i < len(argv) and argv[i].startswith("-"):
                i += 2 if argv[i] in _XARGS_VALUE else 1
            argv = argv[i:]
        else:
            break
    return argv


def _inline_script(cmd: Command) -> str | None:
    """The script run by `sh -c SCRIPT` or `eval WORDS`, if this is one."""
    if cmd.name == "eval" and len(cmd.argv) > 1:
        return " ".join(cmd.argv[1:])
    if not cmd.is_shell():
        return None
    for i, arg in enumerate(cmd.argv[1:], 1):
        if arg == "--":
            return None
        if arg in ("-o", "+o", "-O", "+O"):
            continue
        if arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:]:
            return cmd.argv[i + 1] if i + 1 < len(cmd.argv) else None
        if not arg.startswith(("-", "+")) and cmd.argv[i - 1] not in ("-o", "+o", "-O", "+O"):
            return None
    return None


@dataclass
class RunScript:
    """The shell view of one RUN: its script, heredoc bodies, or why it could not be split."""

    script: Script
    texts: list[str]  # the command text after substitution, plus heredoc bodies (for snapshot URLs)
    error: str | None = None


def run_script(ins: Instruction, posix_shell: bool = True) -> RunScript:
    """Split a RUN (shell or exec form, heredocs included) into commands, with ARG/ENV substituted."""
    if ins.exec_form is not None:
        argv = list(ins.exec_form)  # exec form: no shell, so no variable substitution either
        cmd = _command(argv, [], 0) if argv else Command([])
        return RunScript(Script([[cmd]]), [shlex.join(argv)])
    if not posix_shell:
        return RunScript(Script(), [], "the stage's SHELL is not a POSIX shell")
    text = expand(ins.args, ins.scope, keep_quotes=True).value
    texts = [text] + [h.body for h in ins.heredocs]
    try:
        script = parse_script(text)
        if ins.heredocs:
            leading = [c for c in script.commands() if c.argv]
            if not leading or leading[0].is_shell():
                for doc in ins.heredocs:
                    body = expand(doc.body, ins.scope, keep_quotes=True).value
                    script.pipelines.extend(parse_script(body).pipelines)
    except ShellSyntaxError as exc:
        return RunScript(Script(), texts, str(exc))
    return RunScript(script, texts)
