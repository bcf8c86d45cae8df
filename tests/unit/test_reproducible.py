"""The pure parts of reproducible builds: the fixed timestamp, the normalised context, the lock's [image]
table, where two images part, engine choice and per-engine state (podman itself: tests/podman/test_podman.py)."""

from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from envpin.environment import lockfile
from envpin.environment.plan import make_plan
from envpin.environment.render import render
from envpin.errors import LockError
from envpin.image import buildstate, podman
from envpin.image.model import ImageFacts, first_difference

TWO = (
    "tabulate==0.9.0 \\\n    --hash=sha256:024ca478df22e9340661486f85298cff5f6dcdba14f3813e8830015b9ed1948f\n"
    "tomli-w==1.0.0 \\\n    --hash=sha256:9f2a07e8be30a0729e533ec968016807069991ae2fd921a78d42f429ae5f4463\n"
)


@pytest.mark.parametrize(
    "ngc, epoch",
    [
        ("20.02", 1580515200),
        ("19.10-py3", 1569888000),
        ("25.02-tf2-py3", 1738368000),
    ],
)
def test_the_timestamp_is_the_release_month_not_the_clock(ngc: str, epoch: int) -> None:
    plan = make_plan(ngc=ngc, tf={"20.02": "2.1", "25.02-tf2-py3": "2.17"}.get(ngc))
    assert plan.source_date_epoch == epoch
    assert f"ARG SOURCE_DATE_EPOCH={epoch}\n" in render(plan)["Dockerfile"].decode()


def test_pip_compiles_only_where_python_honours_source_date_epoch(tmp_path: Path) -> None:
    req = tmp_path / "requirements.lock"
    req.write_text(TWO)
    py36 = make_plan(ngc="19.07-py3", requirements=req)  # the catalog says Python 3.6 for 19.07
    assert not py36.pip_compiles_reproducibly
    assert '--no-deps --no-compile "$@" -r /opt/envpin/requirements.lock' in render(py36)["Dockerfile"].decode()
    py38 = make_plan(ngc="21.04-tf1-py3", requirements=req)  # Python 3.8
    assert py38.pip_compiles_reproducibly
    text = render(py38)["Dockerfile"].decode()
    assert "--no-compile" not in text and '--no-deps "$@" -r /opt/envpin/requirements.lock' in text
    # The ARG comes before the pip step, so pip's Python sees SOURCE_DATE_EPOCH.
    assert text.index("ARG SOURCE_DATE_EPOCH=") < text.index("pip install")


def test_context_has_fixed_modes_and_mtimes_whatever_the_umask(tmp_path: Path) -> None:
    files = {"Dockerfile": b"FROM x\n", "sub/dir/file.txt": b"data", "plan.json": b"{}\n"}
    old = os.umask(0o077)
    try:
        podman.write_context(files, tmp_path, 1580515200)
    finally:
        os.umask(old)
    for rel in files:
        st = (tmp_path / rel).stat()
        assert stat.S_IMODE(st.st_mode) == 0o644 and st.st_mtime == 1580515200
    for folder in (tmp_path / "sub", tmp_path / "sub" / "dir"):
        st = folder.stat()
        assert stat.S_IMODE(st.st_mode) == 0o755 and st.st_mtime == 1580515200
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file()) == sorted(files)


def test_staged_context_is_removed_afterwards(tmp_path: Path) -> None:
    with podman.staged_context({"Dockerfile": b"FROM x\n"}, 0, tmp_path / "work") as ctx:
        assert (ctx / "Dockerfile").read_bytes() == b"FROM x\n"
    assert list((tmp_path / "work").iterdir()) == []


def _lock(tmp_path: Path) -> lockfile.Lock:
    plan = make_plan(ngc="20.02", tf="2.1")
    return lockfile.Lock.from_plan(plan, render(plan))


IMAGE = lockfile.Image(
    id="sha256:" + "a" * 64,
    inputs_hash="sha256:" + "e" * 64,
    engine="podman 4.3.1",
    storage_driver="overlay",
    layers=("sha256:" + "1" * 64, "sha256:" + "2" * 64),
)


def test_image_table_round_trips_and_belongs_to_its_inputs(tmp_path: Path) -> None:
    lock = _lock(tmp_path)
    with_image = replace(lock, image=replace(IMAGE, inputs_hash=lock.inputs_hash))
    back = lockfile.loads(with_image.dumps().decode())
    assert back == with_image and back.expected_image() == with_image.image
    assert "[image]" in with_image.dumps().decode()
    # Recorded for other inputs: kept (so --check can say what moved), but not expected any more.
    stale = replace(with_image, image=replace(IMAGE, inputs_hash="sha256:" + "f" * 64))
    assert stale.expected_image() is None
    plan = make_plan(ngc="20.02", tf="2.1")
    assert lockfile.Lock.from_plan(plan, render(plan), previous=stale).image == stale.image


@pytest.mark.parametrize(
    "field, value, message",
    [
        ("id", "abc", "image.id must be a digest"),
        ("layers", "sha256:x", "image.layers must be a list of strings"),
        ("engine", "", "image.engine must be a non-empty string"),
    ],
)
def test_a_malformed_image_table_is_one_clear_error(tmp_path: Path, field: str, value: object, message: str) -> None:
    lock = replace(_lock(tmp_path), image=IMAGE)
    data = lock.to_toml()
    data["image"][field] = value
    data["lock"]["self_hash"] = lockfile.self_hash(data)  # re-signed: only the shape is wrong
    import tomli_w

    with pytest.raises(LockError, match=message.replace(".", r"\.").replace("(", r"\(")):
        lockfile.loads(tomli_w.dumps(data))


def test_first_difference_names_the_layer_and_its_step() -> None:
    built = ImageFacts(
        id="sha256:b",
        layers=("sha256:1", "sha256:X", "sha256:3"),
        steps=("base image", "COPY file:abc in /opt/envpin/requirements.lock", "RUN pip install"),
    )
    text = first_difference(("sha256:1", "sha256:2", "sha256:3"), built)
    assert text.startswith("layer 2 of 3 differs (COPY file:abc in /opt/envpin/requirements.lock)")
    assert "more" not in first_difference(("sha256:1",), built)
    assert "the lock has 1 and the build made 3" in first_difference(("sha256:1",), built)
    assert "every layer agrees" in first_difference(built.layers, built)


def test_podman_and_docker_results_are_kept_apart(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(buildstate.STATE_ENV, str(tmp_path))
    h = "sha256:" + "c" * 64
    buildstate.save(buildstate.BuildRecord(h, "sha256:d1", "envpin/x:1", "ref", "docker"))
    buildstate.save(buildstate.BuildRecord(h, "sha256:p1", "envpin/x:1", "ref", "podman"))
    loaded_docker, loaded_podman = buildstate.load(h), buildstate.load(h, "podman")
    assert loaded_docker is not None and loaded_docker.image_id == "sha256:d1"
    assert loaded_podman is not None and loaded_podman.image_id == "sha256:p1"
    assert buildstate.log_path(h) != buildstate.log_path(h, "podman")


def test_engine_choice_is_validated_and_check_needs_podman(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("build", "--ngc", "20.02", "--tf", "2.1", "--engine", "kaniko")
    assert res.code == 2 and res.stderr.splitlines() == [
        "error: Invalid value for '--engine' (env var: 'ENVPIN_ENGINE'): 'kaniko' is not one of 'auto', 'docker', "
        "'podman'.",
        "hint: see 'envpin build --help'",
    ]
    res = cli("build", "--ngc", "20.02", "--tf", "2.1", "--engine", "docker", "--check")
    assert res.code == 2 and "--check rebuilds with podman" in res.stderr
    assert "hint: add --engine podman" in res.stderr


def test_inspect_maps_history_to_layers() -> None:
    steps = podman._step_text({"created_by": "/bin/sh -c #(nop) COPY file:ab in /opt/x "})
    assert steps == "COPY file:ab in /opt/x"
    assert podman._step_text({"created_by": "/bin/sh -c python3 -m   envpin.probe.runtime --check"}) == (
        "RUN python3 -m envpin.probe.runtime --check"
    )


def test_a_missing_engine_is_said_before_anything_is_written(  # type: ignore[no-untyped-def]
    cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))  # no podman on PATH
    out = tmp_path / "env"
    res = cli("build", "--ngc", "20.02", "--tf", "2.1", "--engine", "podman", "--out", str(out))
    assert res.code == 2 and res.stderr.splitlines() == [
        "error: podman is not installed (needed for --engine podman)",
        "hint: install podman (`apt-get install podman buildah`, or `bash scripts/services.sh install`)",
    ]
    # auto: Docker does not answer either
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no.sock")
    res = cli("build", "--ngc", "20.02", "--tf", "2.1", "--out", str(out))
    lines = res.stderr.splitlines()
    assert res.code == 2 and len(lines) == 2
    assert lines[0].startswith("error: no container engine answers: the Docker engine is not reachable")
    assert lines[1].startswith("hint: start Docker")
    assert not out.exists()
