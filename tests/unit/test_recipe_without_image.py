"""`envpin recipe --tf X.Y` for a TensorFlow no stock image in the catalog holds: the recipe table covers stock
builds of it, so the recipe is shown (exit 0) with the NGC releases that ship it; `render --tf X.Y` there names
those releases. Through the real CLI entry point, in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envpin.environment.plan import ngc_releases
from envpin.knowledge import catalog, recipes
from envpin.knowledge import stock as stock_table
from envpin.knowledge.versions import parse_tf_spec


@pytest.mark.parametrize("tf", ["2.1", "2.5", "2.8", "1.15", "2.17", "2.21"])
def test_recipe_for_a_tensorflow_without_a_stock_image(cli, tf: str) -> None:  # type: ignore[no-untyped-def]
    spec = parse_tf_spec(tf)
    assert stock_table.load().filtered(spec) == []  # the case: no stock image holds it
    row = recipes.select(tf, "stock")
    res = cli("recipe", "--tf", tf)
    assert res.code == 0, res.stderr
    lines = res.stdout.splitlines()
    held = ngc_releases(spec)
    assert lines[0].startswith(f"no stock TensorFlow GPU image in the catalog holds TensorFlow {tf}: ")
    assert (f"NGC releases with it: {held[0]}" in lines[0]) if held else ("no NGC release" in lines[0])
    assert lines[1] == f"no image: TensorFlow {tf} → recipe {row.id}"
    out = json.loads(cli("recipe", "--tf", tf, "--json").stdout)
    assert out["tag"] is None and out["id"] == row.id and out["hash"] == row.hash
    assert out["ngc_releases"] == list(held)
    every = {e.release for e in catalog.load().select(None, tf=spec, notify=False)}
    assert set(held) == every


def test_recipe_with_distributed_and_no_image(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("recipe", "--tf", "2.17", "--distributed")
    assert res.code == 0, res.stderr
    assert "no image: distributed recipe for TensorFlow 2.17" in res.stdout


@pytest.mark.parametrize("tf", ["2.22", "0.9"])
def test_recipe_for_a_tensorflow_the_table_does_not_cover(cli, tf: str) -> None:  # type: ignore[no-untyped-def]
    res = cli("recipe", "--tf", tf)
    lines = res.stderr.splitlines()
    assert res.code == 2 and res.stdout == ""
    assert lines == [
        f"error: no determinism recipe covers TensorFlow {tf} (stock)",
        "hint: the recipe table covers stock TensorFlow 1.0 to 2.21",
    ]


@pytest.mark.parametrize("tf, named", [("2.17", "24.11, 24.12, 25.02"), ("1.15", "19.11 to 23.03 (38 releases)")])
def test_render_for_a_tensorflow_without_a_stock_image_names_the_ngc_releases(  # type: ignore[no-untyped-def]
    cli, tmp_path: Path, tf: str, named: str
) -> None:
    res = cli("render", "--tf", tf, "--out", str(tmp_path / "env"))
    lines = res.stderr.splitlines()
    assert res.code == 2 and len(lines) == 2 and not (tmp_path / "env").exists()
    assert lines[0] == f"error: no stock TensorFlow GPU image in the catalog holds TensorFlow {tf}"
    last = ngc_releases(parse_tf_spec(tf))[-1]
    assert lines[1].startswith(f"hint: NGC releases with TensorFlow {tf}: {named}; give --ngc {last} --tf {tf}")
    assert cli("render", "--ngc", last, "--tf", tf, "--out", str(tmp_path / "env")).code == 0
