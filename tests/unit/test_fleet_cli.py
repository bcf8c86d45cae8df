"""`envpin fleet report` and `fleet manifest` through the real CLI, and what the report reader accepts: probe
reports, `kubectl logs --prefix` output and `kubectl get pods -o json`, as docs/fleet.md collects them."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from envpin.environment import payload
from envpin.errors import ReportError
from envpin.fleet import inputs as fleetinput
from envpin.fleet.aggregate import FAILED, TIMED_OUT, NodeFailure
from tests.conftest import run_envpin
from tests.fleetdata import PROBE, kubernetes_files, node, pod, prefixed, write_fleet

DIGEST = "sha256:" + "a" * 64
PINNED = f"nvcr.io/nvidia/tensorflow:24.05-tf2-py3@{DIGEST}"


def _report_text(report: dict[str, Any]) -> str:
    return json.dumps(report, sort_keys=True, indent=2, ensure_ascii=True) + "\n"


# --- the reader ----------------------------------------------------------------------------------------------


def test_kubectl_prefixed_log_is_split_per_pod() -> None:
    log = prefixed("p1", _report_text(node("gpu-1"))) + prefixed("p2", "python3: can't open file\n")
    out = fleetinput.parse_kubectl_log(log)
    assert out["p1"]["host"]["hostname"]["value"] == "gpu-1"  # type: ignore[index]
    assert out["p2"] == "its output is not a probe report (first line: python3: can't open file)"


def test_lines_around_the_report_are_skipped() -> None:
    """A runtime banner before the report or a warning after it does not hide the report."""
    text = "== TensorFlow ==\nNVIDIA Release 24.05\n" + _report_text(node("gpu-1")) + "WARNING: something\n"
    assert fleetinput.parse_kubectl_log(prefixed("p1", text))["p1"]["probe_schema"] == 1  # type: ignore[index]


def test_an_empty_or_foreign_output_is_a_reason() -> None:
    out = fleetinput.parse_kubectl_log(prefixed("p1", "\n") + prefixed("p2", '{"a": 1}\n'))
    assert out == {"p1": "its output is not a probe report (empty)",
                   "p2": "pod p2 is not a probe report (no probe_schema)"}


def test_a_line_without_prefix_is_bad_input() -> None:
    with pytest.raises(ReportError, match="line 2 has no"):
        fleetinput.parse_kubectl_log(prefixed("p1", "{\n") + "}\n")


def test_pod_states_become_failures_or_not() -> None:
    _, pods = kubernetes_files()
    other = {"kind": "Pod", "metadata": {"name": "web-1"}, "spec": {"containers": [{"name": "web"}]}, "status": {}}
    pods["items"].append(other)
    parsed = {p.pod: (p.node, p.failure) for p in fleetinput.parse_pod_list(pods)}
    assert set(parsed) == {"envpin-probe-x7k2p", "envpin-probe-m4q9z", "envpin-probe-p8w3n"}  # web-1 is not ours
    assert parsed["envpin-probe-x7k2p"] == ("gpu-c01", None)
    assert parsed["envpin-probe-m4q9z"] == ("gpu-c02", NodeFailure(FAILED, "the probe exited 1 (Error)"))
    # Never scheduled: the node comes from the DaemonSet's node affinity.
    node_name, failure = parsed["envpin-probe-p8w3n"]
    assert node_name == "gpu-c03" and failure is not None and failure.status == TIMED_OUT
    assert "Insufficient nvidia.com/gpu" in failure.reason


@pytest.mark.parametrize(("status", "expected"), [
    ({"initContainerStatuses": [{"name": PROBE, "state": {"running": {}}}]},
     NodeFailure(TIMED_OUT, "the probe was still running when the pods were listed")),
    ({"initContainerStatuses": [{"name": PROBE, "state": {"waiting": {"reason": "PodInitializing"}}}]},
     NodeFailure(TIMED_OUT, "the probe has not started (PodInitializing)")),
    ({"initContainerStatuses": [{"name": PROBE, "state": {"terminated": {"exitCode": 2, "reason": "Error"}}}]},
     NodeFailure(FAILED, "the probe exited 2 (Error)")),
    ({"phase": "Pending"}, NodeFailure(TIMED_OUT, "the probe has not run (pod phase Pending)")),
])
def test_pod_status_rules(status: dict[str, Any], expected: NodeFailure) -> None:
    (p,) = fleetinput.parse_pod_list({"kind": "List", "items": [pod("p", "n", status)]})
    assert p.failure == expected


def test_logs_and_pods_are_merged_into_nodes(tmp_path: Path) -> None:
    folder = write_fleet(tmp_path / "fleet")
    entries = {e.name: e for e in fleetinput.read([folder])}
    assert set(entries) == {"gpu-a01", "gpu-a02", "gpu-a03", "gpu-a04", "gpu-b01", "gpu-h01",
                            "gpu-c01", "gpu-c02", "gpu-c03"}
    # The report's ENVPIN_NODE_NAME names the node, not the pod's host name.
    assert isinstance(entries["gpu-c01"].item, dict)
    assert entries["gpu-c01"].source.endswith("probe.log (pod envpin-probe-x7k2p)")
    c02, c03 = entries["gpu-c02"].item, entries["gpu-c03"].item
    assert isinstance(c02, NodeFailure) and c02.status == FAILED
    assert c02.reason.startswith("pod envpin-probe-m4q9z: the probe exited 1 (Error); its output is not a probe report")
    assert isinstance(c03, NodeFailure) and c03.status == TIMED_OUT


def test_a_finished_pod_whose_log_is_missing_is_a_failed_node(tmp_path: Path) -> None:
    _, pods = kubernetes_files()
    (tmp_path / "pods.json").write_text(json.dumps(pods))
    entries = {e.name: e.item for e in fleetinput.read([tmp_path / "pods.json"])}
    assert entries["gpu-c01"] == NodeFailure(
        FAILED, "pod envpin-probe-x7k2p: the probe finished but its output was not collected (kubectl logs)")


# --- the real CLI ----------------------------------------------------------------------------------------------


def test_reports_of_one_machine_are_consistent_end_to_end(tmp_path: Path) -> None:
    """Two real probe runs through the installed console script: one class, exit 0."""
    folder = tmp_path / "reports"
    folder.mkdir()
    for name in ("a.json", "b.json"):
        res = run_envpin("probe", "-o", str(folder / name), env={"OMP_NUM_THREADS": "2"})
        assert res.code == 0, res.stderr
    res = run_envpin("fleet", "report", str(folder))
    assert res.code == 0, res.stderr
    assert res.stdout.splitlines()[0] == "2 nodes consistent except informational differences"
    assert res.stderr == ""
    res = run_envpin("fleet", "report", str(folder), "--format", "json")
    doc = json.loads(res.stdout)
    assert res.code == 0 and doc["counts"]["classes"] == 1 and doc["counts"]["ok"] == 2
    assert len(doc["nodes"]) == 2  # the same host name twice: made unique


def test_the_payload_output_collected_by_kubectl_is_read(tmp_path: Path) -> None:
    """What the DaemonSet's probe container prints (`python3 envpin.pyz --json -`), prefixed the way
    `kubectl logs --prefix` prefixes it, is one probed node named by ENVPIN_NODE_NAME."""
    pyz = tmp_path / "envpin.pyz"
    pyz.write_bytes(payload.payload())
    proc = subprocess.run([sys.executable, "-I", str(pyz), "--json", "-", "--no-selftest"], capture_output=True,
                          text=True, env={"ENVPIN_NODE_NAME": "gpu-node-7", "PATH": "/usr/bin:/bin"}, timeout=120,
                          check=True)
    log = tmp_path / "probe.log"
    log.write_text(prefixed("envpin-probe-abcde", proc.stdout))
    res = run_envpin("fleet", "report", str(log), "--format", "json")
    assert res.code == 0, res.stderr
    doc = json.loads(res.stdout)
    assert list(doc["nodes"]) == ["gpu-node-7"] and doc["nodes"]["gpu-node-7"]["status"] == "ok"


def test_fixed_fleet_exit_1_json_and_html(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    write_fleet(tmp_path / "reports")
    (tmp_path / "out").mkdir()
    res = cli("fleet", "report", "reports", "--format", "json", "--html", "out/fleet.html", cwd=tmp_path)
    assert res.code == 1
    doc = json.loads(res.stdout)
    assert doc["counts"] == {"breaking": 4, "classes": 3, "failed": 1, "info": 5, "nodes": 9, "ok": 7,
                             "outliers": 3, "risk": 2, "timed_out": 1}
    assert res.stderr == "wrote out/fleet.html\n"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["fleet.html"]  # written atomically
    text = cli("fleet", "report", "reports/gpu-a01.json", "reports/gpu-a02.json", cwd=tmp_path)
    assert text.code == 0 and text.stdout.startswith("2 nodes consistent except informational differences\n")


@pytest.mark.parametrize(("setup", "args", "message"), [
    (None, ("missing",), "error: missing does not exist\nhint: check the path\n"),
    ("empty", ("empty",), "error: no probe reports (*.json, *.log) in empty\n"
                          "hint: write them with 'envpin probe --out DIR', or see docs/fleet.md\n"),
    ("broken", ("broken",), "error: broken/x.json is not valid JSON (line 1, column 2: "),
    ("foreign", ("foreign",), "error: foreign/plan.json is not a probe report (no probe_schema)\n"),
    ("empty", ("empty", "--format", "xml"),
     "error: Invalid value for '--format': 'xml' is not one of 'text', 'json'.\n"),
    (None, (), "error: Missing argument 'DIR|FILE...'.\n"),
])
def test_bad_input_is_one_error_and_exit_2(cli, tmp_path: Path, setup: str | None, args: tuple[str, ...],  # type: ignore[no-untyped-def]
                                           message: str) -> None:
    if setup == "empty":
        (tmp_path / "empty").mkdir()
    elif setup == "broken":
        (tmp_path / "broken").mkdir()
        (tmp_path / "broken" / "x.json").write_text("{oops")
    elif setup == "foreign":
        (tmp_path / "foreign").mkdir()
        (tmp_path / "foreign" / "plan.json").write_text('{"name": "x"}')
    res = cli("fleet", "report", *args, cwd=tmp_path)
    assert res.code == 2 and res.stdout == ""
    assert res.stderr.startswith(message)
    assert len(res.stderr.splitlines()) == 2 and "Traceback" not in res.stderr


def test_manifest_on_stdout_carries_the_real_payload(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("fleet", "manifest", "--kubernetes", "--image", PINNED, "--namespace", "envpin")
    assert res.code == 0 and res.stderr == ""
    config_map, daemon_set = yaml.safe_load_all(res.stdout)
    assert base64.b64decode(config_map["binaryData"]["envpin.pyz"]) == payload.payload()
    spec = daemon_set["spec"]["template"]["spec"]
    assert spec["initContainers"][0]["image"] == PINNED
    # The self-test runs by default where the image has TensorFlow; its failure (exit 1) is in the report.
    assert spec["initContainers"][0]["command"] == [
        "sh", "-c", 'python3 /opt/envpin/envpin.pyz --json -; rc=$?; [ "$rc" -le 1 ] || exit "$rc"']
    assert daemon_set["metadata"]["namespace"] == "envpin"
    skipped = cli("fleet", "manifest", "--kubernetes", "--image", PINNED, "--no-selftest", "--quick")
    _, no_selftest = yaml.safe_load_all(skipped.stdout)
    probe = no_selftest["spec"]["template"]["spec"]["initContainers"][0]
    assert probe["command"] == ["python3", "/opt/envpin/envpin.pyz", "--json", "-", "--no-selftest"]
    assert probe["resources"]["requests"]["memory"] == "512Mi"


def test_manifest_warns_about_an_unpinned_image_and_writes_atomically(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "k8s").mkdir()
    res = cli("fleet", "manifest", "--kubernetes", "--image", "nvcr.io/nvidia/tensorflow:24.05-tf2-py3",
              "--out", "k8s/probe.yaml", cwd=tmp_path)
    assert res.code == 0 and res.stdout == "wrote k8s/probe.yaml\n"
    assert res.stderr.startswith("warning: nvcr.io/nvidia/tensorflow:24.05-tf2-py3 is not pinned by digest")
    assert [p.name for p in (tmp_path / "k8s").iterdir()] == ["probe.yaml"]
    res = cli("fleet", "manifest", "--kubernetes")
    assert res.code == 0 and "no --image given: using nvcr.io/nvidia/tensorflow:" in res.stderr


@pytest.mark.parametrize(("args", "message"), [
    (("--image", PINNED), "error: say which manifest to write: --kubernetes\n"),
    (("--kubernetes", "--image", "Not An Image"), "error: 'Not An Image' is not an image reference\n"),
    (("--kubernetes", "--image", "nvcr.io/nvidia/tensorflow"), "error: 'nvcr.io/nvidia/tensorflow' names no tag"),
    (("--kubernetes", "--image", PINNED, "--namespace", "Bad_NS"), "error: 'Bad_NS' is not a Kubernetes namespace"),
])
def test_manifest_bad_input(cli, args: tuple[str, ...], message: str) -> None:  # type: ignore[no-untyped-def]
    res = cli("fleet", "manifest", *args)
    assert res.code == 2 and res.stdout == "" and res.stderr.startswith(message)
    assert "hint: " in res.stderr


def test_without_env_node_name_the_pod_list_names_the_node(tmp_path: Path) -> None:
    """A report from an image run without the manifest's ENVPIN_NODE_NAME: the pod's node, not its host name."""
    report = node("gpu-c01")
    del report["env"]["ENVPIN_NODE_NAME"]
    report["host"]["hostname"]["value"] = "envpin-probe-x7k2p"
    _, pods = kubernetes_files()
    (tmp_path / "probe.log").write_text(prefixed("envpin-probe-x7k2p", _report_text(report)))
    (tmp_path / "pods.json").write_text(json.dumps(pods))
    names = [e.name for e in fleetinput.read([tmp_path])]
    assert names == ["gpu-c02", "gpu-c03", "gpu-c01"]  # by pod name: m4q9z, p8w3n, x7k2p
    (tmp_path / "pods.json").unlink()
    assert [e.name for e in fleetinput.read([tmp_path])] == ["envpin-probe-x7k2p"]


def test_inputs_naming_no_node_are_bad_input(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "pods.json").write_text(json.dumps({"kind": "List", "items": []}))
    res = cli("fleet", "report", "pods.json", cwd=tmp_path)
    assert res.code == 2 and res.stderr.startswith("error: no probe reports or probe pods in pods.json\nhint: ")


def test_output_does_not_depend_on_hash_seed(tmp_path: Path) -> None:
    write_fleet(tmp_path / "reports")
    outputs = []
    for seed in ("1", "2"):
        res = run_envpin("fleet", "report", "reports", "--format", "json", "--html", f"{seed}.html", cwd=tmp_path,
                         env={"PYTHONHASHSEED": seed})
        assert res.code == 1, res.stderr
        outputs.append((res.stdout, (tmp_path / f"{seed}.html").read_bytes()))
    assert outputs[0] == outputs[1]


@pytest.mark.parametrize(("text", "needle"), [
    ('{"probe_schema": 1, "cpu": {"x": {"value": ' + "9" * 5000 + "}}}", "holds a number too long to read"),
    ('{"kind": "List", "items": [{"metadata": {"name": "p"}, "status": {"initContainerStatuses": 5}}]}',
     "no probe reports or probe pods in"),
])
def test_malformed_fleet_input_is_one_error(cli, tmp_path: Path, text: str, needle: str) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "in.json").write_text(text)
    res = cli("fleet", "report", str(tmp_path / "in.json"))
    lines = res.stderr.splitlines()
    assert res.code == 2 and len(lines) == 2 and needle in lines[0] and lines[1].startswith("hint: ")
