"""envpin's tables, on a terminal (rich) and off one (envpin.views.plaintable), laid out by one rule: no word
is cut. A link in a cell becomes "source N", written out whole under the table (a URL folded across lines can
be neither read nor clicked); columns that cannot be shown whole at the console's width are left out and named
under the table with the width that shows them (a value cut to "10.0…" reads as another value)."""

from __future__ import annotations

import re

from envpin.views.console import Plain, say, width_of

TYPE_CHECKING = False
if TYPE_CHECKING:
    from rich.console import Console

#: A link in a cell: up to white space or a closing parenthesis, less a trailing full stop, comma or semicolon.
_URL = re.compile(r"https?://[^\s)]*[^\s).,;]")


def show(
    console: Console | Plain,
    title: str,
    headers: list[str],
    rows: list[list[str]],
    *,
    no_wrap: frozenset[int] = frozenset({0}),
    fold: frozenset[int] = frozenset(),
) -> Console | Plain:
    """The table on `console`, its sources and any column left out under it; the columns in `no_wrap` keep each
    cell on one line, those in `fold` (prose) fold a word longer than the column onto the next line. Returns the
    console written to (rich's, when the text needed rich)."""
    from envpin.views import plaintable

    cited: dict[str, int] = {}

    def cite(m: re.Match[str]) -> str:
        return f"source {cited.setdefault(m.group(0), len(cited) + 1)}"

    rows = [[_URL.sub(cite, c) for c in row] for row in rows]
    width = width_of(console.file) if isinstance(console, Plain) else console.width
    if width is None:  # COLUMNS set to something rich reads its own way
        console = console.rich() if isinstance(console, Plain) else console
        width = console.width
    widths, left_out = plaintable.fit(headers, rows, width, no_wrap=no_wrap, fold=fold)
    kept = [i for i in range(len(headers)) if i not in left_out]
    shown, cells = [headers[i] for i in kept], [[row[i] for i in kept] for row in rows]
    one_line = frozenset(k for k, i in enumerate(kept) if i in no_wrap)
    folded = frozenset(k for k, i in enumerate(kept) if i in fold)
    text = (
        plaintable.render(title, shown, cells, widths, no_wrap=one_line, fold=folded)
        if isinstance(console, Plain)
        else None
    )
    if text is not None and isinstance(console, Plain):
        console.file.write(text)
        console.file.flush()
    else:
        from rich.table import Table
        from rich.text import Text

        console = console.rich() if isinstance(console, Plain) else console
        t = Table(title=title)
        for k, (header, w) in enumerate(zip(shown, widths, strict=True)):
            t.add_column(header, width=w - 2, no_wrap=k in one_line, overflow="fold" if k in folded else "ellipsis")
        for row in cells:
            t.add_row(*(Text(c) for c in row))
        console.print(t)
    for url, n in cited.items():
        say(console, f"source {n}: {url}")
    if left_out:
        names = ", ".join(f"'{headers[i]}'" for i in left_out)
        least = plaintable.least(headers, rows, no_wrap=no_wrap, fold=fold)
        say(
            console,
            f"{len(left_out)} column{'s' if len(left_out) > 1 else ''} left out at {width} columns, to cut no "
            f"value: {names}; COLUMNS={least} or a wider terminal shows {'them' if len(left_out) > 1 else 'it'}",
        )
    return console
