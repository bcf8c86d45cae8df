"""The catalog's and the recipe's tables as a pipe or a file gets them (envpin.views.plaintable, no terminal),
byte for byte, at the default width and at the widths that make columns wrap and fold (regenerate with
pytest --update-golden). The same commands on a terminal are drawn by rich."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent / "tables"

CASES = {
    "catalog": ("catalog",),
    "catalog-tf2": ("catalog", "--tf", "2"),
    "catalog-flavor-tf1": ("catalog", "--flavor", "tf1"),
    "recipe-20.02": ("recipe", "--ngc", "20.02-tf2-py3"),
    "recipe-23.03-tf1": ("recipe", "--ngc", "23.03-tf1-py3"),
    "recipe-stock-2.20": ("recipe", "--stock", "2.20"),
    # the distributed recipe after the base one: NCCL 2.23 reads all but NCCL_TREE_THRESHOLD
    "recipe-24.12-distributed": ("recipe", "--ngc", "24.12-tf2-py3", "--distributed"),
}
WIDTHS = (None, "80", "200")


@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"COLUMNS={w or 'unset'}")
@pytest.mark.parametrize("name", sorted(CASES))
def test_table_as_a_pipe_gets_it(  # type: ignore[no-untyped-def]
    cli, monkeypatch: pytest.MonkeyPatch, update_golden: bool, name: str, width: str | None
) -> None:
    if width is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", width)
    res = cli(*CASES[name])
    assert res.code == 0, res.stderr
    golden = HERE / f"{name}{'' if width is None else '-' + width}.txt"
    if update_golden:
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(res.stdout + ("" if not res.stderr else "--- stderr ---\n" + res.stderr))
    expected = golden.read_text()
    assert res.stdout + ("" if not res.stderr else "--- stderr ---\n" + res.stderr) == expected, (
        f"{golden.name} differs (pytest --update-golden)"
    )
