"""envpin doctor: verdicts from simulated hosts (old drivers, consumer GPUs), the real read path, bad inputs.

This machine has no NVIDIA GPU, so hosts with GPUs are simulated: by Readings values, by the documented
ENVPIN_DOCTOR_FAKE file, by a stand-in libnvidia-ml.so.1 compiled here, and by a stand-in nvidia-smi.
The catalog's facts are real: each test first states the facts it relies on.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from envpin import api
from envpin.doctor import diagnosis, readings
from envpin.doctor.diagnosis import (
    CANNOT_TELL,
    FORWARD_COMPAT,
    WILL_NOT_RUN,
    WILL_RUN,
    diagnose,
    gpu_class,
    parse_branch,
    target_from_ngc,
)
from envpin.doctor.readings import DockerReading, Gpu, Readings

VERDICTS = (WILL_RUN, FORWARD_COMPAT, WILL_NOT_RUN, CANNOT_TELL)
A100 = ("NVIDIA A100-SXM4-40GB", "8.0")
DOCKER_OK = DockerReading(version="24.0.7", runtimes=("nvidia", "runc"))


def host(
    driver: str | None = "535.104.05",
    gpus: tuple[tuple[str, str], ...] = (A100,),
    docker: DockerReading = DOCKER_OK,
    cdi: tuple[str, ...] = (),
    hooks: tuple[str, ...] = (),
) -> Readings:
    return Readings(
        docker=docker,
        driver_version=driver,
        driver_source="test" if driver else None,
        driver_problem=None if driver else "libnvidia-ml.so.1 could not be loaded; nvidia-smi is not on PATH",
        gpus=tuple(Gpu(i, name, cc) for i, (name, cc) in enumerate(gpus)),
        cdi_specs=cdi,
        container_hooks=hooks,
        origin="test",
    )


@pytest.fixture(scope="module")
def r2206() -> diagnosis.Target:
    t = target_from_ngc("22.06-tf2-py3")
    assert (t.driver_min.value, t.driver_compat.value, t.compute_capability_min.value) == (
        "515",
        ["450.51+", "470.57+", "510.47+"],
        "6.0",
    )
    return t


def statuses(d: diagnosis.Diagnosis) -> dict[str, str]:
    return {c.name: c.status for c in d.checks}


# -- verdicts ------------------------------------------------------------------------------------------
def test_new_driver_will_run(r2206: diagnosis.Target) -> None:
    d = diagnose(r2206, host("535.104.05"))
    assert d.verdict == WILL_RUN and d.exit_code == 0
    assert statuses(d) == {"docker": "ok", "driver": "ok", "gpu 0": "ok", "gpu runtime": "ok"}
    assert "driver 535.104.05 meets 22.06's minimum 515" in [c.message for c in d.reasons]


def test_old_driver_on_data_center_gpu_in_listed_branch_is_forward_compat(r2206: diagnosis.Target) -> None:
    d = diagnose(r2206, host("470.82.01", gpus=(A100, ("Tesla T4", "7.5"))))
    assert d.verdict == FORWARD_COMPAT and d.exit_code == 0
    messages = " | ".join(c.message for c in d.reasons)
    assert "driver 470.82.01 is older than 22.06's minimum 515; R470 at 470.57 or later" in messages
    assert "Tesla T4 is a data-center GPU" in messages


def test_same_driver_on_geforce_will_not_run(r2206: diagnosis.Target) -> None:
    d = diagnose(r2206, host("470.82.01", gpus=(("NVIDIA GeForce RTX 3090", "8.6"),)))
    assert d.verdict == WILL_NOT_RUN and d.exit_code == 1
    (reason,) = d.reasons
    assert "GeForce RTX 3090 is a consumer GPU" in reason.message and "install NVIDIA driver 515" in reason.fix


def test_mixed_gpus_are_judged_each(r2206: diagnosis.Target) -> None:
    d = diagnose(r2206, host("510.47.03", gpus=(A100, ("NVIDIA TITAN RTX", "7.5"))))
    assert d.verdict == WILL_NOT_RUN
    assert [c.name for c in d.reasons] == ["gpu 1 forward compatibility"]
    assert d.reasons[0].fix.endswith("""only the data-center GPUs (docker run --gpus '"device=0"')""")


def test_branch_not_listed_will_not_run(r2206: diagnosis.Target) -> None:
    d = diagnose(r2206, host("495.29.05"))
    assert d.verdict == WILL_NOT_RUN
    (reason,) = d.reasons
    assert "R495 is not one of its forward-compatible branches" in reason.message
    assert "R450 at 450.51 or later; R470 at 470.57 or later; R510 at 510.47 or later" in reason.message


def test_listed_branch_but_too_old_within_it(r2206: diagnosis.Target) -> None:
    d = diagnose(r2206, host("450.36.06"))
    assert d.verdict == WILL_NOT_RUN
    assert "forward compatibility needs R450 at 450.51 or later" in d.reasons[0].message


def test_compute_capability_below_minimum_will_not_run(r2206: diagnosis.Target) -> None:
    d = diagnose(r2206, host("535.104.05", gpus=(A100, ("Tesla K80", "3.7"))))
    assert d.verdict == WILL_NOT_RUN
    (reason,) = d.reasons
    assert reason.name == "gpu 1" and "Tesla K80 has compute capability 3.7; 22.06 needs 6.0" in reason.message


def test_unknown_driver_minimum_cannot_tell_with_the_catalog_reason() -> None:
    t = target_from_ngc("24.02")  # no source read gives 24.02's driver minimum
    assert not t.driver_min.known and t.driver_min.reason
    d = diagnose(t, host("535.104.05"))
    assert d.verdict == CANNOT_TELL and d.exit_code == 3
    driver = next(c for c in d.reasons if c.name == "driver")
    assert f"minimum driver: unknown: {t.driver_min.reason}" in driver.message
    assert "release notes for 24.02" in driver.fix


def test_unknown_forward_compat_branches_cannot_tell_for_an_old_driver() -> None:
    # 21.11: the sources read disagree on the data-center branches, so the catalog leaves them unknown.
    t = target_from_ngc("21.11-tf2-py3")
    assert t.driver_min.known and not t.driver_compat.known and "disagree" in (t.driver_compat.reason or "")
    d = diagnose(t, host("460.91.03"))
    assert d.verdict == CANNOT_TELL
    driver = next(c for c in d.checks if c.name == "driver")
    assert driver.status == "unknown" and f"R460 is unknown: {t.driver_compat.reason}" in driver.message


def test_branch_notations_of_the_release_notes() -> None:
    t = target_from_ngc("20.03-tf2-py3")
    assert t.driver_compat.value == ["396", "384.111+", "410", "418.xx", "440.30"]
    for driver, status in (
        ("418.40.04", "forward-compat"),
        ("410.48", "forward-compat"),
        ("396.26", "forward-compat"),
        ("384.111", "forward-compat"),
        ("384.81", "problem"),
        ("440.30", "forward-compat"),
        ("430.50", "problem"),
        ("440.33.01", "ok"),
        ("450.80.02", "ok"),
    ):
        d = diagnose(t, host(driver, gpus=(("Tesla V100-SXM2-16GB", "7.0"),)))
        assert statuses(d)["driver"] == status, driver
    # 20.03's minimum compute capability (6.0) comes from a same-month sibling note; a V100 meets it.
    assert t.compute_capability_min.kind == "sibling" and d.verdict == WILL_RUN


@pytest.mark.parametrize(
    ("text", "branch", "minimum", "words"),
    [
        ("450.51+", 450, (450, 51), "R450 at 450.51 or later"),
        ("384.111+", 384, (384, 111), "R384 at 384.111 or later"),
        ("418.xx", 418, None, "any R418 driver"),
        ("410", 410, None, "any R410 driver"),
        ("440.30", 440, (440, 30), "R440 at 440.30 or later"),
    ],
)
def test_parse_branch(text: str, branch: int, minimum: tuple[int, ...] | None, words: str) -> None:
    b = parse_branch(text)
    assert b is not None and (b.branch, b.minimum, b.describe()) == (branch, minimum, words)


def test_parse_branch_rejects_what_is_not_a_branch() -> None:
    assert parse_branch("R450") is None and parse_branch("450.") is None and parse_branch("") is None


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("Tesla V100-SXM2-16GB", "data-center"),
        ("Tesla K80", "data-center"),
        ("NVIDIA A100-SXM4-80GB", "data-center"),
        ("NVIDIA A100 80GB PCIe", "data-center"),
        ("NVIDIA H100 80GB HBM3", "data-center"),
        ("NVIDIA H200", "data-center"),
        ("NVIDIA L4", "data-center"),
        ("NVIDIA L40S", "data-center"),
        ("NVIDIA A10G", "data-center"),
        ("NVIDIA A30", "data-center"),
        ("NVIDIA A40", "data-center"),
        ("NVIDIA GH200 480GB", "data-center"),
        ("NVIDIA GeForce RTX 4090", "consumer"),
        ("GeForce GTX 1080 Ti", "consumer"),
        ("NVIDIA TITAN V", "consumer"),
        ("Quadro RTX 8000", "workstation"),
        ("NVIDIA RTX A6000", "workstation"),
        ("NVIDIA RTX A4000", "workstation"),
        ("NVIDIA RTX 6000 Ada Generation", "workstation"),
        ("NVIDIA DGX Display", "unknown"),
    ],
)
def test_gpu_class_by_name(name: str, cls: str) -> None:
    assert gpu_class(name) == cls


def test_workstation_gpu_needing_forward_compat_cannot_tell(r2206: diagnosis.Target) -> None:
    d = diagnose(r2206, host("470.82.01", gpus=(("NVIDIA RTX A6000", "8.6"),)))
    assert d.verdict == CANNOT_TELL
    assert "NGC-Ready RTX server SKUs" in d.reasons[0].message and "cuda-compatibility" in d.reasons[0].fix


def test_no_driver_visible_cannot_tell(r2206: diagnosis.Target) -> None:
    d = diagnose(r2206, host(None, gpus=(), docker=DockerReading(version="20.10.24", runtimes=("runc",))))
    assert d.verdict == CANNOT_TELL
    assert [c.name for c in d.reasons] == ["driver", "gpu runtime"]
    assert d.reasons[0].message.startswith("no NVIDIA driver or GPU is visible on this host: libnvidia-ml")
    assert "22.06 needs driver 515 or later" in d.reasons[0].fix


def test_driver_without_gpus_cannot_tell(r2206: diagnosis.Target) -> None:
    d = diagnose(r2206, host("535.104.05", gpus=()))
    assert d.verdict == CANNOT_TELL and [c.name for c in d.reasons] == ["gpus"]


def test_gpu_whose_compute_capability_could_not_be_read(r2206: diagnosis.Target) -> None:
    t4 = Gpu(0, "Tesla T4", None, "compute capability: nvidia-smi of this driver does not report it")
    simulated = dataclasses.replace(host("470.57.02"), gpus=(t4,))
    d = diagnose(r2206, simulated)
    assert d.verdict == CANNOT_TELL
    assert "Tesla T4: compute capability could not be read" in d.reasons[0].message


def test_docker_unreachable_will_not_run(r2206: diagnosis.Target) -> None:
    down = DockerReading(problem="the Docker engine is not reachable: connection refused", hint="start it")
    d = diagnose(r2206, host(docker=down, hooks=("nvidia-container-runtime-hook",)))
    assert d.verdict == WILL_NOT_RUN and [c.name for c in d.reasons] == ["docker"]
    assert d.reasons[0].fix == "start it"


def test_gpu_without_container_runtime_will_not_run(r2206: diagnosis.Target) -> None:
    d = diagnose(r2206, host(docker=DockerReading(version="24.0.7", runtimes=("runc",))))
    assert d.verdict == WILL_NOT_RUN
    assert "containers cannot reach the GPUs" in d.reasons[0].message and "Container Toolkit" in d.reasons[0].fix


def test_cdi_specs_or_gpus_hook_stand_in_for_the_runtime(r2206: diagnosis.Target) -> None:
    plain = DockerReading(version="26.1.0", runtimes=("runc",), cdi_spec_dirs=("/etc/cdi", "/var/run/cdi"))
    assert diagnose(r2206, host(docker=plain, cdi=("/etc/cdi/nvidia.yaml",))).verdict == WILL_RUN
    assert diagnose(r2206, host(docker=plain, hooks=("nvidia-container-runtime-hook",))).verdict == WILL_RUN


def test_read_cdi_specs_keeps_only_nvidia_specs(tmp_path: Path) -> None:
    (tmp_path / "nvidia.yaml").write_text('cdiVersion: "0.5.0"\nkind: nvidia.com/gpu\ndevices: []\n')
    (tmp_path / "vendor.json").write_text('{"kind": "vendor.example/fpga"}')
    (tmp_path / "notes.txt").write_text("nvidia.com/gpu")
    assert readings.read_cdi_specs((str(tmp_path), str(tmp_path / "absent"))) == (str(tmp_path / "nvidia.yaml"),)


def test_release_with_several_tags_is_checked_once() -> None:
    t = target_from_ngc("22.06")
    assert t.label == "NGC 22.06 (22.06-tf1-py3, 22.06-tf2-py3)" and t.image.endswith(":22.06-*")


def test_diagnosis_json_is_complete(r2206: diagnosis.Target) -> None:
    out = diagnose(r2206, host("470.82.01")).to_json()
    assert out["verdict"] == FORWARD_COMPAT and out["exit_code"] == 0
    assert out["target"]["driver_min"] == {"value": "515"}
    assert out["readings"]["docker"]["reachable"] is True and out["readings"]["gpus"][0]["name"] == A100[0]
    json.dumps(out)  # serialisable as is


# -- through the CLI, with the documented fake-readings file ------------------------------------------
def _fake(tmp_path: Path, **over: object) -> Path:
    data = {
        "docker": {"version": "24.0.7", "runtimes": ["nvidia", "runc"]},
        "cdi_specs": [],
        "container_hooks": [],
        "driver": {"version": "470.82.01"},
        "gpus": [{"name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0"}],
    }
    data.update(over)
    path = tmp_path / "readings.json"
    path.write_text(json.dumps(data))
    return path


def test_cli_forward_compat_from_fake_file(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(readings.FAKE_ENV, str(_fake(tmp_path)))
    res = cli("doctor", "--ngc", "22.06-tf2-py3")
    assert res.code == 0 and res.stderr == ""
    lines = res.stdout.splitlines()
    assert lines[0] == f"{FORWARD_COMPAT}: nvcr.io/nvidia/tensorflow:22.06-tf2-py3 on this host"
    assert f"(host readings replaced from {readings.FAKE_ENV}=" in lines[1]
    res = cli("doctor", "--ngc", "22.06-tf2-py3", "--json")
    out = json.loads(res.stdout)
    assert res.code == 0 and out["verdict"] == FORWARD_COMPAT and out["readings"]["driver_version"] == "470.82.01"


def test_cli_geforce_will_not_run_exit_1(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    fake = _fake(tmp_path, gpus=[{"name": "NVIDIA GeForce RTX 3090", "compute_capability": "8.6"}])
    monkeypatch.setenv(readings.FAKE_ENV, str(fake))
    res = cli("doctor", "--ngc", "22.06")
    assert res.code == 1 and res.stdout.startswith(f"{WILL_NOT_RUN}: ") and "consumer GPU" in res.stdout


def test_cli_lock_of_a_rendered_environment(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    env = tmp_path / "env"
    api.render_environment(ngc="22.06-tf2-py3", tf=None, out=env)
    monkeypatch.setenv(readings.FAKE_ENV, str(_fake(tmp_path, driver={"version": "535.104.05"})))
    for args in (("--lock", str(env / "envpin.lock")), ("--lock", str(env))):
        res = cli("doctor", *args)
        assert res.code == 0 and res.stdout.startswith(f"{WILL_RUN}: nvcr.io/nvidia/tensorflow:22.06-tf2-py3")
    res = cli("doctor", cwd=env)  # no flag: the lock of the current directory
    assert res.code == 0 and res.stdout.startswith(WILL_RUN)


def _one_line_error(res, *needles: str) -> None:  # type: ignore[no-untyped-def]
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.code == 2, res.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in res.stderr and res.stdout == ""
    assert len(lines) <= 2 and (len(lines) == 1 or lines[1].startswith("hint: "))
    for needle in needles:
        assert needle in res.stderr


def test_cli_bad_inputs_exit_2(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(readings.FAKE_ENV, str(_fake(tmp_path)))
    _one_line_error(cli("doctor", "--ngc", "22.6"), "'22.6' is not an NGC TensorFlow release")
    _one_line_error(
        cli("doctor", "--ngc", "20.04"),
        "NVIDIA published no TensorFlow container in 20.04",
        "nearest releases: 20.03, 20.06",
    )
    _one_line_error(cli("doctor", "--ngc", "20.13"), "month 13")
    _one_line_error(cli("doctor", "--ngc", "26.01"), "outside the catalog")
    _one_line_error(cli("doctor", "--ngc", "23.06-tf1-py3"), "no tf1-py3 image")
    _one_line_error(cli("doctor", "--ngc", "22.06", "--lock", "x.lock"), "not both")
    _one_line_error(cli("doctor", cwd=tmp_path), "which image? no envpin.lock here or under images/")
    _one_line_error(cli("doctor", "--lock", str(tmp_path / "absent.lock")), "does not exist")


def test_cli_tampered_and_foreign_locks_exit_2(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv(readings.FAKE_ENV, str(_fake(tmp_path)))
    env = tmp_path / "env"
    api.render_environment(ngc="22.06-tf2-py3", tf=None, out=env)
    lock = env / "envpin.lock"
    original = lock.read_text()
    lock.write_text(original.replace('release = "22.06"', 'release = "22.10"'))
    _one_line_error(cli("doctor", "--lock", str(lock)), "edited by hand")
    lock.write_text(original.replace("schema = 2", "schema = 7"))
    _one_line_error(cli("doctor", "--lock", str(lock)), "lock schema 7", "upgrade envpin")
    lock.write_bytes(b"\0\1binary")
    _one_line_error(cli("doctor", "--lock", str(lock)), "binary file")
    lock.write_text("this is [not toml")
    _one_line_error(cli("doctor", "--lock", str(lock)), "not valid TOML")


def test_cli_bad_fake_file_exit_2(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "bad.json"
    monkeypatch.setenv(readings.FAKE_ENV, str(bad))
    _one_line_error(cli("doctor", "--ngc", "22.06"), "cannot read")
    bad.write_text("{")
    _one_line_error(cli("doctor", "--ngc", "22.06"), "is not valid JSON")
    bad.write_text(json.dumps({"driver": {"version": "470.82.01"}}))
    _one_line_error(cli("doctor", "--ngc", "22.06"), "'driver' and 'gpus' come together")
    bad.write_text(json.dumps({"drivers": {}}))
    _one_line_error(cli("doctor", "--ngc", "22.06"), "unknown keys ['drivers']")
    bad.write_text(json.dumps({"driver": {"version": 470}, "gpus": []}))
    _one_line_error(cli("doctor", "--ngc", "22.06"), "'driver.version' must be a string")
    bad.write_text(json.dumps({"driver": {"version": "470.82.01"}, "gpus": [{"name": 1}]}))
    _one_line_error(cli("doctor", "--ngc", "22.06"), "'name' and 'compute_capability' strings")


# -- the real read path (the readers that start no process; the others: tests/cli/test_doctor.py) --------------


def test_no_nvidia_anywhere_is_a_reading_not_a_crash(tmp_path: Path) -> None:
    nv = readings.read_nvidia({"ENVPIN_NVML_LIBRARY": str(tmp_path / "absent.so"), "PATH": str(tmp_path)})
    assert nv["version"] is None and nv["gpus"] == ()
    assert "absent.so could not be loaded" in nv["problem"] and "nvidia-smi is not on PATH" in nv["problem"]


def test_docs_list_every_gpu_class_rule() -> None:
    text = (Path(__file__).resolve().parents[2] / "docs" / "doctor.md").read_text()
    for pattern, cls in diagnosis.GPU_CLASSES:
        assert f"| `{pattern.replace('|', chr(92) + '|')}` | {cls} |" in text, pattern
