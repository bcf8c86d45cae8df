"""`envpin fleet report` (JSON, text, HTML) of a small fixed fleet and the Kubernetes manifests, byte for byte;
the manifests also validate against the Kubernetes OpenAPI schemas (kubernetes-validate, offline).

Regenerate with `pytest tests/golden --update-golden` and review the diff.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from envpin.fleet import kubernetes
from envpin.views import console
from tests.fleetdata import (
    OTHER_WEIGHTS,
    node,
    worker_payload,
    worker_task_result,
    write_fleet,
    write_selftest_run,
    write_slurm_run,
)

HERE = Path(__file__).resolve().parent / "fleet"
#: The Kubernetes release the manifests are validated against (strict: unknown fields are errors), and the
#: oldest one kubernetes-validate still ships schemas for.
K8S_VERSIONS = ("1.30.0", "1.25.0")
IMAGE = "nvcr.io/nvidia/tensorflow:24.05-tf2-py3@sha256:" + "a" * 64
#: An empty zip archive: the goldens show the template's output, not the bytes of this envpin's probe (the real
#: payload in the manifest is checked in tests/unit/test_fleet_cli.py).
EMPTY_ZIP = b"PK\x05\x06" + b"\0" * 18


def _check(name: str, data: bytes, update: bool) -> None:
    path = HERE / name
    if update:
        path.write_bytes(data)
    assert path.exists(), f"{path} missing: run pytest --update-golden"
    assert data == path.read_bytes(), f"fleet/{name} differs from golden (pytest --update-golden)"


@pytest.fixture
def fixed_width(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The text summary at envpin's width for pipes (120 columns), whatever the terminal running the tests."""
    monkeypatch.delenv("COLUMNS", raising=False)
    console._console.cache_clear()
    yield
    console._console.cache_clear()


@pytest.mark.usefixtures("fixed_width")
def test_fleet_report_golden(cli, tmp_path: Path, update_golden: bool) -> None:  # type: ignore[no-untyped-def]
    write_fleet(tmp_path / "reports")
    res = cli("fleet", "report", "reports", "--format", "json", "--html", "fleet.html", cwd=tmp_path)
    assert res.code == 1, res.stderr
    _check("fleet.json", res.stdout.encode(), update_golden)
    _check("fleet.html", (tmp_path / "fleet.html").read_bytes(), update_golden)
    text = cli("fleet", "report", "reports", cwd=tmp_path)
    assert text.code == 1
    _check("summary.txt", text.stdout.encode(), update_golden)


@pytest.mark.usefixtures("fixed_width")
def test_fleet_report_of_an_incomplete_fleet_golden(cli, tmp_path: Path, update_golden: bool) -> None:  # type: ignore[no-untyped-def]
    """A Slurm run's folder (two reports, a failed and a timed-out node) against the node list of the
    partition, which names one node that left nothing and misses one that reported: the verdict is failed."""
    write_slurm_run(
        tmp_path / "fleet",
        {"gpu-01": node("gpu-01"), "gpu-02": node("gpu-02"), "gpu-09": node("gpu-09")},
        {
            "gpu-03": ("failed", "no result from the node: python3 is not installed on the node (not found on PATH)"),
            "gpu-04": ("timed_out", "the probe did not finish within 300 s"),
        },
    )
    (tmp_path / "nodes.txt").write_text("gpu-01\ngpu-02\ngpu-03\ngpu-04\ngpu-05\n")
    args = ("fleet", "report", "fleet", "--expect-nodes", "nodes.txt")
    res = cli(*args, "--format", "json", "--html", "fleet.html", cwd=tmp_path)
    assert res.code == 1, res.stderr
    _check("incomplete.json", res.stdout.encode(), update_golden)
    _check("incomplete.html", (tmp_path / "fleet.html").read_bytes(), update_golden)
    text = cli(*args, cwd=tmp_path)
    assert text.code == 1
    _check("incomplete-summary.txt", text.stdout.encode(), update_golden)


@pytest.mark.usefixtures("fixed_width")
def test_fleet_report_of_a_selftest_run_golden(cli, tmp_path: Path, update_golden: bool) -> None:  # type: ignore[no-untyped-def]
    """A `fleet selftest --slurm` folder whose second worker did not repeat itself: the nodes are consistent,
    the self-test is a breaking difference, with its table of workers."""
    write_selftest_run(
        tmp_path / "selftest",
        {
            "gpu-01": worker_task_result(worker_payload(0), worker_payload(0, OTHER_WEIGHTS)),
            "gpu-02": worker_task_result(worker_payload(1), worker_payload(1, OTHER_WEIGHTS)),
        },
    )
    res = cli("fleet", "report", "selftest", "--format", "json", cwd=tmp_path)
    assert res.code == 1, res.stderr
    _check("selftest.json", res.stdout.encode(), update_golden)
    text = cli("fleet", "report", "selftest", cwd=tmp_path)
    assert text.code == 1
    _check("selftest-summary.txt", text.stdout.encode(), update_golden)


# The default runs the self-test where the image has TensorFlow (as the probe does in every image).
@pytest.mark.parametrize(("name", "selftest"), [("kubernetes.yaml", None), ("kubernetes-no-selftest.yaml", False)])
def test_manifest_golden(name: str, selftest: bool | None, update_golden: bool) -> None:
    manifest = kubernetes.render(IMAGE, "envpin", EMPTY_ZIP, selftest=selftest)
    _check(name, manifest.text.encode(), update_golden)


@pytest.mark.parametrize("name", ["kubernetes.yaml", "kubernetes-no-selftest.yaml"])
@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_manifest_validates_against_kubernetes_schemas(name: str, version: str) -> None:
    docs = list(yaml.safe_load_all((HERE / name).read_text()))
    assert [d["kind"] for d in docs] == ["ConfigMap", "DaemonSet"]
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)  # raises ValidationError
    config_map, daemon_set = docs
    assert base64.b64decode(config_map["binaryData"]["envpin.pyz"]) == EMPTY_ZIP
    spec = daemon_set["spec"]["template"]["spec"]
    (probe,) = spec["initContainers"]
    assert probe["resources"]["limits"] == {"nvidia.com/gpu": 1}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec["tolerations"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {t["matchExpressions"][0]["key"] for t in terms} == set(kubernetes.GPU_NODE_LABELS)
    assert {"name": "ENVPIN_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in probe["env"]
    assert (
        daemon_set["spec"]["selector"]["matchLabels"].items()
        <= daemon_set["spec"]["template"]["metadata"]["labels"].items()
    )


def test_a_broken_manifest_is_refused_by_the_validator() -> None:
    """The validation above can fail: an unknown field and a wrong type are errors."""
    _, daemon_set = yaml.safe_load_all((HERE / "kubernetes.yaml").read_text())
    daemon_set["spec"]["template"]["spec"]["initContainers"][0]["resourcez"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemon_set, K8S_VERSIONS[0], strict=True)
    _, daemon_set = yaml.safe_load_all((HERE / "kubernetes.yaml").read_text())
    daemon_set["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = "soon"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemon_set, K8S_VERSIONS[0], strict=True)


def test_selftest_manifest_golden(update_golden: bool) -> None:
    manifest = kubernetes.render_selftest(IMAGE, "envpin", EMPTY_ZIP, workers=3)
    _check("kubernetes-selftest.yaml", manifest.text.encode(), update_golden)


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_selftest_manifest_validates_against_kubernetes_schemas(version: str) -> None:
    """The indexed Job of the multi-worker self-test: one pod per index on distinct GPU nodes, each named in
    the headless Service's subdomain, TF_CONFIG built from JOB_COMPLETION_INDEX over the same worker list."""
    docs = list(yaml.safe_load_all((HERE / "kubernetes-selftest.yaml").read_text()))
    assert [d["kind"] for d in docs] == ["ConfigMap", "Service", "Job"]
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)  # raises ValidationError
    config_map, service, job = docs
    assert base64.b64decode(config_map["binaryData"]["envpin.pyz"]) == EMPTY_ZIP
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 3 and job["spec"]["backoffLimit"] == 0
    spec = job["spec"]["template"]["spec"]
    assert service["spec"]["clusterIP"] == "None" and spec["subdomain"] == service["metadata"]["name"]
    assert service["spec"]["selector"].items() <= job["spec"]["template"]["metadata"]["labels"].items()
    (anti,) = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert anti["topologyKey"] == "kubernetes.io/hostname"
    assert anti["labelSelector"]["matchLabels"].items() <= job["spec"]["template"]["metadata"]["labels"].items()
    (probe,) = spec["initContainers"]
    (worker,) = spec["containers"]
    assert probe["name"] == "envpin-probe" and "--no-selftest" in probe["command"]
    assert worker["resources"]["limits"] == {"nvidia.com/gpu": 1}
    env = {e["name"]: e.get("value") for e in worker["env"]}
    hosts = env["ENVPIN_WORKER_HOSTS"].split(",")
    assert hosts == [f"{job['metadata']['name']}-{i}.{service['metadata']['name']}" for i in range(3)]
    assert env["TF_DETERMINISTIC_OPS"] == "1" and env["PYTHONPATH"] == "/opt/envpin/envpin.pyz"
    ports = [p["port"] for p in service["spec"]["ports"]]
    assert [p["containerPort"] for p in worker["ports"]] == ports == [20000, 20001]


def test_the_selftest_launcher_builds_each_pods_tf_config(tmp_path: Path) -> None:
    """The worker container's launcher, run as the pod runs it (index 2 of 3), with a stand-in for the worker
    module that prints the TF_CONFIG it was given: one line per run, the run's port, the pod's own index."""
    import json
    import os
    import subprocess
    import sys

    stub = tmp_path / "envpin" / "probe"
    stub.mkdir(parents=True)
    (tmp_path / "envpin" / "__init__.py").write_text("")
    (stub / "__init__.py").write_text("")
    (stub / "replicas.py").write_text(
        "import json, os, sys\nprint(json.dumps([json.loads(os.environ['TF_CONFIG']), sys.argv[1:]]))\n"
    )
    docs = list(yaml.safe_load_all(kubernetes.render_selftest(IMAGE, "envpin", EMPTY_ZIP, workers=3).text))
    (worker,) = docs[2]["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in worker["env"] if "value" in e}
    command = [sys.executable, *worker["command"][1:]]
    proc = subprocess.run(
        command,
        env={**os.environ, **env, "PYTHONPATH": str(tmp_path), "JOB_COMPLETION_INDEX": "2"},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,  # python -c puts the working folder first on the path: the stand-in, not this checkout
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2
    for k, line in enumerate(lines):
        config, args = json.loads(line)
        assert config == {
            "cluster": {"worker": [f"envpin-selftest-{i}.envpin-selftest:{20000 + k}" for i in range(3)]},
            "task": {"type": "worker", "index": 2},
        }
        assert args == ["--worker", "--resolver", "tf_config"]
