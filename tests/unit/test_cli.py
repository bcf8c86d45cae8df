"""The CLI contract: exit codes, one-line errors with a hint, no tracebacks, nothing half-written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

HASH = "--hash=sha256:" + "c" * 64


def _one_line_error(res, fragment: str = "") -> None:  # type: ignore[no-untyped-def]
    assert fragment in res.stderr, res.stderr
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.code == 2, res.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in res.stderr
    assert len(lines) <= 2 and (len(lines) == 1 or lines[1].startswith("hint: "))
    assert res.stdout == ""


def test_users_example(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    for cmd in ("build", "render"):
        res = cli(cmd, "--tf", "2.1", "--ngc", "20.01", cwd=tmp_path)
        _one_line_error(res)
        assert "NGC 20.01 contains TF 1.15 (tf1), TF 2.0 (tf2), not TensorFlow 2.1" in res.stderr
        assert "hint: TensorFlow 2.1 is in NGC 20.02, 20.03" in res.stderr
    assert list(tmp_path.iterdir()) == []


def test_dry_run_prints_plan_and_writes_nothing(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("build", "--tf", "2.1", "--ngc", "20.02", "--dry-run", cwd=tmp_path)
    assert res.code == 0, res.stderr
    plan = json.loads(res.stdout)
    assert plan["tag"] == "20.02-tf2-py3" and plan["recipe"]["id"] == "ngc-tf2.0-2.4"
    assert "Dockerfile" in plan["files"] and list(tmp_path.iterdir()) == []


def test_render_writes_folder(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    res = cli("render", "--tf", "2.1.0", "--ngc", "20.02-tf2-py3", cwd=tmp_path)
    assert res.code == 0, res.stderr
    out = tmp_path / "images" / "20.02-tf2"
    assert res.stdout.strip() == "images/20.02-tf2"
    assert {p.name for p in out.iterdir()} == {"Dockerfile", "envpin.lock", "plan.json", ".dockerignore", "envpin.pyz"}


def test_catalog_json_and_filters(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("catalog", "--tf", "2.1", "--json")
    assert res.code == 0
    rows = json.loads(res.stdout)
    assert [r["tag"] for r in rows] == ["20.02-tf2-py3", "20.03-tf2-py3"]
    assert all(r["flavor"] == "tf2" for r in json.loads(cli("catalog", "--flavor", "tf2", "--json").stdout))
    show = json.loads(cli("catalog", "show", "20.03", "--json").stdout)
    assert [r["tag"] for r in show] == ["20.03-tf1-py3", "20.03-tf2-py3"]
    assert show[1]["provenance"]["cuda"]["source"].startswith("https://docs.nvidia.com/")
    table = cli("catalog")
    assert table.code == 0 and "20.03-tf2-py3" in table.stdout and table.stderr == ""


def test_recipe_json(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("recipe", "--ngc", "21.06-tf2-py3", "--json")
    data = json.loads(res.stdout)
    assert data["id"] == "ngc-tf2.5-2.7" and {e["name"] for e in data["env"]} >= {"TF_CUDNN_USE_FRONTEND"}


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["render", "--ngc", "20.04", "--tf", "2"], "no TensorFlow container in 20.04"),
        (["render", "--ngc", "31.01", "--tf", "2"], "outside the catalog"),
        (["render", "--ngc", "20.13", "--tf", "2"], "month 13"),
        (["render", "--ngc", "2002", "--tf", "2"], "not an NGC TensorFlow release"),
        (["render", "--ngc", "20.02", "--tf", "two"], "not a TensorFlow version"),
        (["render", "--ngc", "24.01", "--tf", "1.15"], "ships only TensorFlow 2"),
        (["render", "--ngc", "24.01-tf1-py3"], "has no tf1-py3 image"),
        (["render", "--ngc", "20.02"], "has 2 images"),
        (["render", "--ngc", "19.10-py2"], "Python 2 image"),
        (["render", "--ngc", "19.02-py3", "--tf", "1.13"], "Python 3.5"),
        (["render", "--ngc", "25.01"], "does not know which TensorFlow"),
        (["render", "--ngc", "20.02", "--tf", "2.1", "--name", "../x"], "not a usable environment name"),
        (["render", "--ngc", "20.02", "--tf", "2.1", "--name", "a/b"], "not a usable environment name"),
        (["render", "--ngc", "20.02", "--tf", "2.1", "--base-image", "Bad Ref"], "not an image reference"),
        (["render", "--ngc", "20.02", "--tf", "2.1", "--requirements", "missing.txt"], "does not exist"),
        (["render", "--ngc", "20.02", "--tf", "2.1", "--ca-bundle", "missing.pem"], "cannot read CA bundle"),
        (["render"], "render needs --ngc RELEASE, or --stock TAG"),
        (["catalog", "--flavor", "tf3"], "'tf3' is not one of 'py2', 'py3', 'tf1', 'tf1-py2', 'tf2'"),
        (["catalog", "show", "20.04"], "no TensorFlow container in 20.04"),
        # neither an NGC release nor a stock tag: the hint names both kinds, and no --ngc option
        (
            ["catalog", "show", "2.20.0-gpux"],
            "hint: give an NGC release or tag, or a stock image's tag, e.g. "
            "envpin catalog show 20.02, 20.02-tf2-py3 or 2.20.0-gpu",
        ),
        (["catalog", "show", "20.13"], "hint: months run from 01 to 12"),
        (["catalog", "--tf", "3"], "no NGC release in the catalog matches"),
        (["nosuchcommand"], "No such command"),
    ],
)
def test_bad_input_one_line_exit_2_nothing_written(cli, tmp_path: Path, args, fragment) -> None:  # type: ignore[no-untyped-def]
    res = cli(*args, cwd=tmp_path)
    _one_line_error(res)
    assert fragment in res.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "content, fragment",
    [("numpy>=1\n", "not pinned"), ("numpy==1.0\n", "no --hash"), (b"\x00\xff", "binary")],
)
def test_bad_requirements(cli, tmp_path: Path, content, fragment) -> None:  # type: ignore[no-untyped-def]
    req = tmp_path / "req.txt"
    req.write_bytes(content if isinstance(content, bytes) else content.encode())
    res = cli("render", "--ngc", "20.02", "--tf", "2.1", "--requirements", str(req), cwd=tmp_path)
    _one_line_error(res)
    assert fragment in res.stderr and not (tmp_path / "images").exists()


def test_hand_edit_refused_then_forced(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert cli("render", "--ngc", "20.02", "--tf", "2.1", cwd=tmp_path).code == 0
    dockerfile = tmp_path / "images" / "20.02-tf2" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "# mine\n")
    res = cli("render", "--ngc", "20.02", "--tf", "2.1", cwd=tmp_path)
    _one_line_error(res)
    assert "edited by hand" in res.stderr and dockerfile.read_text().endswith("# mine\n")
    assert cli("render", "--ngc", "20.02", "--tf", "2.1", "--force", cwd=tmp_path).code == 0
    assert not dockerfile.read_text().endswith("# mine\n")


def test_lock_check_and_flagless_dry_run(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert cli("render", "--ngc", "21.06-tf2-py3", cwd=tmp_path).code == 0
    ok = cli("lock", "--check", cwd=tmp_path)
    assert ok.code == 0 and "up to date" in ok.stdout
    dry = cli("build", "--dry-run", cwd=tmp_path)
    assert dry.code == 0 and json.loads(dry.stdout)["tag"] == "21.06-tf2-py3"
    plan = tmp_path / "images" / "21.06-tf2" / "plan.json"
    plan.write_text(plan.read_text().replace("21.06", "21.07"))
    stale = cli("lock", "--check", cwd=tmp_path)
    assert stale.code == 1 and "plan.json: missing or edited" in stale.stdout
    lock = tmp_path / "images" / "21.06-tf2" / "envpin.lock"
    lock.write_text(lock.read_text().replace('tf_version = "2.5"', 'tf_version = "2.6"'))
    _one_line_error(cli("lock", "--check", cwd=tmp_path), "edited by hand")


def test_lock_check_covers_every_environment_under_images(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert cli("render", "--ngc", "21.06-tf2-py3", cwd=tmp_path).code == 0
    assert cli("render", "--ngc", "20.02", "--tf", "2.1", cwd=tmp_path).code == 0
    ok = cli("lock", "--check", cwd=tmp_path)
    assert ok.code == 0 and ok.stdout.count("is up to date with its inputs") == 2
    (tmp_path / "images" / "20.02-tf2" / "Dockerfile").write_text("FROM elsewhere\n")
    stale = cli("lock", "--check", cwd=tmp_path)
    assert stale.code == 1 and "images/20.02-tf2/envpin.lock is stale" in stale.stdout
    assert "images/21.06-tf2/envpin.lock is up to date" in stale.stdout
    one = cli("lock", "--check", "--lock", "images/21.06-tf2/envpin.lock", cwd=tmp_path)
    assert one.code == 0


def test_lock_command_usage_errors(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _one_line_error(cli("lock", cwd=tmp_path), "lock needs REQUIREMENTS_IN and --ngc")
    _one_line_error(cli("lock", "--check", cwd=tmp_path), "no envpin.lock here or under images/")
    (tmp_path / "req.in").write_bytes(b"\x00\x01")
    _one_line_error(cli("lock", "req.in", "--ngc", "20.02-tf2-py3", cwd=tmp_path), "binary")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("catalog", "--flavor", ""), "'' is not one of 'py2', 'py3'"),
        (("render", "--ngc", "20.02", "--tf", "2.1", "--base-image", ""), "'' is not an image reference"),
        (("render", "--ngc", "20.02", "--tf", "2.1", "--name", "abc\n"), "'abc\\n' is not a usable environment name"),
        (("render", "--ngc", "20.02", "--tf", "2.1", "--base-image", "nvcr.io/x:1\n"), "is not an image reference"),
        (("catalog", "--tf", "٢.١"), "is not a TensorFlow version"),
        (("catalog", "--tf", "1" * 4400), "is not a TensorFlow version"),
    ],
)
def test_empty_odd_and_non_python_inputs_are_one_line_errors(
    cli, tmp_path: Path, args: tuple[str, ...], needle: str
) -> None:  # type: ignore[no-untyped-def]
    res = cli(*args, cwd=tmp_path)
    _one_line_error(res, needle)
    assert not (tmp_path / "images").exists()


def _interrupt_while_a_class_is_made() -> BaseException:
    """What Ctrl-C inside an import can become: Python 3.11 wraps an exception raised by ``__set_name__`` (e.g.
    functools.cached_property while ipaddress loads) in a RuntimeError; later versions let it through."""

    class Descriptor:
        def __set_name__(self, owner: type, name: str) -> None:
            raise KeyboardInterrupt

    try:
        type("Owner", (), {"attr": Descriptor()})
    except (RuntimeError, KeyboardInterrupt) as exc:
        return exc
    raise AssertionError("__set_name__ was not called")


@pytest.mark.parametrize(
    ("raised", "code", "first"),
    [
        (KeyboardInterrupt(), 130, "interrupted"),
        (_interrupt_while_a_class_is_made(), 130, "interrupted"),
        (RuntimeError("boom"), 2, "error: internal error: RuntimeError: boom"),
    ],
)
def test_interrupt_and_internal_error(
    cli, monkeypatch: pytest.MonkeyPatch, raised: BaseException, code: int, first: str
) -> None:  # type: ignore[no-untyped-def]
    """Ctrl-C exits 130; a bug exits 2 with a hint to re-run with --debug, never a bare traceback."""
    from envpin import api

    def fail(*args: object, **kwargs: object) -> None:
        raise raised

    monkeypatch.setattr(api, "catalog_entries", fail)
    res = cli("catalog")
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.code == code and lines[0] == first and "Traceback" not in res.stderr and res.stdout == ""
    if code == 2:
        assert lines[1] == "hint: re-run as `envpin --debug <the same arguments>` and report the traceback"
        dbg = cli("--debug", "catalog")
        assert dbg.code == 2 and "Traceback" in dbg.stderr
