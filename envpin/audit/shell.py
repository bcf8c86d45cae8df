"""RUN commands as the shell sees them: pipelines of simple commands with real argv (split like shlex).

The audit rules look at argv, never at raw text: ``pip install`` is recognised as pip whether it is
spelled ``pip3``, ``python3 -m pip`` or ``sudo -H pip``, after ``&&``/``||``/``;``/``|``, inside
``sh -c "..."``, ``$(...)`` or a heredoc. Redirections and their targets are dropped from argv.

A script keeps its tokens (one list, words shared) and builds its commands when it is walked: a short one
keeps them for the next walk, a long one builds them again, so a RUN line of millions of commands never holds
them all at once (see `KEEP_TOKENS`).
"""

from __future__ import annotations

import functools
import re
import shlex
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from envpin.audit.parser import Instruction
from envpin.audit.words import expand
from envpin.record import Value

_PUNCT = ";&|()<>\n"
_OPERATORS = (
    "&>>",
    "<<<",
    "<<-",
    "&&",
    "||",
    ";;",
    "|&",
    ">>",
    "<<",
    ">&",
    "<&",
    "&>",
    ">|",
    "<>",
    "<(",
    ">(",
    ";",
    "|",
    "&",
    "(",
    ")",
    "<",
    ">",
    "\n",
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


class Op(str):
    """An operator token (``&&``, ``|``, ``(``, ``<``...). Words are plain str, so a quoted ``"&&"`` stays a word."""

    __slots__ = ()


#: One object per operator: tokens share them, and the builder tells operators apart by identity.
_OP = {op: Op(op) for op in _OPERATORS}
_OPEN = _OP["("]
_CLOSE = _OP[")"]
_PROCESS = (_OP["<("], _OP[">("])


@dataclass(slots=True)
class Command(Value):
    """A simple command: argv after assignments and wrappers (sudo, env, nohup...) are taken off."""

    argv: list[str]
    assigns: dict[str, str] = field(default_factory=dict)
    #: The scripts of $(...), <(...), sh -c '...' and eval.
    nested: list[Script] = field(default_factory=list)
    #: The subset of `nested` run by sh -c / eval.
    via_c: list[Script] = field(default_factory=list)
    #: The program's base name ('/usr/bin/pip3' -> 'pip3'), set once (every rule asks it of every command).
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


#: A script of up to this many commands keeps them after its first full walk (the rules walk every RUN several
#: times) and drops its tokens; a longer one builds them again on each walk, so memory follows the length of the
#: text rather than the number of Command objects a RUN line of millions of commands would make.
KEEP_COMMANDS = 2048


class Script:
    """A shell script: its pipelines of simple commands, built from its tokens when it is walked."""

    __slots__ = ("_kept", "_long", "_parts")

    def __init__(self, pipelines: list[list[Command]] | None = None) -> None:
        #: Pipelines built already, or (tokens, nesting depth) to build them from, in order.
        self._parts: list[list[list[Command]] | tuple[list[str], int]] = [pipelines] if pipelines else []
        self._kept: list[list[Command]] | None = None if self._parts else []
        self._long = False  # a walk found more than KEEP_COMMANDS commands: build them on every walk

    @classmethod
    def from_tokens(cls, tokens: list[str], depth: int) -> Script:
        script = cls()
        script._parts.append((tokens, depth))
        script._kept = None
        return script

    def __repr__(self) -> str:
        return f"Script({self.pipelines!r})"

    @property
    def pipelines(self) -> list[list[Command]]:
        """Every pipeline, as a list (a long script builds all its commands for it: walk commands() instead)."""
        walk = self._walk()
        return walk if isinstance(walk, list) else list(walk)

    def extend(self, other: Script) -> None:
        """Run `other` after this script (a heredoc body fed to the RUN's shell)."""
        if self._kept is not None:
            self._parts = [self._kept]
        self._parts.extend([other._kept] if other._kept is not None else other._parts)
        self._kept = None
        self._long = self._long or other._long

    def commands(self) -> Iterator[Command]:
        """Every command in order, nested ones (sh -c, $(...)) right after the command holding them."""
        for pipe in self._walk():
            for cmd in pipe:
                yield cmd
                for sub in cmd.nested:
                    yield from sub.commands()

    def all_pipelines(self) -> Iterator[list[Command]]:
        for pipe in self._walk():
            yield pipe
            for cmd in pipe:
                for sub in cmd.nested:
                    yield from sub.all_pipelines()

    def visit(self, pipeline: Callable[[list[Command]], None], command: Callable[[Command], None]) -> None:
        """One walk for both views: pipeline() gets every pipeline in all_pipelines() order and command() every
        command in commands() order (a nested script's pipelines and commands come right after its command)."""
        for pipe in self._walk():
            pipeline(pipe)
            for cmd in pipe:
                command(cmd)
                for sub in cmd.nested:
                    sub.visit(pipeline, command)

    def check(self) -> None:
        """Build every command, nested scripts included, in the order a full split meets them, so that a
        ShellSyntaxError deep inside (sh -c "...'") is raised now, not while a rule walks the script."""
        for _ in self._walk(check=True):
            pass

    def _walk(self, check: bool = False) -> Iterable[list[Command]]:
        return self._kept if self._kept is not None else self._build(check)

    def _build(self, check: bool) -> Iterator[list[Command]]:
        kept: list[list[Command]] | None = None if self._long else []
        count = 0
        for part in self._parts:
            for pipe in part if isinstance(part, list) else _pipelines(part[0], part[1], check):
                if kept is not None:
                    count += len(pipe)
                    if count > KEEP_COMMANDS:
                        kept, self._long = None, True
                    else:
                        kept.append(pipe)
                yield pipe
        if kept is not None:  # a complete walk of a short script: keep its commands, drop its tokens
            self._kept, self._parts = kept, [kept]


class ShellSyntaxError(ValueError):
    """The text could not be split (an unterminated quote, usually), where shlex fails too."""


def _normalize(text: str) -> str:
    """Rewrite what shlex cannot see as one unit: `cmd` becomes $(cmd) (the same command substitution), and
    an arithmetic expansion $((...)) becomes the number it stands for, so neither is read as commands.

    Single-quoted text is left alone; escaped backticks stay literal."""
    if "`" not in text and "$((" not in text:
        return text
    out: list[str] = []
    i, n, quote = 0, len(text), ""
    while i < n:
        if quote == "'":  # copy up to and including the closing quote
            k = text.find("'", i)
            if k < 0:
                out.append(text[i:])
                break
            out.append(text[i : k + 1])
            quote = ""
            i = k + 1
            continue
        m = _NORMALIZE_SPECIAL.search(text, i)
        j = m.start() if m else n
        if j > i:  # ordinary characters: one slice
            out.append(text[i:j])
            i = j
            continue
        c = text[i]
        if c == "\\" and i + 1 < n:
            out.append(text[i : i + 2])
            i += 2
            continue
        if c == "'" and not quote:
            quote = "'"
        elif c == '"':
            quote = "" if quote == '"' else '"'
        if c == "$" and text.startswith("$((", i):
            depth, k = 0, i + 1
            while k < n:
                ch = text[k]
                depth += 1 if ch == "(" else -1 if ch == ")" else 0
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


#: The characters _normalize() must look at one by one; everything else is copied in slices.
_NORMALIZE_SPECIAL = re.compile(r"[\\'\"$`]")

#: One token, after any blanks: a run of operator characters, or a word (unquoted characters, "..." with
#: backslash escapes, '...', or \x). Matched at each position in turn (never searched), so a text that
#: cannot be split stops at its first unsplittable character in linear time.
_TOKEN = re.compile(
    r"""[ \t\r]*(?:
      ([;&|()<>\n]+)
    | ((?:[^ \t\r;&|()<>\n"'\\]+ | "[^"\\]*(?:\\.[^"\\]*)*" | '[^']*' | \\.)+)
    )""",
    re.X | re.S,
)
_DQ_ESCAPE = re.compile(r'\\([\\"])')
_PIECE = re.compile(r""""((?:[^"\\]|\\.)*)"|'([^']*)'|\\(.)|([^"'\\]+)""", re.S)


def tokenize(text: str) -> list[str]:
    """The tokens of `text`: words as str (quotes removed), operators as `Op`. Equal words are one object.

    The same tokens as shlex.shlex(posix=True, punctuation_chars=";&|()<>\\n", whitespace " \\t\\r",
    whitespace_split=True, no comments), in linear time. Quotes are removed as a POSIX shell removes them:
    '...' literally, "..." with \\\\ and \\" unescaped, \\x outside quotes is x. An unterminated quote or a
    trailing backslash is a ShellSyntaxError."""
    tokens: list[str] = []
    words: dict[str, str] = {}
    if '"' not in text and "'" not in text and "\\" not in text:
        _plain_tokens(text, tokens, words)
        return tokens
    append = tokens.append
    match = _TOKEN.match
    pos, n = 0, len(text)
    while pos < n:
        m = match(text, pos)
        if m is None:
            break
        pos = m.end()
        word = m.group(2)
        if word is None:
            tokens.extend(_operator_tokens(m.group(1)))
            continue
        if '"' in word or "'" in word or "\\" in word:
            word = _unquote(word)
        append(words.setdefault(word, word))
    if pos < n:
        rest = text[pos:].lstrip(" \t\r")
        if rest:  # what no token matches: an unterminated quote or escape
            trailing = len(rest) - len(rest.rstrip("\\"))
            if trailing % 2 and not (rest.startswith("'") and rest.count("'") == 1):
                raise ShellSyntaxError("No escaped character")  # the text ends inside an escape, as shlex says
            raise ShellSyntaxError("No closing quotation")
    return tokens


#: Text without quotes or backslashes: every token is a run of operator characters or of other characters.
_PLAIN = re.compile(r"[;&|()<>\n]+|[^ \t\r;&|()<>\n]+")
#: How much text one findall() call takes at a time (its list of matches is transient: bounded).
_CHUNK = 1 << 16


def _plain_tokens(text: str, tokens: list[str], words: dict[str, str]) -> None:
    """tokenize() for text without quotes or escapes: findall over chunks that end at a blank."""
    append, extend, same = tokens.append, tokens.extend, words.setdefault  # bound once: called per token
    pos, n = 0, len(text)
    while pos < n:
        end = n if n - pos <= _CHUNK else text.find(" ", pos + _CHUNK)
        end = n if end < 0 else end
        for tok in _PLAIN.findall(text, pos, end):
            if tok[0] in _PUNCT:
                extend(_operator_tokens(tok))
            else:
                append(same(tok, tok))
        pos = end


def split_tokens(text: str) -> list[tuple[str, bool]]:
    """(token, is_operator) for each token of `text` (see tokenize)."""
    return [(tok, tok.__class__ is Op) for tok in tokenize(text)]


@functools.lru_cache(maxsize=256)
def _operator_tokens(run: str) -> tuple[Op, ...]:
    """The operators of a punctuation run (few distinct runs occur: cached)."""
    return tuple(_OP[op] for op in _split_operators(run))


def _unquote(word: str) -> str:
    first = word[0]
    if first in "\"'" and word[-1] == first and len(word) > 1 and first not in word[1:-1] and "\\" not in word:
        return word[1:-1]  # one quoted string ("x y", 'x y'), the common case
    out = []
    for m in _PIECE.finditer(word):
        group = m.lastindex
        out.append(_DQ_ESCAPE.sub(r"\1", m.group(1)) if group == 1 else m.group(group or 4))
    return "".join(out)


#: Deepest nesting of $(...), <(...) and sh -c scripts that is parsed; deeper code is taken as words, so a
#: pathological line costs linear time and no recursion.
MAX_NESTING = 8


def parse_script(text: str, depth: int = 0) -> Script:
    """Split shell text into a Script; raise ShellSyntaxError if it, or a script nested in it, cannot be split."""
    script = _script(text, depth)
    script.check()
    return script


def _script(text: str, depth: int) -> Script:
    """The Script of `text`, tokenized now (a ShellSyntaxError of its own is raised here), built when walked."""
    return Script.from_tokens(_tokens(text) if len(text) <= _SHORT_TEXT else tokenize(_normalize(text)), depth)


#: Texts up to this length are tokenized once however many RUNs hold them (at most _TOKEN_CACHE of them are kept).
_SHORT_TEXT = 4096
_TOKEN_CACHE = 256


@functools.lru_cache(maxsize=_TOKEN_CACHE)
def _tokens(text: str) -> list[str]:
    """tokenize(_normalize(text)) of a short text, shared: a Dockerfile repeats its commands (apt-get update, pip
    install -r requirements.txt, the same RUN in every stage). Scripts only read their tokens, never change them."""
    return tokenize(_normalize(text))


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


def _matching(tokens: list[str], i: int) -> int:
    """Index just after the ')' that closes a '(' / '<(' / '$(' opened before tokens[i]."""
    depth = 1
    n = len(tokens)
    while i < n:
        tok = tokens[i]
        if tok.__class__ is Op:
            if tok is _OPEN or tok in _PROCESS:
                depth += 1
            elif tok is _CLOSE:
                depth -= 1
                if depth == 0:
                    return i + 1
        i += 1
    return i


def _nested(script: Script, check: bool) -> Script:
    if check:
        script.check()
    return script


def _pipelines(tokens: list[str], depth: int, check: bool) -> Iterator[list[Command]]:
    """The pipelines of a token list, one at a time. With `check`, nested scripts are built as they are met."""
    pipe: list[Command] = []
    words: list[str] = []
    nested: list[Script] = []
    redirect = False
    deeper = depth < MAX_NESTING
    i, n = 0, len(tokens)
    while i < n:
        tok = tokens[i]
        if tok.__class__ is not Op:
            if redirect:
                redirect = False
            elif not deeper or "$" not in tok:  # most words: nothing nested in them
                words.append(tok)
            else:
                i = _substituting(tokens, i, words, nested, depth, check)
                continue
            i += 1
            continue
        if deeper and tok in _PROCESS:
            end = _matching(tokens, i + 1)
            nested.append(_nested(Script.from_tokens(tokens[i + 1 : end - 1], depth + 1), check))
            words.append(sys.intern(tok + "…)"))
            i = end
            continue
        if tok in _REDIRECTS:
            if words and words[-1].isdigit() and len(words[-1]) <= 2:
                words.pop()  # the file descriptor of 2>&1
            redirect = True
        elif tok in _PIPES:
            if words or nested:
                pipe.append(_command(words, nested, depth, check))
                words, nested = [], []
        else:  # separators and subshell parentheses
            if words or nested:
                pipe.append(_command(words, nested, depth, check))
                words, nested = [], []
            if pipe:
                yield pipe
                pipe = []
        i += 1
    if words or nested:
        pipe.append(_command(words, nested, depth, check))
    if pipe:
        yield pipe


def _substituting(tokens: list[str], i: int, words: list[str], nested: list[Script], depth: int, check: bool) -> int:
    """A word with a `$` in it (tokens[i]): added to `words`, and the scripts of its command substitutions to
    `nested`, a `$(` split off into tokens of its own (up to its `)`) or one inside a quoted word. The index of
    the token after it."""
    tok, n = tokens[i], len(tokens)
    if tok.endswith("$") and i + 1 < n and tokens[i + 1] is _OPEN:
        end = _matching(tokens, i + 2)
        nested.append(_nested(Script.from_tokens(tokens[i + 2 : end - 1], depth + 1), check))
        words.append(sys.intern(tok + "(…)"))  # one object however many $(...) a line has
        return end
    words.append(tok)
    if "$(" in tok:
        nested.extend(_nested(_script(sub, depth + 1), check) for sub in _substitutions(tok))
    return i + 1


def _substitutions(word: str) -> list[str]:
    """The texts of $(...) inside one (quoted) word. Backticks were turned into $(...) before splitting
    (_normalize); one left in a word was quoted literally ('`...`' or \\`)."""
    if "$(" not in word:
        return []
    out: list[str] = []
    i, n = 0, len(word)
    while True:
        i = word.find("$(", i)
        if i < 0:
            return out
        if word.startswith("$((", i):
            i += 1
            continue
        depth, k = 1, i + 2
        while k < n and depth:
            ch = word[k]
            depth += 1 if ch == "(" else -1 if ch == ")" else 0
            k += 1
        out.append(word[i + 2 : k - 1])
        i = k


#: Commands that run the command after them (_unwrap takes them and their options off).
_WRAPPERS = frozenset({"sudo", "doas", "env", "nohup", "exec", "command", "time", "stdbuf", "nice", "xargs"})
_SUDO_VALUE = frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T"})
_XARGS_VALUE = frozenset({"-n", "-I", "-P", "-d", "-L", "-s", "-E", "-a"})


def _command(words: list[str], nested: list[Script], depth: int, check: bool = False) -> Command:
    """The command of a word list (which it takes over: the caller starts a new list)."""
    assigns: dict[str, str] = {}
    start, n = 0, len(words)
    while start < n:
        word = words[start]
        if "=" in word and _ASSIGNMENT.match(word):
            key, _, value = word.partition("=")
            assigns[key] = value
        elif word not in _PREFIX_WORDS:
            break
        start += 1
    if start < n and words[start].rpartition("/")[2] in _WRAPPERS:
        start = _unwrap(words, start, assigns)
    argv = words[start:] if start else words
    if argv and argv[0] in _SKIP_COMMANDS:
        argv = []
    cmd = Command(argv, assigns, nested)
    name = cmd.name
    if name == "export":
        for word in argv[1:]:
            if _ASSIGNMENT.match(word):
                key, _, value = word.partition("=")
                cmd.assigns[key] = value
    script = _inline_script(cmd) if name == "eval" or name in SHELLS else None
    if script is not None and depth < MAX_NESTING:
        sub = _nested(_script(script, depth + 1), check)
        cmd.nested.append(sub)
        cmd.via_c.append(sub)
    return cmd


def _unwrap(argv: list[str], start: int, assigns: dict[str, str]) -> int:
    """Where the command starts after sudo/env/nohup/nice/exec/command/xargs and their options from argv[start];
    env's NAME=VALUE become assigns."""
    n = len(argv)
    while start < n:
        head = argv[start].rpartition("/")[2]
        i = start + 1
        if head in ("sudo", "doas"):
            while i < n and argv[i].startswith("-"):
                i += 2 if argv[i] in _SUDO_VALUE else 1
        elif head == "env":
            while i < n and (argv[i].startswith("-") or _ASSIGNMENT.match(argv[i])):
                if _ASSIGNMENT.match(argv[i]):
                    key, _, value = argv[i].partition("=")
                    assigns[key] = value
                    i += 1
                else:
                    i += 2 if argv[i] in ("-u", "--unset", "-C", "--chdir") else 1
        elif head in ("nohup", "exec", "command", "time", "stdbuf"):
            while i < n and argv[i].startswith("-"):
                i += 1
        elif head == "nice":
            i = start + 3 if n - start > 2 and argv[start + 1] == "-n" else start + 1
        elif head == "xargs":
            while i < n and argv[i].startswith("-"):
                i += 2 if argv[i] in _XARGS_VALUE else 1
        else:
            break
        start = min(i, n)
    return start


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


@dataclass(slots=True)
class RunScript(Value):
    """The shell view of one RUN: its script, heredoc bodies, or why it could not be split. ``texts``: the
    command text after substitution, plus heredoc bodies (for snapshot URLs)."""

    script: Script
    texts: list[str]
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
            leading = next((c for c in script.commands() if c.argv), None)
            if leading is None or leading.is_shell():
                for doc in ins.heredocs:
                    body = expand(doc.body, ins.scope, keep_quotes=True).value
                    script.extend(parse_script(body))
    except ShellSyntaxError as exc:
        return RunScript(Script(), texts, str(exc))
    return RunScript(script, texts)
