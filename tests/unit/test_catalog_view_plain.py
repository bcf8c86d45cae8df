"""The catalog table without rich (envpin.views.plaintable) is byte for byte what rich writes for it, and
where it cannot be, rich writes it."""

from __future__ import annotations

import io
import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table

from envpin import api
from envpin.views import catalog as view
from envpin.views import console, plaintable
from tests.conftest import run_envpin


def _rich(title: str, headers: list[str], rows: list[list[str]], width: int) -> str:
    """What envpin's rich path writes: its console settings on a stream that is not a terminal."""
    out = io.StringIO()
    t = Table(title=title)
    t.add_column(headers[0], no_wrap=True)
    for h in headers[1:]:
        t.add_column(h)
    for r in rows:
        t.add_row(*r)
    Console(file=out, highlight=False, width=width).print(t)
    return out.getvalue()


def _catalog_rows(**filters: object) -> tuple[str, list[str], list[list[str]]]:
    captured: dict[str, object] = {}

    def grab(title: str, headers: list[str], rows: list[list[str]], _console: object) -> None:
        captured.update(title=title, headers=headers, rows=rows)

    entries = api.catalog_entries(**filters)  # type: ignore[arg-type]
    original = view._print_table
    view._print_table = grab  # type: ignore[assignment]
    try:
        view.table(entries, console.Plain(False, quiet=True))
    finally:
        view._print_table = original
    return captured["title"], captured["headers"], captured["rows"]  # type: ignore[return-value]


@pytest.mark.parametrize("width", [40, 80, 100, 116, 117, 118, 119, 120, 121, 150, 200])
@pytest.mark.parametrize("filters", [{}, {"tf": "2.1"}, {"tf": "1.15"}, {"flavor": "tf2"}],
                         ids=["all", "tf2.1", "tf1.15", "tf2-flavor"])
def test_the_catalog_table_is_what_rich_writes(width: int, filters: dict[str, str]) -> None:
    title, headers, rows = _catalog_rows(**filters)
    plain = plaintable.render(title, headers, rows, width)
    if plain is not None:
        assert plain == _rich(title, headers, rows, width)
    if width >= 120 and not filters:
        assert plain is not None, "the whole catalog at the default width takes the plain path"


#: Mostly text the plain layout takes (words, spaces, long words, the em dash), sometimes what it leaves to rich.
CELL = st.builds(lambda ok, other, pick: other if pick == 0 else ok,
                 st.text(alphabet=st.sampled_from(list("abcXYZ019 .-()_/'—")), max_size=24),
                 st.text(alphabet=st.sampled_from(list("ab [ ]:smile:é中\t")), max_size=10), st.integers(0, 40))


@settings(max_examples=400, deadline=None)
@given(title=CELL, cols=st.integers(1, 6), data=st.data(), width=st.integers(8, 130))
def test_any_table_it_renders_is_what_rich_writes(title: str, cols: int, data: st.DataObject, width: int) -> None:
    headers = data.draw(st.lists(CELL, min_size=cols, max_size=cols))
    rows = data.draw(st.lists(st.lists(CELL, min_size=cols, max_size=cols), max_size=6))
    plain = plaintable.render(title, headers, rows, width)
    if plain is not None:
        assert plain == _rich(title, headers, rows, width)


@pytest.mark.parametrize("columns", [None, "80", "120", "200", "abc"])
def test_envpin_catalog_prints_what_rich_prints(columns: str | None) -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    got = run_envpin("catalog", env=env)
    assert got.code == 0, got.stderr
    title, headers, rows = _catalog_rows()
    width = int(columns) if columns and columns.isdigit() else 120
    table = got.stdout[:got.stdout.index("┘\n") + 2]
    if columns == "abc":  # rich decides the width itself: the rich path is taken
        return
    assert table == _rich(title, headers, rows, width)


@pytest.mark.parametrize(("name", "value"), [("COLUMNS", "²"), ("COLUMNS", "1²"), ("LINES", "³")])
def test_a_width_of_digits_int_cannot_read_is_ignored_as_rich_ignores_words(name: str, value: str) -> None:
    """'²' is a digit to str.isdigit, which rich checks before int(), so rich would fail on it: envpin treats it
    as rich treats COLUMNS=abc (ignored), on the lean path and through Typer alike."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    for args in (("catalog",), ("-q", "catalog"), ("recipe", "--ngc", "20.02-tf2-py3"), ("catalog", "show", "20.02")):
        expected = run_envpin(*args, env={**env, name: "abc"})
        got = run_envpin(*args, env={**env, name: value})
        assert got.code == 0 and got.stderr == "", (args, got)
        assert got.stdout == expected.stdout, args


def _rich_recipe_table(headers: list[str], rows: list[list[str]], width: int) -> str:
    """What envpin's rich path writes for the recipe's environment table (every column wraps, the last folds)."""
    out = io.StringIO()
    t = Table(title="environment")
    t.add_column(headers[0])
    t.add_column(headers[1])
    t.add_column(headers[2], overflow="fold")
    for r in rows:
        t.add_row(*r)
    Console(file=out, highlight=False, width=width).print(t)
    return out.getvalue()


@pytest.mark.parametrize("width", [30, 40, 60, 80, 100, 119, 120, 121, 150, 200])
@pytest.mark.parametrize("release", ["20.02-tf2-py3", "19.10-py3", "25.02-tf2-py3"])
def test_the_recipe_table_is_what_rich_writes(width: int, release: str) -> None:
    from envpin.views import environment

    entry, recipe = api.recipe_for(release, None)
    captured: dict[str, object] = {}
    original = plaintable.render

    def grab(title: str, headers: list[str], rows: list[list[str]], w: int, **kw: object) -> str | None:
        captured.update(headers=headers, rows=rows)
        return original(title, headers, rows, w, **kw)  # type: ignore[arg-type]

    plaintable.render = grab  # type: ignore[assignment]
    try:
        environment.recipe(entry.tag, recipe, console.Plain(False, quiet=True))
    finally:
        plaintable.render = original  # type: ignore[assignment]
    headers, rows = captured["headers"], captured["rows"]
    plain = plaintable.render("environment", headers, rows, width, first_no_wrap=False,  # type: ignore[arg-type]
                              fold=frozenset({2}))
    if plain is not None:
        assert plain == _rich_recipe_table(headers, rows, width)  # type: ignore[arg-type]
    if width >= 80:
        assert plain is not None, "the recipe table at a common width takes the plain path"


@settings(max_examples=400, deadline=None)
@given(cols=st.integers(1, 4), data=st.data(), width=st.integers(8, 130), fold_last=st.booleans())
def test_any_wrapping_or_folding_table_it_renders_is_what_rich_writes(cols: int, data: st.DataObject, width: int,
                                                                      fold_last: bool) -> None:
    headers = data.draw(st.lists(CELL, min_size=cols, max_size=cols))
    rows = data.draw(st.lists(st.lists(CELL, min_size=cols, max_size=cols), max_size=6))
    fold = frozenset({cols - 1}) if fold_last else frozenset()
    plain = plaintable.render("environment", headers, rows, width, first_no_wrap=False, fold=fold)
    if plain is None:
        return
    out = io.StringIO()
    t = Table(title="environment")
    for i, h in enumerate(headers):
        t.add_column(h, overflow="fold" if i in fold else "ellipsis")
    for r in rows:
        t.add_row(*r)
    Console(file=out, highlight=False, width=width).print(t)
    assert plain == out.getvalue()


@pytest.mark.parametrize("columns", [None, "40", "80", "200"])
def test_envpin_recipe_prints_what_rich_prints(columns: str | None) -> None:
    """The lean path's recipe (plain table) and the full CLI's (rich) write the same bytes."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    if columns is not None:
        env["COLUMNS"] = columns
    got = run_envpin("recipe", "--ngc", "20.02-tf2-py3", env=env)
    assert got.code == 0, got.stderr
    full = subprocess.run([sys.executable, "-c", "from envpin.cli import main; main()", "recipe", "--ngc",
                           "20.02-tf2-py3"], capture_output=True, text=True, env=env, check=False)
    assert full.returncode == 0, full.stderr
    assert got.stdout == full.stdout
    assert got.stderr == full.stderr
