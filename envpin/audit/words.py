"""Build-variable substitution and word splitting as the Dockerfile frontend does them: $VAR, ${VAR}, the
${VAR:-x} family with quotes and the escape character, and the words of an instruction's arguments.

Split out of the parser (which reads lines, instructions and stages) so each stays a size one can read; the
parser re-exports these names. Nothing here knows about instructions or rules.
"""

from __future__ import annotations

import re
from collections import namedtuple
from collections.abc import Iterator, Mapping, Sequence

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BRACED_NAME_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


class Var(namedtuple("Var", "name value line kind unresolved", defaults=((),))):
    """A build variable: ``value`` None means declared without a value (``ARG NAME``); ``kind`` is ARG, ENV,
    build-arg or builtin; ``unresolved`` the variables its value names that nothing declared. A named tuple, not a
    frozen record: one is made per ARG/ENV pair, and a named tuple is the quickest immutable value to make."""

    __slots__ = ()
    name: str
    value: str | None
    line: int
    kind: str
    unresolved: tuple[str, ...]


class Expansion(namedtuple("Expansion", "value unresolved")):
    """What expand() gives (a named tuple: one is made per word and per RUN)."""

    __slots__ = ()
    value: str
    unresolved: tuple[str, ...]


# -- variable substitution ---------------------------------------------------------------------------
#: The characters expand() must look at one by one (quotes, the escape, $ and #), per escape character.
_SPECIAL = {esc: re.compile("[" + re.escape("'\"$#" + esc) + "]") for esc in ("\\", "`")}


def expand(
    raw: str,
    scope: Mapping[str, Var],
    *,
    escape: str = "\\",
    keep_quotes: bool = False,
    closed: bool = False,
    strict_size: bool = False,
) -> Expansion:
    """Substitute $VAR, ${VAR}, ${VAR:-x}, ${VAR-x}, ${VAR:+x}, ${VAR+x} the way the builder does.

    ``keep_quotes`` keeps quotes and backslashes (and drops ``#`` comments) so that shell text can be
    split by shlex afterwards; otherwise quotes are removed as for ENV/ARG/FROM words. ``closed`` says
    every variable is known (FROM lines: an undeclared name is empty); elsewhere an undeclared name may
    come from the base image, so the reference is kept as written and reported as unresolved.

    Substitution may add at most MAX_EXPANSION characters to `raw` (ARGs that double each other grow
    exponentially): beyond that ``strict_size`` raises ExpansionTooLong (a ValueError), otherwise the text is
    kept as written.
    """
    try:
        return _expand(raw, scope, escape, keep_quotes, closed, 0)
    except ExpansionTooLong:
        if strict_size:
            raise
        return Expansion(raw, ())


#: How many characters substitution may add to one word, value or line (64 KiB of ASCII): real values are
#: a few hundred characters, and a RUN line is expanded again by every rule that reads it.
MAX_EXPANSION = 1 << 16


class ExpansionTooLong(ValueError):
    """A substitution that would add more than MAX_EXPANSION characters."""

    def __init__(self) -> None:
        super().__init__(f"variable substitution makes it longer than {MAX_EXPANSION:,} characters")


#: How deep ${A:-${B:-…}} defaults and alternatives are expanded; a reference nested deeper is kept as written
#: and reported as unresolved (a real Dockerfile nests two or three; without a bound a crafted line exhausts the
#: stack).
MAX_SUBSTITUTION_NESTING = 32


class _Braces:
    """Where each '{' of one text is closed, found in one pass the first time it is asked: counting braces from
    every '${' separately costs quadratic time on a line of many unclosed ones."""

    __slots__ = ("_ends", "_raw")

    def __init__(self, raw: str) -> None:
        self._raw = raw
        self._ends: dict[int, int] | None = None

    def end(self, i: int) -> int:
        """The index just past the '}' that closes the '{' at i (the builder counts braces, nothing else), or -1."""
        if self._ends is None:
            ends: dict[int, int] = {}
            open_at: list[int] = []
            for m in _BRACE_RE.finditer(self._raw):
                if m.group() == "{":
                    open_at.append(m.start())
                elif open_at:
                    ends[open_at.pop()] = m.end()
            self._ends = ends
        return self._ends.get(i, -1)


_BRACE_RE = re.compile(r"[{}]")


def _expand(raw: str, scope: Mapping[str, Var], escape: str, keep_quotes: bool, closed: bool, level: int) -> Expansion:
    """expand() at a nesting level (0 for a word, one more inside each default or alternative)."""
    special = _SPECIAL[escape].search(raw)
    if special is None:  # nothing to substitute or unquote (most words)
        return Expansion(raw, ())
    if keep_quotes:
        return _expand_verbatim(raw, special.start(), scope, escape, closed, level)
    braces = _Braces(raw)
    i, n = special.start(), len(raw)
    out: list[str] = [raw[:i]] if i else []
    unresolved: list[str] = []
    quote: str | None = None
    grown = 0
    while i < n:
        c = raw[i]
        if c == escape and quote != "'":
            if i + 1 >= n:
                out.append(c)
                i += 1
                continue
            nxt = raw[i + 1]
            if keep_quotes or (quote == '"' and nxt not in ('"', "$", escape)):
                out.append(c + nxt)
            else:
                out.append(nxt)
            i += 2
            continue
        if c in "'\"" and (quote is None or quote == c):
            quote = c if quote is None else None
            if keep_quotes:
                out.append(c)
            i += 1
            continue
        if keep_quotes and c == "#" and quote is None and (i == 0 or raw[i - 1] in " \t\n;&|()"):
            end = raw.find("\n", i)
            i = n if end < 0 else end
            continue
        if c == "$" and quote != "'":
            text, used, names = _dollar(raw, i, scope, escape, keep_quotes, closed, braces, level)
            grown += len(text) - used
            if grown > MAX_EXPANSION:
                raise ExpansionTooLong
            out.append(text)
            unresolved.extend(names)
            i += used
            continue
        # An ordinary character: copy it and every ordinary one after it in one slice (linear time).
        m = _SPECIAL[escape].search(raw, i + 1)
        j = m.start() if m else n
        out.append(raw[i:j])
        i = j
    if quote is not None and not keep_quotes:
        raise ValueError(f"unterminated {quote} quote")
    return Expansion("".join(out), tuple(dict.fromkeys(unresolved)))


def _expand_verbatim(raw: str, i: int, scope: Mapping[str, Var], escape: str, closed: bool, level: int) -> Expansion:
    """expand(keep_quotes=True) from raw[i], the first special character: quotes and escapes stay as written,
    so only substitutions and comments change the text and everything between them is copied in one slice."""
    out: list[str] = []
    unresolved: list[str] = []
    quote: str | None = None
    search = _SPECIAL[escape].search
    n = len(raw)
    done = 0  # raw[done:i] goes to the output as it is
    braces = _Braces(raw)
    grown = 0
    while i < n:
        c = raw[i]
        if c == escape and quote != "'":
            i += 2
            continue
        if c in "'\"" and (quote is None or quote == c):
            quote = c if quote is None else None
            i += 1
            continue
        if c == "#" and quote is None and (i == 0 or raw[i - 1] in " \t\n;&|()"):
            out.append(raw[done:i])
            end = raw.find("\n", i)
            i = done = n if end < 0 else end
            continue
        if c == "$" and quote != "'":
            text, used, names = _dollar(raw, i, scope, escape, True, closed, braces, level)
            grown += len(text) - used
            if grown > MAX_EXPANSION:
                raise ExpansionTooLong
            out.append(raw[done:i])
            out.append(text)
            unresolved.extend(names)
            i = done = i + used
            continue
        m = search(raw, i + 1)
        i = m.start() if m else n
    out.append(raw[done:])
    return Expansion("".join(out), tuple(dict.fromkeys(unresolved)))


def _dollar(
    raw: str,
    i: int,
    scope: Mapping[str, Var],
    escape: str,
    keep_quotes: bool,
    closed: bool,
    braces: _Braces,
    level: int,
) -> tuple[str, int, Sequence[str]]:
    """Expand the reference starting at raw[i] == '$': (text, characters used, unresolved names)."""
    n = len(raw)
    if i + 1 >= n:
        return "$", 1, ()
    # $NAME and ${NAME}: no operator, so the value, or the reference itself when there is none
    m = _NAME_RE.match(raw, i + 1) if raw[i + 1] != "{" else _BRACED_NAME_RE.match(raw, i + 1)
    if m is not None:
        name = m.group(1) if m.lastindex else m.group()
        var = scope.get(name)
        if var is not None and var.value is not None:
            return var.value, m.end() - i, var.unresolved
        return raw[i : m.end()], m.end() - i, (name,)
    if raw[i + 1] != "{":
        return "$", 1, ()
    op: str | None = None
    word = ""
    k = braces.end(i + 1)
    if k < 0:
        return "$", 1, ()
    literal, inner = raw[i:k], raw[i + 2 : k - 1]
    m = _NAME_RE.match(inner)
    if not m:
        return literal, len(literal), ()
    name, rest = m.group(), inner[m.end() :]
    if rest:
        if rest[:2] in (":-", ":+", ":?"):
            op, word = rest[:2], rest[2:]
        elif rest[0] in "-+?":
            op, word = rest[0], rest[1:]
        else:  # ${VAR#pattern} and friends: not evaluated here
            return literal, len(literal), (name,)
    return _braced(literal, name, op, word, scope, escape, keep_quotes, closed, level)


def _braced(
    literal: str,
    name: str,
    op: str | None,
    word: str,
    scope: Mapping[str, Var],
    escape: str,
    keep_quotes: bool,
    closed: bool,
    level: int,
) -> tuple[str, int, Sequence[str]]:
    """`literal`, ${NAME} or ${NAME<op>word} with op one of :- - :+ + :? ?, as the builder evaluates it: (text,
    characters used, unresolved names). With `closed`, a name no ARG or ENV declares is known to be unset."""
    used = len(literal)
    var = scope.get(name)
    if var is None and closed:
        var = Var(name, None, 0, "undeclared")
    declared = var is not None
    value = var.value if var is not None else None
    own = var.unresolved if var is not None else ()
    if op is None:
        return (value, used, own) if value is not None else (literal, used, (name,))
    if op in (":-", "-"):
        if value is not None and (value != "" or op == "-"):
            return value, used, own
        if not declared:
            return literal, used, (name,)
    elif op in (":+", "+"):
        if value is None or (value == "" and op != "+"):
            return ("", used, ()) if declared else (literal, used, (name,))
    else:
        return (value, used, own) if value is not None and (value != "" or op == "?") else (literal, used, (name,))
    if level >= MAX_SUBSTITUTION_NESTING:
        return literal, used, (name,)
    e = _expand(word, scope, escape, keep_quotes, closed, level + 1)  # the default or alternative
    return e.value, used, e.unresolved


# -- words -------------------------------------------------------------------------------------------
def _word_patterns(esc: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """(one word, blanks or one word) for an escape character: unquoted characters, the escape and the character
    after it (or alone at the very end), "..." with escapes, '...' literally."""
    e = re.escape(esc)
    word = rf"""(?:[^ \t\r\n'"{e}]+|{e}.|{e}\Z|"(?:[^"{e}]|{e}.)*"|'[^']*')+"""
    return re.compile(word, re.S), re.compile(rf"[ \t\r\n]+|({word})", re.S)


_WORDS = {esc: _word_patterns(esc) for esc in ("\\", "`")}
_PLAIN_WORD = re.compile(r"[^ \t\r\n]+")


def iter_words(text: str, escape: str = "\\", pos: int = 0) -> Iterator[tuple[str, int, int]]:
    """Whitespace-separated words of text[pos:] with quotes and escapes kept: (raw word, start, end), one at a
    time. A quote left open raises ValueError when the iteration reaches it."""
    match = _WORDS[escape][1].match
    n = len(text)
    while pos < n:
        m = match(text, pos)
        if m is None:  # only a quote that is never closed stops a word
            raise ValueError(f"unterminated {text[pos]} quote")
        if m.lastindex:
            yield m.group(1), pos, m.end()
        pos = m.end()


def split_words(text: str, escape: str = "\\") -> list[tuple[str, int, int]]:
    """Whitespace-separated words with quotes and escapes kept: (raw word, start, end)."""
    if '"' not in text and "'" not in text and escape not in text:  # no quotes or escapes: blanks split it
        return [(m.group(), m.start(), m.end()) for m in _PLAIN_WORD.finditer(text)]
    return list(iter_words(text, escape))


def count_words(text: str, escape: str) -> int:
    """len(split_words(text, escape)), without the list (a COPY of many files)."""
    if '"' not in text and "'" not in text and escape not in text:
        return sum(1 for _ in _PLAIN_WORD.finditer(text))
    return sum(1 for _ in iter_words(text, escape))
