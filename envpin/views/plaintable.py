"""A table laid out as rich lays out envpin's tables (`rich.table.Table(title=...)`, first column no-wrap, the
default heavy-head box, cell padding 1), for a stream that is not a terminal, without loading rich.

Why a second layout exists (the one re-implementation of rich that envpin keeps, see docs/cli.md "Start-up"):
rich takes about 0.25 s CPU to lay out the catalog's table, this about 2 ms. `envpin catalog` into a pipe cost
3.66x `python -c "import typer"` drawn by rich against 1.96x with this (benchmarks/bench_cli.py, same run),
and its start-up target is 1.3x. On a terminal rich draws every table.

Only text whose layout needs no Unicode width tables is taken: printable ASCII and the em dash (each one cell), no
markup brackets and no :emoji: codes; anything else returns None and rich draws it. The column widths come from
`fit` on both paths (rich gets them as fixed widths), so the two draw the same bytes: no word is ever cut (a
column is at least as wide as its longest word, a column of prose folds a longer word onto the next line; columns
that cannot fit are left out, and envpin.views.tables says so under the table), words wrap greedily as rich
wraps them. tests/golden/test_tables.py pins the bytes of
the catalog's and the recipe's tables at three widths.
"""

from __future__ import annotations

import itertools
import re

#: What is laid out here: printable ASCII without [ ] (rich markup), and the em dash.
_TAKEN = re.compile(r"[\x20-\x5a\x5c\x5e-\x7e—]*")
_EMOJI = re.compile(r":\S*?:")
_WORD = re.compile(r"\s*\S+\s*")
_TRAILING = re.compile(r"\s+$")


def fit(
    headers: list[str],
    rows: list[list[str]],
    width: int,
    *,
    no_wrap: frozenset[int] = frozenset({0}),
    fold: frozenset[int] = frozenset(),
) -> tuple[list[int], list[int]]:
    """Column widths (padding included) for a table on a console `width` wide in which no word is cut: each
    column at least as wide as its longest word (a no-wrap column as its longest cell), the room left given to
    the columns that wrap, those that lack least first. Columns that still do not fit are left out from the
    right, never the first. Returns (the kept columns' widths, the indexes of the columns left out)."""
    columns = list(zip(headers, *rows, strict=True))
    natural, floor = _natural(columns), _floor(columns, no_wrap, fold)
    kept = list(range(len(columns)))
    while len(kept) > 1 and sum(floor[i] for i in kept) + len(kept) + 1 > width:
        kept.pop()
    room = width - len(kept) - 1
    need = [natural[i] - floor[i] for i in kept]
    extra = room - sum(floor[i] for i in kept)
    if extra >= sum(need):
        return [natural[i] for i in kept], [i for i in range(len(columns)) if i not in kept]
    # The columns that lack least get all they lack first (the leftmost on a tie), the next one what is left:
    # as few columns wrap as the room allows.
    shares, left = [0] * len(need), max(extra, 0)
    for k in sorted(range(len(need)), key=lambda k: (need[k], k)):
        shares[k] = min(need[k], left)
        left -= shares[k]
    widths = [floor[i] + share for i, share in zip(kept, shares, strict=True)]
    return widths, [i for i in range(len(columns)) if i not in kept]


def least(
    headers: list[str],
    rows: list[list[str]],
    *,
    no_wrap: frozenset[int] = frozenset({0}),
    fold: frozenset[int] = frozenset(),
) -> int:
    """The narrowest console on which `fit` leaves no column out."""
    floor = _floor(list(zip(headers, *rows, strict=True)), no_wrap, fold)
    return sum(floor) + len(floor) + 1


def _natural(columns: list[tuple[str, ...]]) -> list[int]:
    """Each column's width with padding when nothing wraps: its longest cell."""
    return [max(len(c) for c in column) + 2 for column in columns]


#: The narrowest a column of prose (`fold`) gets, padding included, before another column is left out.
PROSE = 22


def _floor(columns: list[tuple[str, ...]], no_wrap: frozenset[int], fold: frozenset[int]) -> list[int]:
    """Each column's narrowest width with padding that cuts no word (a no-wrap column: its longest cell); a
    column of prose folds a longer word onto the next line and goes no narrower than PROSE."""
    natural = _natural(columns)
    floor = [
        natural[i] if i in no_wrap else max((len(w) for c in column for w in c.split()), default=0) + 2
        for i, column in enumerate(columns)
    ]
    return [min(f, PROSE) if i in fold else f for i, f in enumerate(floor)]


def render(
    title: str,
    headers: list[str],
    rows: list[list[str]],
    widths: list[int],
    *,
    no_wrap: frozenset[int] = frozenset(),
    fold: frozenset[int] = frozenset(),
) -> str | None:
    """The table with these column widths (from `fit`) as rich draws it with fixed column widths on a stream
    that is not a terminal; None when this module does not take the text (rich then draws it)."""
    texts = [title, *headers, *(c for row in rows for c in row)]
    if not rows or any(not _TAKEN.fullmatch(t) or _EMOJI.search(t) for t in texts):
        return None
    wrap = [i not in no_wrap for i in range(len(headers))]
    total = sum(widths) + len(widths) + 1
    heading = title.rstrip()
    if len(title) > total:
        return None
    out = []
    if title:
        left = (total - len(heading)) // 2
        out.append(" " * left + heading + " " * (total - len(heading) - left))
    out.append(_rule("┏", "━", "┳", "┓", widths))
    out += _row(headers, widths, "┃", wrap, fold, bottom=True)
    out.append(_rule("┡", "━", "╇", "┩", widths))
    for row in rows:
        out += _row(row, widths, "│", wrap, fold)
    out.append(_rule("└", "─", "┴", "┘", widths))
    return "\n".join(out) + "\n"


def _rule(left: str, fill: str, mid: str, right: str, widths: list[int]) -> str:
    return left + mid.join(fill * w for w in widths) + right


def _row(
    cells: list[str], widths: list[int], edge: str, wrap: list[bool], fold: frozenset[int], bottom: bool = False
) -> list[str]:
    """The lines of one row: each cell wrapped to its width (a no-wrap cell never); a shorter cell is padded
    below, or above in the header (`bottom`), as rich aligns them."""
    wrapped = [
        _cell(c, w - 2, no_wrap=not wrap[i], fold=i in fold) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
    ]
    height = max(len(lines) for lines in wrapped)
    shaped = []
    for lines, w in zip(wrapped, widths, strict=True):
        blank = [" " * (w - 2)] * (height - len(lines))
        shaped.append(blank + lines if bottom else lines + blank)
    return [edge + edge.join(f" {lines[k]} " for lines in shaped) + edge for k in range(height)]


def _cell(text: str, width: int, no_wrap: bool, fold: bool = False) -> list[str]:
    """A cell's lines, each exactly `width` wide."""
    pieces = [text] if no_wrap else _divide(text, width, fold)
    out = []
    for piece in pieces:
        if not no_wrap and len(piece) > width:
            trailing = _TRAILING.search(piece)
            if trailing:
                piece = piece[: len(piece) - min(len(trailing.group(0)), len(piece) - width)]
        if len(piece) > width:
            piece = piece[:width] if fold else piece[: width - 1] + "…"
        out.append(piece.ljust(width))
    return out


def _divide(text: str, width: int, fold: bool = False) -> list[str]:
    """Greedy word wrap: a word goes to the next line when it does not fit; one longer than a line stands alone,
    or with `fold` is cut into lines of `width` (its trailing spaces counted, as rich counts them)."""
    breaks, offset = [], 0
    for m in _WORD.finditer(text):
        start, word = m.start(), m.group(0)
        size = len(word.rstrip())
        if width - offset >= size:
            offset += len(word)
        elif size > width and fold:
            for k in range(0, len(word), width):
                if start + k:
                    breaks.append(start + k)
                offset = len(word) - k
        elif size > width:
            if start:
                breaks.append(start)
            offset = len(word)
        elif offset and start:
            breaks.append(start)
            offset = len(word)
    bounds = [0, *breaks, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]
