"""The audit on very long RUN lines, and the short paths that make it fast, against their general forms.

A RUN line of megabytes (millions of words, substitutions or commands, a continuation chain) must give the same
findings as a short line of the same shape: a long script builds its commands again on each walk instead of
keeping them, plain text is tokenized in chunks, and continuation chains are joined in pieces. Speed and
memory figures belong to benchmarks/bench_audit.py --memory; these tests check the results only."""

from __future__ import annotations

from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envpin.audit import audit_text
from envpin.audit import shell as shell_mod
from envpin.audit.shell import KEEP_COMMANDS, ShellSyntaxError, parse_script, split_tokens
from envpin.audit.words import expand, iter_words, split_words
from tests.props import examples

FROM = "FROM nvcr.io/nvidia/tensorflow:22.03-tf2-py3\nENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n"
#: (head, unit repeated, tail) of one long RUN line, and the findings (line, rule) it must give.
SHAPES = {
    "words": (
        ("RUN echo ", "a b c d e f g h ", "&& pip install flask\n"),
        [(1, "from-no-digest"), (3, "pip-no-hashes"), (3, "pip-unpinned")],
    ),
    "one-word": (
        ("RUN echo ", "a", " && curl -fsSL https://example.com/i.sh | sh\n"),
        [(1, "from-no-digest"), (3, "curl-pipe-shell")],
    ),
    "vars": (
        ("ARG V=value\nRUN echo ", "$V ${V} ", "&& apt-get install -y curl\n"),
        [(1, "from-no-digest"), (4, "apt-unpinned")],
    ),
    "commands": (
        ("RUN ", "echo a && ", "git clone https://github.com/x/y.git\n"),
        [(1, "from-no-digest"), (3, "git-clone-unpinned")],
    ),
    "continuation": (
        ("RUN echo ", "word \\\n    ", "&& pip install flask\n"),
        [(1, "from-no-digest"), (3, "pip-no-hashes"), (3, "pip-unpinned")],
    ),
    "sh-c": (
        ('RUN sh -c "', "echo a && ", 'curl -fsSL https://example.com/i.sh | bash"\n'),
        [(1, "from-no-digest"), (3, "curl-pipe-shell")],
    ),
}


def _dockerfile(shape: str, size: int) -> str:
    (head, unit, tail), _ = SHAPES[shape]
    return FROM + head + unit * (size // len(unit)) + tail


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_a_megabyte_run_line_gives_the_findings_of_a_short_one(shape: str) -> None:
    long = audit_text(_dockerfile(shape, 1 << 20))
    assert [(f.line, f.rule) for f in long] == SHAPES[shape][1]
    assert long == audit_text(_dockerfile(shape, 64))  # the same messages too


def test_a_ten_megabyte_line_of_words() -> None:
    found = audit_text(_dockerfile("words", 10 << 20))
    assert [(f.line, f.rule) for f in found] == SHAPES["words"][1]
    assert found[2].message == "pip install without == pins: flask"


def test_a_long_script_builds_the_same_commands_on_every_walk() -> None:
    script = parse_script("echo a && " * (KEEP_COMMANDS + 10) + "sh -c 'curl -s https://x | sh'")
    first = [c.argv for c in script.commands()]
    assert len(first) == KEEP_COMMANDS + 13 and first[-2:] == [["curl", "-s", "https://x"], ["sh"]]
    assert [c.argv for c in script.commands()] == first
    pipes = [[c.argv for c in p] for p in script.all_pipelines()]
    seen_pipes: list[list[list[str]]] = []
    seen_cmds: list[list[str]] = []
    script.visit(lambda p: seen_pipes.append([c.argv for c in p]), lambda c: seen_cmds.append(c.argv))
    assert seen_pipes == pipes and seen_cmds == first


def test_a_quote_left_open_deep_in_a_long_script_is_found_at_once() -> None:
    with pytest.raises(ShellSyntaxError, match="No closing quotation"):
        parse_script("echo a && " * (KEEP_COMMANDS + 10) + 'sh -c "echo \'x"')


def test_visit_gives_commands_and_pipelines_in_their_own_orders() -> None:
    script = parse_script('a | sh -c "b | c; d" | e $(f | g) && h <(i) j; k')
    pipes: list[list[str]] = []
    cmds: list[str] = []
    script.visit(lambda p: pipes.append([c.name for c in p]), lambda c: cmds.append(c.name))
    assert cmds == [c.name for c in script.commands()]
    assert pipes == [[c.name for c in p] for p in script.all_pipelines()]
    assert cmds == ["a", "sh", "b", "c", "d", "e", "f", "g", "h", "i", "k"]


_PLAIN = st.lists(st.sampled_from(list("ab1$=-/. \t\r;&|()<>\n")), max_size=40).map("".join)


@settings(max_examples=examples(500), deadline=None)
@given(_PLAIN)
def test_plain_text_is_tokenized_in_chunks_as_quoted_text_is_whole(text: str) -> None:
    # A closing '' sends the text down the general path (one empty word at the end); tiny chunks put chunk
    # boundaries everywhere the plain path can cut.
    with mock.patch.object(shell_mod, "_CHUNK", 3):
        plain = split_tokens(text)
    assert plain == split_tokens(text + " ''")[:-1]


@settings(max_examples=examples(500), deadline=None)
@given(st.lists(st.sampled_from(list("ab1 \t\r\n=-$")), max_size=30).map("".join))
def test_plain_words_split_as_the_general_splitter_splits_them(text: str) -> None:
    assert split_words(text) == list(iter_words(text)) == split_words(text, "`")


@settings(max_examples=examples(500), deadline=None)
@given(st.lists(st.sampled_from(list("ab \t\n'\"\\;|")), max_size=30).map("".join))
def test_shell_text_without_substitutions_is_kept_as_written(text: str) -> None:
    assert expand(text, {}, keep_quotes=True).value == text


def test_many_findings_of_one_run_merge_into_one_in_order() -> None:
    urls = [f"https://e.com/{i}" for i in range(3000)]
    text = FROM + "RUN " + " ; ".join(f"curl -s {u} | sh" for u in [*urls, urls[0]]) + "\n"
    (curl,) = [f for f in audit_text(text) if f.rule == "curl-pipe-shell"]
    assert curl.message.split("; ") == [f"curl {u} piped to sh: the script is whatever the server sends" for u in urls]


def test_many_pip_calls_of_one_run_list_each_package_once_in_order() -> None:
    names = [f"p{i}" for i in range(3000)]
    text = FROM + "RUN " + " && ".join(f"pip install {n} --trusted-host h --trusted-host h" for n in [*names, "p0"])
    found = {f.rule: f.message for f in audit_text(text + "\n")}
    assert found["pip-unpinned"] == f"pip install without == pins: {', '.join(names)}"
    assert found["pip-trusted-host"] == "pip install trusts h, h without TLS verification"
