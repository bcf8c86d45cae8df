"""The audit's shell tokenizer against the standard library's shlex, property by property (hypothesis).

The tokenizer replaced shlex for speed; for every text it must give shlex's tokens and fail where shlex fails.
One deliberate difference: a quoted or escaped operator character ("|", \\;) is a word, as in a real shell,
where shlex's punctuation mode hands back the bare character and the old code took it for an operator."""

from __future__ import annotations

import shlex

from hypothesis import given, settings
from hypothesis import strategies as st

from envpin.audit.shell import _PUNCT, ShellSyntaxError, _split_operators, split_tokens
from tests.props import examples

ALPHABET = st.sampled_from(list("ab1 $(){}`\"'\\;&|<>\n\t=-/.*#~"))


def _shlex(text: str) -> list[str]:
    lex = shlex.shlex(text, posix=True, punctuation_chars=_PUNCT)
    lex.whitespace = " \t\r"
    lex.whitespace_split = True
    lex.commenters = ""
    out: list[str] = []
    for tok in lex:
        out.extend(_split_operators(tok) if tok and all(c in _PUNCT for c in tok) else [tok])
    return out


def _ours(text: str) -> list[str]:
    out: list[str] = []
    for tok, op in split_tokens(text):
        out.extend(_split_operators(tok) if not op and tok and all(c in _PUNCT for c in tok) else [tok])
    return out


@settings(max_examples=examples(3000), deadline=None)
@given(st.lists(ALPHABET, max_size=24).map("".join))
def test_same_tokens_and_same_failures_as_shlex(text: str) -> None:
    try:
        expected: list[str] | None = _shlex(text)
    except ValueError:
        expected = None
    try:
        got: list[str] | None = _ours(text)
    except ShellSyntaxError:
        got = None
    assert got == expected


def test_quoted_operators_are_words() -> None:
    assert split_tokens('echo "|" \\; a|b') == [
        ("echo", False),
        ("|", False),
        (";", False),
        ("a", False),
        ("|", True),
        ("b", False),
    ]
