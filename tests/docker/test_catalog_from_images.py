"""The registry completes the catalog: `catalog sync` into the image-facts cache, `render` reading an unknown
TensorFlow version from the image config, and `build` cross-checking what the base declares.

Stand-in images FROM the 20.02 stand-in are pushed to a repository of their own (envpin-facts-test/...), so the
shared stand-ins are never touched. Their ENV says what a test needs, not what NVIDIA's images hold:
- 23.10-tf2-py3 declares a TensorFlow version (and cuDNN, NCCL) that no written source gives for that tag, and
  the base stack the catalog holds for 23.10 otherwise;
- 20.02-tf2-py3 declares TensorFlow 1.15.2, contradicting the catalog's 2.1;
- 20.03-tf2-py3 declares TensorFlow 2.1.9 and CUDA 10.1.243 where NVIDIA's sources say 2.1 and 10.2.89;
- cuda-differs declares the 20.02 tf2 image's TensorFlow with another CUDA.
This repository is not the catalog's (nvcr.io/nvidia/tensorflow), so what it declares is graded "mirror": it
fills values no written source gives and never replaces one (docs/catalog-sync.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from envpin.environment import lockfile
from envpin.knowledge import catalog, facts
from tests.conftest import run_envpin
from tests.engines import push_with_env

PREFIX = "envpin-facts-test"
REPO = f"{PREFIX}/nvidia/tensorflow"


def _stack_23_10() -> dict[str, str]:
    """23.10's base stack as the catalog holds it, so only the gaps are news."""
    e = next(x for x in catalog.load(cache=False).entries() if x.tag == "23.10-tf2-py3")
    branches = [v.split(".")[0] for v in e.value("driver_compat") if v.split(".")[0] != e.value("driver_min")]
    cuda_min = ".".join(e.value("cuda").split(".")[:2])
    require = " ".join([f"cuda>={cuda_min}", *(f"brand=tesla,driver>={b},driver<{int(b) + 1}" for b in branches)])
    return {
        "CUDA_VERSION": e.value("cuda"),
        "CUDA_DRIVER_VERSION": e.value("driver_min"),
        "NVIDIA_REQUIRE_CUDA": require,
    }


def _push(client: Any, base: str, tag: str, env: dict[str, str]) -> str:
    return push_with_env(client, base, REPO, tag, env, "image-facts")


@pytest.fixture(scope="module")
def images(docker_client: Any, stand_in_image: str) -> dict[str, str]:
    return {
        "23.10": _push(
            docker_client,
            stand_in_image,
            "23.10-tf2-py3",
            {
                **_stack_23_10(),
                "TENSORFLOW_VERSION": "2.14.0",
                "NVIDIA_TENSORFLOW_VERSION": "23.10-tf2",
                "CUDNN_VERSION": "8.9.5.29",
                "NCCL_VERSION": "2.19.3",
                "CUBLAS_VERSION": "",
                "TENSORRT_VERSION": "",
                "HOROVOD_VERSION": "",
                "PYVER": "",
                "NVIDIA_BUILD_ID": "",
            },
        ),
        "tf1-as-tf2": _push(
            docker_client,
            stand_in_image,
            "20.02-tf2-py3",
            {"TENSORFLOW_VERSION": "1.15.2", "NVIDIA_TENSORFLOW_VERSION": "20.02-tf1"},
        ),
        "20.03": _push(
            docker_client,
            stand_in_image,
            "20.03-tf2-py3",
            {"TENSORFLOW_VERSION": "2.1.9", "CUDA_VERSION": "10.1.243", "NVIDIA_TENSORFLOW_VERSION": "20.03-tf2"},
        ),
        "cuda-differs": _push(docker_client, stand_in_image, "cuda-differs", {"CUDA_VERSION": "10.1.243"}),
    }


def test_sync_keeps_image_facts_that_every_command_then_uses(images: dict[str, str], tmp_path: Path) -> None:
    res = run_envpin("catalog", "sync", "--registry", f"127.0.0.1:5000/{PREFIX}", "--release", "23.10")
    assert res.code == 0, res.stderr
    assert "tf_version" in res.stdout and "filled" in res.stdout and "disagrees" not in res.stdout
    # The coverage table: three gaps filled (tf_version, cudnn, nccl), the base stack now image evidence.
    assert "catalog coverage" in res.stdout
    unknown_row = next(line for line in res.stdout.splitlines() if "unknown" in line)
    before, after = (int(x) for x in unknown_row.replace("│", " ").split()[1:3])
    assert before - after == 3
    cache = facts.cache_path()
    assert f"image facts kept in {cache}" in res.stdout
    assert f"127.0.0.1:5000/{REPO} is not the catalog's repository nvcr.io/nvidia/tensorflow" in res.stdout
    (key,) = json.loads(cache.read_text())["images"]
    assert key.startswith(f"127.0.0.1:5000/{REPO}@sha256:")  # keyed by where it was read and what it is
    assert json.loads(cache.read_text())["images"][key]["declared"]["tf_version"] == "2.14.0"

    shown = run_envpin("catalog", "show", "23.10-tf2-py3", "--json")
    entry = json.loads(shown.stdout)[0]
    # A gap no written source fills: the mirror fills it, at its own grade, named by registry@digest.
    assert entry["tf_version"] == "2.14.0" and entry["provenance"]["tf_version"]["kind"] == "mirror"
    assert entry["provenance"]["tf_version"]["source"] == key
    assert entry["provenance"]["cuda"]["kind"] != "mirror"  # a known value is not replaced
    listed = run_envpin("catalog", "--tf", "2.14")
    assert listed.code == 0 and "23.10-tf2-py3" in listed.stdout and "carry what their image config" in listed.stdout

    out = tmp_path / "env"
    rendered = run_envpin("render", "--ngc", "23.10-tf2-py3", "--out", str(out))
    assert rendered.code == 0, rendered.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert (plan["tf_version"], plan["tf_version_source"], plan["recipe"]["id"]) == (
        "2.14.0",
        "image",
        "ngc-tf2.8-2.15",
    )
    assert "FROM nvcr.io/nvidia/tensorflow:23.10-tf2-py3\n" in (out / "Dockerfile").read_text()
    # A teammate without this cache finds the committed lock current.
    cache.unlink()
    check = run_envpin("lock", "--check", "--lock", str(out / "envpin.lock"))
    assert check.code == 0, check.stdout


def test_sync_no_save_only_compares(images: dict[str, str]) -> None:
    res = run_envpin(
        "catalog", "sync", "--registry", f"127.0.0.1:5000/{PREFIX}", "--release", "23.10-tf2-py3", "--no-save", "--json"
    )
    assert res.code == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["cache"] is None and not facts.cache_path().exists()
    # From a mirror: tf_version, cudnn and nccl (unknown before) would come from it; the known values stay.
    before, after = report["coverage"]["before"], report["coverage"]["after"]
    assert after.get("mirror", 0) == before.get("mirror", 0) + 3 and after.get("image") == before.get("image")
    assert report["tags"][0]["grade"] == "mirror" and report["upstream"] == "nvcr.io/nvidia/tensorflow"


def test_a_stand_ins_facts_never_silently_replace_nvidias(images: dict[str, str]) -> None:
    """A stand-in for 20.03-tf2-py3 (TensorFlow 2.1.9, CUDA 10.1.243) in another registry: sync reports the
    disagreement; afterwards NVIDIA's values stay, and each command that uses the tag says, in one warning
    line, which value it keeps and where both come from."""
    res = run_envpin(
        "catalog", "sync", "--registry", f"127.0.0.1:5000/{PREFIX}", "--release", "20.03-tf2-py3", "--json"
    )
    assert res.code == 1, res.stderr  # CUDA disagrees
    (tag,) = json.loads(res.stdout)["tags"]
    assert tag["grade"] == "mirror" and tag["fields"]["tf_version"]["status"] == "more precise"
    where = f"127.0.0.1:5000/{REPO}@{tag['image']['digest']}"

    disagreeing = {k for k, v in tag["fields"].items() if v["status"] == "disagrees"}
    assert "cuda" in disagreeing  # and what the 20.02 stand-in it was built on declares (NCCL, driver branches)

    shown = run_envpin("catalog", "show", "20.03-tf2-py3")
    assert shown.code == 0, shown.stderr
    warnings = shown.stderr.strip().splitlines()
    # One line per contradicted value: the same ones sync reported.
    assert {w.split(":")[1].split()[1] for w in warnings} == disagreeing and len(warnings) == len(disagreeing)
    warning = next(w for w in warnings if w.startswith("warning: 20.03-tf2-py3 cuda:"))
    assert warning.startswith(f"warning: 20.03-tf2-py3 cuda: the image config {where} declares 10.1.243")
    assert "says 10.2.89; envpin keeps 10.2.89" in warning and "rel_20-03.html" in warning
    assert f"image config {where}" in shown.stdout and "grade mirror" in shown.stdout
    row = json.loads(run_envpin("catalog", "show", "20.03-tf2-py3", "--json").stdout)[0]
    assert (row["tf_version"], row["provenance"]["tf_version"]["kind"]) == ("2.1", "nvidia")
    assert row["cuda"] == "10.2.89" and row["image_configs"][0]["read_from"] == where
    dry = run_envpin("build", "--dry-run", "--ngc", "20.03-tf2-py3")
    assert dry.code == 0 and json.loads(dry.stdout)["tf_version"] == "2.1", dry.stderr
    assert dry.stderr.count("warning: 20.03-tf2-py3 cuda:") == 1 and dry.stderr.count("warning:") == len(warnings)


def test_render_reads_an_unknown_tf_from_the_image_config(images: dict[str, str], tmp_path: Path) -> None:
    dry = run_envpin("build", "--dry-run", "--ngc", "23.10-tf2-py3", "--base-image", images["23.10"])
    assert dry.code == 0, dry.stderr
    assert json.loads(dry.stdout)["tf_version"] == "2.14.0" and not facts.cache_path().exists()

    out = tmp_path / "env"
    res = run_envpin("render", "--ngc", "23.10-tf2-py3", "--base-image", images["23.10"], "--out", str(out))
    assert res.code == 0, res.stderr
    assert f"read TensorFlow 2.14.0 from the image config of {images['23.10']}" in res.stderr
    assert f"kept in {facts.cache_path()}" in res.stderr
    lock = lockfile.read(out / "envpin.lock")
    assert (lock.inputs.tf_version, lock.inputs.tf_version_source) == ("2.14.0", "image")
    assert lock.base.digest and lock.base.declared["TENSORFLOW_VERSION"] == "2.14.0"
    assert f"FROM {images['23.10']}@{lock.base.digest}\n" in (out / "Dockerfile").read_text()


def test_render_says_why_when_the_config_cannot_be_read(images: dict[str, str], tmp_path: Path) -> None:
    missing = f"127.0.0.1:5000/{REPO}:23.11-tf2-py3"
    res = run_envpin("render", "--ngc", "23.10-tf2-py3", "--base-image", missing, "--out", str(tmp_path / "e"))
    assert res.code == 2 and not (tmp_path / "e").exists()
    error, hint = res.stderr.strip().splitlines()
    assert error.startswith("error: the catalog does not know which TensorFlow 23.10-tf2-py3 contains, and")
    assert "has no tag or manifest '23.11-tf2-py3'" in error and hint.startswith("hint: give it as --tf")
    wrong = run_envpin(
        "render", "--ngc", "23.10-tf2-py3", "--base-image", images["tf1-as-tf2"], "--out", str(tmp_path / "e")
    )
    assert wrong.code == 2 and "declares it is NGC 20.02-tf1" in wrong.stderr


def test_build_refuses_a_base_whose_tensorflow_contradicts_the_catalog(images: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "env"
    res = run_envpin("build", "--ngc", "20.02-tf2-py3", "--base-image", images["tf1-as-tf2"], "--out", str(out))
    assert res.code == 2 and res.stdout == "" and not out.exists()
    error, hint = res.stderr.strip().splitlines()
    assert "declares TensorFlow 1.15.2" in error and "the plan is for TensorFlow 2.1 (from the catalog)" in error
    assert hint.startswith("hint: build from a copy of 20.02-tf2-py3")


def test_build_warns_about_other_differences_and_records_what_the_base_declares(
    images: dict[str, str], tmp_path: Path
) -> None:
    out = tmp_path / "env"
    res = run_envpin("build", "--ngc", "20.02-tf2-py3", "--base-image", images["cuda-differs"], "--out", str(out))
    assert res.code == 0, res.stderr
    cuda = next(e for e in catalog.load().entries() if e.tag == "20.02-tf2-py3").value("cuda")
    warning = f"warning: {images['cuda-differs']} declares CUDA_VERSION 10.1.243; the catalog says cuda {cuda}"
    assert warning in res.stderr
    declared = lockfile.read(out / "envpin.lock").base.declared
    assert declared["CUDA_VERSION"] == "10.1.243" and declared["TENSORFLOW_VERSION"] == "2.1.0"
    assert declared["NVIDIA_TENSORFLOW_VERSION"] == "20.02-tf2"
