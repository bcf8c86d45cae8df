"""A table laid out as rich lays out envpin's tables (`rich.table.Table(title=...)`, first column no-wrap, the
default heavy-head box, cell padding 1), for a stream that is not a terminal, without loading rich.

Why a second layout exists (the one re-implementation of rich that envpin keeps, see docs/cli.md "Start-up"):
rich takes about 0.25 s CPU to lay out the catalog's table, this about 2 ms. `envpin catalog` into a pipe cost
3.66x `python -c "import typer"` drawn by rich against 1.96x with this (benchmarks/bench_cli.py, same run),
and its start-up target is 1.3x. On a terminal rich draws every table.

Only text whose layout needs no Unicode width tables is taken: printable ASCII and the em dash (each one cell), no
markup brackets and no :emoji: codes; anything else returns None and rich renders it. The layout follows rich 13-15:
each column as wide as its widest cell, and when the table is wider than the console, the widest wrappable columns
narrowed first (then all evenly), words wrapped greedily and a word longer than its cell cut with "…", or in a
column of overflow="fold" folded onto the next lines. tests/golden/test_tables.py pins the bytes of the catalog's
and the recipe's tables at three widths.
"""

from __future__ import annotations

import itertools
import re

#: What is laid out here: printable ASCII without [ ] (rich markup), and the em dash.
_TAKEN = re.compile(r"[\x20-\x5a\x5c\x5e-\x7e—]*")
_EMOJI = re.compile(r":\S*?:")
_WORD = re.compile(r"\s*\S+\s*")
_TRAILING = re.compile(r"\s+$")


def render(
    title: str,
    headers: list[str],
    rows: list[list[str]],
    width: int,
    *,
    first_no_wrap: bool = True,
    fold: frozenset[int] = frozenset(),
) -> str | None:
    """The table as rich prints it on a console `width` columns wide that is not a terminal; None when this
    module does not take the text or the layout (rich then renders it). The first column is no_wrap=True
    unless `first_no_wrap` is False; the columns numbered in `fold` have overflow="fold" (else "ellipsis")."""
    texts = [title, *headers, *(c for row in rows for c in row)]
    if not rows or any(not _TAKEN.fullmatch(t) or _EMOJI.search(t) for t in texts):
        return None
    wrap = [i > 0 or not first_no_wrap for i in range(len(headers))]
    widths = _widths(headers, rows, width - len(headers) - 1, wrap)
    if widths is None:
        return None
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


def _widths(headers: list[str], rows: list[list[str]], room: int, wrap: list[bool]) -> list[int] | None:
    """Each column's width with its padding, as rich's Table computes them for `room` cells (borders excluded)."""
    if room < 1:
        return None
    columns = list(zip(headers, *rows, strict=True))
    widths = [min(max(min(len(c) + 2, room) if c else 2 for c in column), room) for column in columns]
    if sum(widths) > room:
        widths = _collapse(widths, wrap, room)
        if sum(widths) > room:
            widths = _reduce(sum(widths) - room, [1] * len(widths), widths, widths)
        widths = [
            min(w, max(min(len(c), w - 2) + 2 if c else 2 for c in column)) if w >= 3 else w
            for w, column in zip(widths, columns, strict=True)
        ]
    return widths if all(w >= 3 for w in widths) else None


def _collapse(widths: list[int], wrapable: list[bool], room: int) -> list[int]:
    """Narrow the widest wrappable columns, step by step down to the next widest, until the table fits."""
    excess = sum(widths) - room
    while sum(widths) and excess > 0:
        widest = max(w for w, ok in zip(widths, wrapable, strict=True) if ok)
        second = max(w if ok and w != widest else 0 for w, ok in zip(widths, wrapable, strict=True))
        ratios = [1 if (w == widest and ok) else 0 for w, ok in zip(widths, wrapable, strict=True)]
        if not any(ratios) or widest == second:
            break
        widths = _reduce(excess, ratios, [min(excess, widest - second)] * len(widths), widths)
        excess = sum(widths) - room
    return widths


def _reduce(total: int, ratios: list[int], maximums: list[int], values: list[int]) -> list[int]:
    """Take `total` off `values` in proportion to `ratios`, at most `maximums` each, rounding as rich does."""
    ratios = [r if m else 0 for r, m in zip(ratios, maximums, strict=True)]
    left, share = total, sum(ratios)
    if not share:
        return values[:]
    out = []
    for r, m, v in zip(ratios, maximums, values, strict=True):
        if r and share > 0:
            taken = min(m, round(r * left / share))
            out.append(v - taken)
            left -= taken
            share -= r
        else:
            out.append(v)
    return out


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
