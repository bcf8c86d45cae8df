"""envpin's table layout (envpin.views.plaintable.fit, drawn by envpin.views.tables): no word is ever cut, a
column that cannot be shown whole is left out and named, sources move under the table, and the plain layout is
byte for byte what rich draws with the same widths."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st

from envpin.views import plaintable, tables
from envpin.views.console import Plain

WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789._-=", min_size=1, max_size=14)
CELL = st.lists(WORD, min_size=0, max_size=6).map(" ".join)


#: headers, rows, console width, the columns of prose
Case = tuple[list[str], list[list[str]], int, frozenset[int]]


@st.composite
def _tables(draw: st.DrawFn) -> Case:
    columns = draw(st.integers(1, 5))
    headers = draw(st.lists(WORD, min_size=columns, max_size=columns))
    rows = draw(st.lists(st.lists(CELL, min_size=columns, max_size=columns), min_size=1, max_size=5))
    width = draw(st.integers(20, 140))
    fold = frozenset(draw(st.sets(st.integers(1, columns - 1)))) if columns > 1 else frozenset()
    return headers, rows, width, fold


def _rich(title: str, headers: list[str], rows: list[list[str]], widths: list[int], fold: frozenset[int]) -> str:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    buf = io.StringIO()
    console = Console(file=buf, width=sum(widths) + len(widths) + 1, color_system=None, highlight=False)
    t = Table(title=title)
    for k, (h, w) in enumerate(zip(headers, widths, strict=True)):
        t.add_column(h, width=w - 2, no_wrap=k == 0, overflow="fold" if k in fold else "ellipsis")
    for row in rows:
        t.add_row(*(Text(c) for c in row))
    console.print(t)
    return buf.getvalue()


@settings(max_examples=100, deadline=None)
@given(_tables())
def test_no_word_is_cut_and_rich_draws_the_same_bytes(case: Case) -> None:
    headers, rows, width, fold = case
    widths, left_out = plaintable.fit(headers, rows, width, fold=fold)
    kept = [i for i in range(len(headers)) if i not in left_out]
    assert 0 not in left_out and len(widths) == len(kept)
    assert sum(widths) + len(widths) + 1 <= width or kept == [0]
    for w, i in zip(widths, kept, strict=True):
        longest = max(len(word) for c in (headers[i], *(r[i] for r in rows)) for word in (c.split() or [""]))
        if i == 0:  # no-wrap: the whole cell on one line
            assert w - 2 >= max(len(c) for c in (headers[0], *(r[0] for r in rows)))
        elif i not in fold:
            assert w - 2 >= longest
        else:
            assert w - 2 >= min(longest, plaintable.PROSE - 2)
    if left_out:  # the table could not be narrower: one more column would not have fitted
        assert plaintable.least(headers, rows, fold=fold) > width
    shown = [headers[i] for i in kept]
    cells = [[r[i] for i in kept] for r in rows]
    folded = frozenset(k for k, i in enumerate(kept) if i in fold)
    plain = plaintable.render("", shown, cells, widths, no_wrap=frozenset({0}), fold=folded)
    assert plain is not None
    assert plain == _rich("", shown, cells, widths, folded)
    if not folded:
        drawn = plain.split()
        for row in cells:
            for c in row:
                for word in c.split():
                    assert any(word in piece for piece in drawn), word


def test_a_column_that_cannot_be_whole_is_left_out_and_named(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COLUMNS", "40")
    rows = [["19.01-py3", "10.0.130", "7.4.2", "2.3.7"], ["24.12-tf2-py3", "12.6.3", "9.6.0.74", "2.23.4"]]
    tables.show(Plain(False), "t", ["tag", "cuda", "cudnn", "nccl"], rows)
    out = capsys.readouterr().out
    assert "10.0.130" in out and "…" not in out
    assert out.splitlines()[-1] == (
        "1 column left out at 40 columns, to cut no value: 'nccl'; COLUMNS=48 or a wider terminal shows it"
    )


def test_links_move_under_the_table_whole_and_once(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COLUMNS", "60")
    url = "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/util/use_cudnn.cc"
    rows = [["A", "1", f"why ({url})"], ["B", "2", f"also ({url}; versions: https://example.org/x.)"]]
    tables.show(Plain(False), "env", ["variable", "value", "why"], rows, fold=frozenset({2}))
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2:] == [f"source 1: {url}", "source 2: https://example.org/x"]
    assert not any("https://" in line for line in lines[:-2])
    cells = " ".join(line.strip("│ ") for line in lines[:-2])
    assert "why (source 1)" in cells and "versions: source 2.)" in cells
