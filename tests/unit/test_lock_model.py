"""The typed lock: derive, serialise, refuse bad shapes, record and verify with one golden-hash rule."""

from __future__ import annotations

import copy
import hashlib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from envpin import api
from envpin.environment import lockfile
from envpin.environment.lockfile import Lock, self_hash
from envpin.environment.plan import make_plan
from envpin.environment.render import render, write_environment
from envpin.errors import LockError
from envpin.probe import collect, fields
from tests.unit.lock_reports import as_lock_image

DEVICE = "cpu:x86-64-v3;intra_op=2;inter_op=2;onednn=on"
OTHER = "cpu:x86-64-v4;intra_op=1;inter_op=1;onednn=off"


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    return collect()


def _with_golden(report: dict[str, Any], digest: str, device: str = DEVICE) -> dict[str, Any]:
    out = copy.deepcopy(report)
    out["selftest"] = {"golden": {"hash": digest, "device_class": device, "runs_equal": True}}
    return out


def _folder(tmp_path: Path) -> Path:
    plan = make_plan(ngc="20.02", tf="2.1")
    out = tmp_path / "env"
    write_environment(out, plan, render(plan))
    return out / lockfile.LOCK_NAME


def test_round_trip_is_byte_stable(tmp_path: Path) -> None:
    path = _folder(tmp_path)
    raw = path.read_bytes()
    lock = lockfile.read(path)
    assert lock.dumps() == raw
    assert lockfile.loads(raw.decode()) == lock


def test_record_from_selftest_then_plain_verify_is_not_breaking(tmp_path: Path, report: dict[str, Any]) -> None:
    """Regression: a plain report lacks the golden hash; it is compared on the fingerprint alone."""
    path = _folder(tmp_path)
    with_selftest = _with_golden(report, "sha256:" + "a" * 64)
    lock, done = lockfile.read(path).record(with_selftest)
    assert done == [f"expected fingerprint {lock.expected.fingerprint}", f"golden hash for {DEVICE}"]  # type: ignore[union-attr]
    lock.write(path)
    checked = lockfile.read(path).verify(report)
    assert [d for d in checked.differences if d.severity == fields.BREAKING] == []
    assert checked.notes == [lockfile.golden_not_checked()]
    assert checked.expected_fingerprint == checked.actual_fingerprint


def test_golden_hash_has_one_home(tmp_path: Path, report: dict[str, Any]) -> None:
    """Regression: a changed golden hash is one breaking row, not two (it is not a fingerprint field)."""
    path = _folder(tmp_path)
    lock, _ = lockfile.read(path).record(_with_golden(report, "sha256:" + "a" * 64))
    lock.write(path)
    text = path.read_text()
    assert text.count("a" * 64) == 1 and "[golden]" in text
    assert not any(k.startswith("golden.") for k in lock.expected.fields)  # type: ignore[union-attr]
    checked = lockfile.read(path).verify(_with_golden(report, "sha256:" + "b" * 64))
    assert [(d.key, d.severity) for d in checked.differences if d.severity != fields.INFO] == [
        (f"golden.{DEVICE}", fields.BREAKING)
    ]
    assert checked.notes == []


def test_new_device_class_is_info_and_recorded_deliberately(tmp_path: Path, report: dict[str, Any]) -> None:
    path = _folder(tmp_path)
    lock, _ = lockfile.read(path).record(_with_golden(report, "sha256:" + "a" * 64))
    other = _with_golden(report, "sha256:" + "c" * 64, OTHER)
    diffs = lock.verify(other).differences
    assert [(d.key, d.severity) for d in diffs] == [("golden." + OTHER, fields.INFO)]
    again, done = lock.record(other)
    assert done == ["golden hash for " + OTHER]
    assert again.expected == lock.expected and set(again.golden) == {DEVICE, OTHER}
    with pytest.raises(LockError, match="already records golden hash"):
        again.record(_with_golden(report, "sha256:" + "d" * 64))


def test_verify_environment_records_once(tmp_path: Path, report: dict[str, Any]) -> None:
    import json

    path = _folder(tmp_path)
    report = as_lock_image(report, path)
    rpath = tmp_path / "r.json"
    rpath.write_text(json.dumps(report))
    first = api.verify_environment(path, rpath, record=True)
    assert first.recorded and first.exit_code == 0 and first.source == str(rpath)
    before = path.read_bytes()
    second = api.verify_environment(path, rpath, record=True)
    assert second.recorded == [] and path.read_bytes() == before
    changed = copy.deepcopy(report)
    changed["env"]["OMP_NUM_THREADS"] = {"value": "7", "source": "os.environ"}
    rpath.write_text(json.dumps(changed))
    res = api.verify_environment(path, rpath)
    assert res.exit_code == 1 and [d.key for d in res.diffs if d.severity == fields.BREAKING] == ["env.OMP_NUM_THREADS"]


def test_verify_without_expected_is_a_usage_error(tmp_path: Path, report: dict[str, Any]) -> None:
    with pytest.raises(LockError, match="has no 'expected' table"):
        lockfile.read(_folder(tmp_path)).verify(report)


def test_lock_with_only_a_fingerprint(tmp_path: Path, report: dict[str, Any]) -> None:
    lock = lockfile.read(_folder(tmp_path))
    fp = lockfile.fingerprint_fields(report)
    only = replace(lock, expected=lockfile.Expected(fields.fingerprint_of_fields(fp)))
    assert only.verify(report).differences == []
    wrong = replace(lock, expected=lockfile.Expected("sha256:" + "0" * 64))
    assert [d.key for d in wrong.verify(report).differences] == ["fingerprint"]


def test_results_carry_over_only_for_the_same_inputs(tmp_path: Path, report: dict[str, Any]) -> None:
    plan = make_plan(ngc="20.02", tf="2.1")
    files = render(plan)
    recorded, _ = Lock.from_plan(plan, files).record(_with_golden(report, "sha256:" + "a" * 64))
    same = Lock.from_plan(plan, files, recorded)
    assert same.expected == recorded.expected and same.golden == recorded.golden
    other_plan = make_plan(ngc="20.03", tf="2.1")
    other = Lock.from_plan(other_plan, render(other_plan), recorded)
    assert other.expected is None and other.golden == {}


def _tampered(tmp_path: Path, edit: Any) -> Path:
    """A lock whose content was changed and whose self-hash was then recomputed (shape errors only)."""
    import tomli_w

    from envpin._compat import tomllib

    path = _folder(tmp_path)
    data = tomllib.loads(path.read_text())
    edit(data)
    data["lock"]["self_hash"] = self_hash(data)
    path.write_text(tomli_w.dumps(data))
    return path


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda d: d.__setitem__("inputs", "x"), r"\[inputs\] is missing or not a table"),
        (lambda d: d["lock"].__setitem__("inputs_hash", 5), "lock.inputs_hash must be"),
        (lambda d: d["lock"].__setitem__("inputs_hash", "sha256:zz/../../etc"), "lock.inputs_hash must be a digest"),
        (lambda d: d["lock"].__setitem__("inputs_hash", "sha256:" + "A" * 64), "lock.inputs_hash must be a digest"),
        (lambda d: d["files"].__setitem__("Dockerfile", "md5:" + "0" * 32), "must be a digest"),
        (lambda d: d.__setitem__("golden", [1]), "golden must map names to strings"),
        (lambda d: d.__setitem__("build", {"image_id": "x"}), "unknown key 'build'"),
        (lambda d: d["inputs"].pop("tag"), "inputs.tag must be"),
        (lambda d: d["recipe"].__setitem__("unset", "TF_X"), "recipe.unset must be a list"),
        (lambda d: d.__setitem__("expected", {"fingerprint": 3}), "must be a 'sha256:...' string"),
        (lambda d: d["lock"].__setitem__("schema", 1), "lock schema 1"),
        (lambda d: d["lock"].__setitem__("schema", True), "lock schema True"),
        (lambda d: d["lock"].__setitem__("schema", 2.0), "lock schema 2.0"),
    ],
)
def test_wrong_shapes_are_one_lock_error(tmp_path: Path, edit: Any, needle: str) -> None:
    with pytest.raises(LockError, match=needle):
        lockfile.read(_tampered(tmp_path, edit))


def test_hand_edit_is_detected(tmp_path: Path) -> None:
    path = _folder(tmp_path)
    path.write_text(path.read_text().replace('TF_DETERMINISTIC_OPS = "1"', 'TF_DETERMINISTIC_OPS = "0"'))
    with pytest.raises(LockError, match="edited by hand"):
        lockfile.read(path)


def test_stale_against_names_the_file(tmp_path: Path) -> None:
    path = _folder(tmp_path)
    lock = lockfile.read(path)
    plan = make_plan(ngc="20.02", tf="2.1")
    assert lock.stale_against(plan, render(plan), path.parent) == []
    (path.parent / "plan.json").write_text("{}\n")
    assert lock.stale_against(plan, render(plan), path.parent) == [f"plan.json: missing or edited in {path.parent}"]


def test_files_outside_the_folder_are_refused(tmp_path: Path) -> None:
    path = _tampered(tmp_path, lambda d: d["files"].__setitem__("../../etc/passwd", "sha256:" + "0" * 64))
    with pytest.raises(LockError, match="not inside the environment folder"):
        lockfile.read(path)


def test_force_render_removes_an_older_envpins_generated_files(tmp_path: Path) -> None:
    """An earlier layout's generated copy goes on `render --force`, an edited one stays."""
    import tomli_w

    path = _folder(tmp_path)
    folder = path.parent
    (folder / "envpin" / "probe").mkdir(parents=True)
    (folder / "envpin" / "probe" / "cpu.py").write_text("generated\n")
    (folder / "envpin" / "notes.py").write_text("edited since\n")
    generated = "sha256:" + hashlib.sha256(b"generated\n").hexdigest()
    old = {"lock": {"schema": 1}, "files": {"envpin/probe/cpu.py": generated, "envpin/notes.py": "sha256:" + "0" * 64}}
    path.write_text(tomli_w.dumps(old))
    plan = make_plan(ngc="20.02", tf="2.1")
    with pytest.raises(Exception, match="cannot be trusted"):
        write_environment(folder, plan, render(plan))
    write_environment(folder, plan, render(plan), force=True)
    assert not (folder / "envpin" / "probe").exists()
    assert (folder / "envpin" / "notes.py").read_text() == "edited since\n"
    assert lockfile.read(path).inputs.tag == "20.02-tf2-py3"


def test_cli_record_with_selftest_then_plain_verify(cli, tmp_path: Path, report: dict[str, Any]) -> None:  # type: ignore[no-untyped-def]
    """Through the CLI: recorded from a self-test report, verified with a plain one: not breaking, and said so."""
    import json

    lock = _folder(tmp_path)
    report = as_lock_image(report, lock)
    with_selftest, plain = tmp_path / "selftest.json", tmp_path / "plain.json"
    with_selftest.write_text(json.dumps(_with_golden(report, "sha256:" + "a" * 64)))
    plain.write_text(json.dumps(report))
    rec = cli("verify", "--lock", str(lock), "--report", str(with_selftest), "--record")
    assert rec.code == 0, rec.stderr
    assert "recorded: expected fingerprint sha256:" in rec.stderr
    assert f"recorded: golden hash for {DEVICE}" in rec.stderr
    res = cli("verify", "--lock", str(lock), "--report", str(plain))
    assert res.code == 0, res.stdout
    not_checked = (
        "golden training hash: none checked (the report has no self-test: probe with `envpin probe --selftest`)"
    )
    out = res.stdout.splitlines()
    # the report is a host probe, which leaves the installed files out unless asked: said, never assumed
    assert out[0] == "identical in what was compared (2 things not compared)"
    assert f"not compared: {not_checked}" in out and not any(line.startswith("golden hash") for line in out)
    assert any(
        line.startswith("not compared: installed files against RECORD: the probe left them out")
        and "envpin probe --check-files" in line
        for line in out
    ), out
    assert res.stderr.splitlines()[0] == f"verify: report {plain} against the reference of {lock}"
    doc = json.loads(cli("verify", "--lock", str(lock), "--report", str(plain), "--json").stdout)
    assert doc["verdict"] == "identical" and doc["notes"] == [] and doc["recorded"] == []
    assert doc["not_checked"][-1] == not_checked and len(doc["not_checked"]) == 2
    assert doc["checked"][0].endswith(" fingerprint fields")
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(_with_golden(report, "sha256:" + "b" * 64)))
    bad = cli("verify", "--lock", str(lock), "--report", str(changed), "--json")
    assert bad.code == 1 and json.loads(bad.stdout)["verdict"] == "1 breaking difference"


def test_cli_verify_errors_are_one_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    lock = _folder(tmp_path)
    for args, needle in (
        (("--lock", str(lock)), "has no 'expected' table"),
        (("--lock", str(lock.parent)), "has no 'expected' table"),  # a folder: its envpin.lock
        (("--lock", str(tmp_path / "none.lock")), "does not exist"),
        (("--lock", str(tmp_path)), f"lock file {tmp_path / 'envpin.lock'} does not exist"),
        (("--lock", str(lock), "--force"), "--force only applies to --record"),
        (("--lock", str(lock), "--host", "--report", "r.json"), "give --report FILE or --host, not both"),
    ):
        res = cli("verify", *args)
        lines = [line for line in res.stderr.splitlines() if line.strip()]
        assert res.code == 2 and res.stdout == "" and len(lines) == 2, res.stderr
        assert lines[0].startswith("error: ") and needle in lines[0] and lines[1].startswith("hint: ")
