"""The distributed recipe (recipes.json `distributed`): its table rules, what it resolves to per TensorFlow version,
`envpin recipe --distributed` in text and JSON, and `render --distributed` through the plan, the Dockerfile and
Apptainer definition, the lock, `lock --check`, a re-render and a build from the lock."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from envpin.errors import RecipeError
from envpin.knowledge import recipes

LOCK = "envpin.lock"


def _part() -> dict:  # type: ignore[type-arg]
    return copy.deepcopy(recipes.table())


# --- the table ---------------------------------------------------------------------------------------------


def test_every_variable_says_which_library_versions_read_it() -> None:
    part = recipes.book().distributed
    assert part is not None
    names = {v.name: v for v in part.env}
    assert {"NCCL_ALGO", "NCCL_NVLS_ENABLE", "NCCL_TREE_THRESHOLD", "HOROVOD_AUTOTUNE"} <= set(names)
    assert names["NCCL_ALGO"].value == "Ring" and names["NCCL_ALGO"].readers() == "NCCL 2.5 and later"
    assert names["NCCL_TREE_THRESHOLD"].readers() == "NCCL 2.4"
    assert names["NCCL_NVLS_ENABLE"].read_by("2.17.1") and not names["NCCL_NVLS_ENABLE"].read_by("2.9.9")
    assert names["NCCL_ALGO"].read_by(None) is None  # an image whose NCCL is not known
    sources = recipes.table()["sources"]
    for v in part.env:
        assert v.source in sources and v.library in ("nccl", "horovod")


def test_horovod_fusion_has_one_home() -> None:
    """HOROVOD_FUSION_THRESHOLD stays in the shared settings every image gets; the distributed part names it."""
    table = recipes.table()
    assert "HOROVOD_FUSION_THRESHOLD" in {e["name"] for e in table["common"]["env"]}
    assert "HOROVOD_FUSION_THRESHOLD" not in {e["name"] for e in table["distributed"]["env"]}
    assert table["distributed"]["uses_common"] == ["HOROVOD_FUSION_THRESHOLD"]


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (
            lambda d: d["distributed"]["env"].append({**d["distributed"]["env"][0], "name": "PYTHONHASHSEED"}),
            "is a variable of the base recipe",
        ),
        (lambda d: d["distributed"]["uses_common"].append("NCCL_DEBUG"), "is not a variable of common.env"),
        (lambda d: d["distributed"]["hazards"].append(dict(d["distributed"]["code"][0])), "duplicate code or hazard"),
        (lambda d: d["distributed"]["cost"][0].update(about="NCCL_PROTO"), "is no variable or code setting"),
        (lambda d: d["distributed"]["env"][0].update(source="nowhere"), "unknown source 'nowhere'"),
        (lambda d: d["distributed"]["env"][0].update(library="mpi"), "is invalid"),
    ],
)
def test_the_check_refuses_a_broken_distributed_part(edit, says: str) -> None:  # type: ignore[no-untyped-def]
    data = _part()
    edit(data)
    with pytest.raises(RecipeError, match=says):
        recipes.validate(data)


def test_each_version_gets_its_settings_and_hazards() -> None:
    def ids(tf: str) -> tuple[set[str], set[str]]:
        d = recipes.distributed(tf)
        return {c["id"] for c in d.code}, {h["id"] for h in d.hazards}

    code, hazards = ids("2.3")
    assert code == {"mwms-communication-experimental"} and "generator-in-scope-raises" in hazards
    assert "sample-from-datasets" not in hazards and "generator-in-scope" not in hazards
    code, hazards = ids("2.18")
    assert code == {"mwms-communication", "mwms-communication-experimental"}
    assert {"generator-in-scope", "shared-generator-in-replica", "sample-from-datasets"} <= hazards
    assert "generator-in-scope-raises" not in hazards
    assert ids("1.15")[0] == set()  # no tf.distribute setting is sourced for TF1
    assert recipes.distributed("2.18").env == recipes.distributed("1.15").env  # every image gets every variable
    with pytest.raises(RecipeError):
        recipes.distributed("two")


def test_the_base_recipe_is_the_same_with_or_without_it(cli) -> None:  # type: ignore[no-untyped-def]
    plain = json.loads(cli("recipe", "--ngc", "24.12-tf2-py3", "--json").stdout)
    both = json.loads(cli("recipe", "--ngc", "24.12-tf2-py3", "--json", "--distributed").stdout)
    assert "distributed" not in plain
    assert {k: v for k, v in both.items() if k != "distributed"} == plain  # the recipe's hash did not change
    dist = both["distributed"]
    assert dist["hash"].startswith("sha256:") and dist["tf_version"] == plain["tf_version"]
    assert [e["name"] for e in dist["env"]] == [
        "NCCL_ALGO",
        "NCCL_TREE_THRESHOLD",
        "NCCL_NVLS_ENABLE",
        "HOROVOD_AUTOTUNE",
    ]


# --- envpin recipe --distributed ---------------------------------------------------------------------------


def test_recipe_text_says_what_the_images_nccl_reads(cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COLUMNS", "3000")
    old = cli("recipe", "--ngc", "19.10-py3", "--distributed")
    assert old.code == 0, old.stderr
    assert "19.10-py3: distributed recipe for TensorFlow 1.14" in old.stdout
    assert "read by NCCL 2.4; read by this image's NCCL 2.4.8" in old.stdout
    assert "read by NCCL 2.5 and later; not read by this image's NCCL 2.4.8" in old.stdout
    assert "in the script: no tf.distribute setting is sourced for TensorFlow 1.14" in old.stdout
    new = cli("recipe", "--ngc", "24.12-tf2-py3", "--distributed").stdout
    assert "read by NCCL 2.17 and later; read by this image's NCCL 2.23.4" in new
    assert "kept in the base recipe above (every image sets it): HOROVOD_FUSION_THRESHOLD=0" in new
    assert "should generally not be set for production code" in new  # the cost, stated
    assert (
        "CommunicationImplementation.RING" in new and "hazard (TensorFlow 2.4 and later): sample_from_datasets" in new
    )
    stock = cli("recipe", "--tf", "2.20", "--distributed").stdout
    assert "not read by this image" not in stock and "read by NCCL 2.5 and later" in stock  # NCCL not known


def test_recipe_without_the_option_shows_no_distributed_part(cli) -> None:  # type: ignore[no-untyped-def]
    out = cli("recipe", "--ngc", "24.12-tf2-py3").stdout
    assert "distributed recipe" not in out and "NCCL_ALGO" not in out


# --- render --distributed ----------------------------------------------------------------------------------


def test_render_bakes_it_into_both_formats_and_the_lock(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "env"
    res = cli(
        "render",
        "--ngc",
        "24.12-tf2-py3",
        "--distributed",
        "--format",
        "docker",
        "--format",
        "apptainer",
        "--out",
        str(out),
    )
    assert res.code == 0, res.stderr
    assert "and the distributed recipe) for docker and apptainer" in res.stderr
    dockerfile = (out / "Dockerfile").read_text()
    assert "    NCCL_ALGO=Ring \\\n" in dockerfile and "    HOROVOD_AUTOTUNE=0 \\\n" in dockerfile
    comment = next(line for line in dockerfile.splitlines() if line.startswith("#   NCCL_NVLS_ENABLE=0: "))
    assert comment.endswith("(https://github.com/NVIDIA/nccl/issues/1497)") and "this image's NCCL 2.23.4" in comment
    assert 'io.envpin.distributed-hash="sha256:' in dockerfile
    definition = (out / "envpin.def").read_text()
    assert "    export NCCL_ALGO=Ring\n" in definition and "    #   NCCL_ALGO=Ring: " in definition
    plan = json.loads((out / "plan.json").read_text())
    assert plan["distributed"]["env"]["NCCL_ALGO"] == "Ring"
    assert "[distributed]" in (out / LOCK).read_text()
    assert cli("lock", "--check", "--lock", str(out / LOCK)).code == 0


def test_a_rerender_keeps_it_and_no_distributed_removes_it(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "env"
    assert cli("render", "--tf", "2.20", "--distributed", "--out", str(out)).code == 0
    first = (out / LOCK).read_bytes()
    assert cli("render", "--tf", "2.20", "--out", str(out)).code == 0
    assert (out / LOCK).read_bytes() == first  # unsaid: what the folder's lock records
    assert cli("render", "--tf", "2.20", "--no-distributed", "--out", str(out)).code == 0
    assert "[distributed]" not in (out / LOCK).read_text() and "NCCL_ALGO" not in (out / "Dockerfile").read_text()
    assert cli("lock", "--check", "--lock", str(out / LOCK)).code == 0


def test_a_build_from_the_lock_renders_it_and_refuses_the_option(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "env"
    assert cli("render", "--tf", "2.20", "--distributed", "--out", str(out)).code == 0
    planned = cli("build", "--dry-run", "--lock", str(out / LOCK))
    assert planned.code == 0 and json.loads(planned.stdout)["distributed"]["env"]["NCCL_NVLS_ENABLE"] == "0"
    for flag in ("--distributed", "--no-distributed"):
        res = cli("build", "--dry-run", "--lock", str(out / LOCK), flag)
        lines = res.stderr.strip().splitlines()
        assert res.code == 2 and len(lines) == 2, res.stderr
        assert lines[0].startswith("error: --distributed says what a new render bakes in")
        assert lines[1].startswith("hint: ")


def test_a_lock_whose_distributed_part_was_edited_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import tomli_w

    from envpin._compat import tomllib
    from envpin.environment.lockfile import HEADER, self_hash

    out = tmp_path / "env"
    assert cli("render", "--tf", "2.20", "--distributed", "--out", str(out)).code == 0
    path = out / LOCK
    data = tomllib.loads(path.read_text())
    data["distributed"]["env"]["NCCL_ALGO"] = "Tree"
    data["lock"]["self_hash"] = self_hash(data)
    path.write_text(HEADER + tomli_w.dumps(data))
    res = cli("lock", "--check", "--lock", str(path))
    assert res.code == 1 and "distributed.env.NCCL_ALGO is 'Tree' in the lock, but its inputs give 'Ring'" in res.stdout


def test_the_plan_and_inputs_hash_change_only_when_asked(tmp_path: Path) -> None:
    from envpin.environment.plan import make_plan

    plain, dist = make_plan(ngc="22.03-tf2-py3"), make_plan(ngc="22.03-tf2-py3", distributed=True)
    assert "distributed" not in plain.to_dict() and plain.inputs_hash != dist.inputs_hash
    assert plain.recipe.hash == dist.recipe.hash
    assert dist.to_dict()["distributed"]["hash"] == recipes.distributed("2.8").hash
