"""A lock is checked, not trusted: build (from the lock), verify and doctor re-derive what its inputs produce
and refuse a lock that states anything else, naming the field, even when its self-hash was recomputed."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from envpin._compat import tomllib
from envpin.environment.lockfile import HEADER, LOCK_NAME, plan_of, read, self_hash

Mutation = Callable[[dict[str, Any]], None]


@pytest.fixture
def env(cli, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    out = tmp_path / "env"
    assert cli("render", "--ngc", "20.02", "--tf", "2.1", "--out", str(out)).code == 0
    return out


def _resign(folder: Path, mutate: Mutation) -> Path:
    """Edit the lock and recompute its self-hash, as anyone can."""
    path = folder / LOCK_NAME
    data = copy.deepcopy(tomllib.loads(path.read_text()))
    mutate(data)
    data["lock"]["self_hash"] = self_hash(data)
    path.write_text(HEADER + tomli_w.dumps(data))
    read(path)  # the self-hash accepts it
    return path


def _set(table: str, key: str, value: Any) -> Mutation:
    def mutate(data: dict[str, Any]) -> None:
        node = data
        for part in table.split("."):
            node = node[part]
        node[key] = value

    return mutate


CASES = [
    (_set("inputs", "tf_version", "2.2"), "inputs.tf_version is '2.2' in the lock, but its inputs give '2.1'"),
    (
        _set("recipe.env", "TF_DETERMINISTIC_OPS", "0"),
        "recipe.env.TF_DETERMINISTIC_OPS is '0' in the lock, but its inputs give '1'",
    ),
    (_set("recipe", "unset", []), "recipe.unset is [] in the lock, but its inputs give ['TF_CUDNN_USE_AUTOTUNE']"),
    (
        _set("base", "image", "evil.example/x:1"),
        "base.image is 'evil.example/x:1' in the lock, but its inputs give 'nvcr.io/nvidia/tensorflow:20.02-tf2-py3'",
    ),
    (_set("inputs", "build_from", "evil.example/x:1"), "lock.inputs_hash sha256:"),
    (_set("inputs", "flavor", "tf1"), "inputs.flavor is 'tf1' in the lock, but its inputs give 'tf2'"),
]


@pytest.mark.parametrize(("mutate", "named"), CASES)
def test_every_command_that_acts_on_a_lock_refuses_a_re_signed_edit(
    cli,
    env: Path,
    mutate: Mutation,
    named: str,  # type: ignore[no-untyped-def]
) -> None:
    lock = _resign(env, mutate)
    for args in (
        ("build", "--lock", str(lock), "--dry-run"),
        ("verify", "--lock", str(lock)),
        ("doctor", "--lock", str(lock)),
    ):
        res = cli(*args)
        lines = res.stderr.splitlines()
        assert res.code == 2, (args, res.stderr)
        assert lines[-2].startswith(f"error: {lock} does not match what its inputs produce: {named}"), lines
        assert lines[-1].startswith("hint: restore it from git") and "accidents, not edits" in lines[-1]
        assert "FROM evil" not in res.stdout
    check = cli("lock", "--check", "--lock", str(lock))
    assert check.code == 1 and named in check.stdout


def test_a_lock_from_another_envpin_is_stale_not_refused(cli, env: Path) -> None:  # type: ignore[no-untyped-def]
    """An older envpin's payload: the lock still hashes its own inputs, so it is only stale."""
    locked = read(env / LOCK_NAME)
    older = "sha256:" + "1" * 64
    own = plan_of(locked, env).inputs_hash_with(payload_hash=older, envpin_version="0.0.9")

    def mutate(data: dict[str, Any]) -> None:
        data["inputs"]["payload_hash"] = older
        data["lock"]["envpin_version"] = "0.0.9"
        data["lock"]["inputs_hash"] = own

    lock = _resign(env, mutate)
    assert read(lock).disagreements(plan_of(read(lock), env)) == []
    check = cli("lock", "--check", "--lock", str(lock))
    assert check.code == 1 and "inputs hash sha256:" in check.stdout and "is now" in check.stdout
    verified = cli("verify", "--lock", str(lock))
    assert "does not match what its inputs produce" not in verified.stderr
    assert "has no 'expected' table" in verified.stderr


@pytest.mark.parametrize("schema", ["true", "2.0", '"2"'])
def test_the_lock_schema_must_be_an_integer(cli, env: Path, schema: str) -> None:  # type: ignore[no-untyped-def]
    path = env / LOCK_NAME
    text = path.read_text().replace("schema = 2", f"schema = {schema}")
    data = tomllib.loads(text)
    data["lock"]["self_hash"] = self_hash(data)
    path.write_text(HEADER + tomli_w.dumps(data))
    res = cli("verify", "--lock", str(path))
    assert res.code == 2 and "uses lock schema" in res.stderr


# --- re-derived at every use: [base.declared] and [files] (regressions) --------------------------------------------

DIGEST = "sha256:" + "d" * 64
DECLARED = {"TENSORFLOW_VERSION": "2.1.0", "CUDA_VERSION": "10.2.89", "CUDNN_VERSION": "7.6.5"}


@pytest.fixture
def pinned(tmp_path: Path) -> Path:
    """A TF 2.1 folder as a build leaves it: base pinned by digest, what the base declares recorded."""
    from envpin.environment.plan import make_plan
    from envpin.environment.render import render, write_environment

    plan = make_plan(ngc="20.02", tf="2.1", base_digest=DIGEST, base_declared=dict(DECLARED))
    write_environment(tmp_path / "pinned", plan, render(plan))
    return tmp_path / "pinned"


def _declared(declared: dict[str, str]) -> Mutation:
    return lambda data: data["base"].__setitem__("declared", declared)


@pytest.mark.parametrize(
    ("declared", "named"),
    [
        ({"tensorflow": "1.15"}, "base.declared.tensorflow is '1.15' in the lock, but it is not a version variable"),
        (
            {**DECLARED, "TENSORFLOW_VERSION": "1.15.5"},
            "base.declared.TENSORFLOW_VERSION is '1.15.5' in the lock, but its inputs are for TensorFlow 2.1",
        ),
    ],
)
def test_a_re_signed_declared_tensorflow_is_refused(  # type: ignore[no-untyped-def]
    cli, pinned: Path, declared: dict[str, str], named: str
) -> None:
    """[base] declared = TensorFlow 1.15 on a TF 2.1 lock, self-hash recomputed: `lock --check` exits 1 naming
    the field, `build --dry-run` refuses with exit 2 before any plan is printed."""
    assert cli("lock", "--check", "--lock", str(pinned / LOCK_NAME)).code == 0
    lock = _resign(pinned, _declared(declared))
    check = cli("lock", "--check", "--lock", str(lock))
    assert check.code == 1 and check.stdout.splitlines()[0] == f"{lock} is stale (1 problem):", check.stdout
    assert check.stdout.splitlines()[1].startswith(f"  {named}")
    dry = cli("build", "--dry-run", "--lock", str(lock))
    assert dry.code == 2 and dry.stdout == "", dry.stdout
    assert dry.stderr.splitlines()[0].startswith(f"error: {lock} does not match what its inputs produce: {named}")
    # `render --force` repairs it: facts that contradict the inputs are not carried over.
    assert cli("render", "--ngc", "20.02", "--tf", "2.1", "--out", str(pinned), "--force").code == 0
    assert "TENSORFLOW_VERSION" not in read(lock).base.declared
    assert cli("lock", "--check", "--lock", str(lock)).code == 0


def test_a_re_signed_files_table_is_refused(cli, env: Path) -> None:  # type: ignore[no-untyped-def]
    """[files] rewritten with a wrong digest and re-hashed: `build --dry-run` refuses, naming the file."""
    wrong = "sha256:" + "0" * 64
    lock = _resign(env, _set("files", "Dockerfile", wrong))
    dry = cli("build", "--dry-run", "--lock", str(lock))
    first = dry.stderr.splitlines()[0]
    assert dry.code == 2 and dry.stdout == "", dry.stderr
    assert first.startswith(
        f"error: {lock} does not match what its inputs produce: files.Dockerfile is '{wrong}' in "
        "the lock, but its inputs render 'sha256:"
    ), first
    check = cli("lock", "--check", "--lock", str(lock))
    assert check.code == 1 and f"files.Dockerfile is '{wrong}'" in check.stdout
    assert "Dockerfile: would render differently now" not in check.stdout  # said once
    for extra in (_set("files", "run.sh", wrong), lambda d: d["files"].pop("envpin.pyz")):
        lock = _resign(env, extra)
        assert cli("build", "--dry-run", "--lock", str(lock)).code == 2
        assert cli("verify", "--lock", str(lock)).code == 2


def test_a_build_says_the_lock_is_wrong_before_asking_any_engine(  # type: ignore[no-untyped-def]
    cli, env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    lock = _resign(env, _set("recipe.env", "TF_DETERMINISTIC_OPS", "0"))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no.sock")
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no podman either
    res = cli("build", "--lock", str(lock))
    assert res.code == 2 and res.stderr.splitlines()[0].startswith(
        f"error: {lock} does not match what its inputs produce: recipe.env.TF_DETERMINISTIC_OPS"
    )
