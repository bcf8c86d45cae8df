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
from tests.fleetdata import node, write_fleet, write_slurm_run

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
