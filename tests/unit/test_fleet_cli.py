"""`envpin fleet report` and `fleet manifest` through the CLI in-process, and what the report reader accepts:
probe reports, the error files of `fleet probe --slurm`, `kubectl logs --prefix` output and `kubectl get pods -o
json`, as docs/fleet.md collects them; the expected fleet (--expect, --expect-nodes). Across real processes:
tests/cli/test_fleet_cli.py."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from envpin.environment import payload
from envpin.errors import ReportError
from envpin.fleet import inputs
from envpin.fleet.aggregate import FAILED, TIMED_OUT, NodeFailure
from tests.fleetdata import PROBE, kubernetes_files, node, pod, prefixed, write_fleet, write_slurm_run

DIGEST = "sha256:" + "a" * 64
PINNED = f"nvcr.io/nvidia/tensorflow:24.05-tf2-py3@{DIGEST}"


def _report_text(report: dict[str, Any]) -> str:
    return json.dumps(report, sort_keys=True, indent=2, ensure_ascii=True) + "\n"


# --- the reader ----------------------------------------------------------------------------------------------


def test_kubectl_prefixed_log_is_split_per_pod() -> None:
    log = prefixed("p1", _report_text(node("gpu-1"))) + prefixed("p2", "python3: can't open file\n")
    out = inputs.parse_kubectl_log(log)
    assert out["p1"]["host"]["hostname"]["value"] == "gpu-1"  # type: ignore[index]
    assert out["p2"] == "its output is not a probe report (first line: python3: can't open file)"


def test_lines_around_the_report_are_skipped() -> None:
    """A runtime banner before the report or a warning after it does not hide the report."""
    text = "== TensorFlow ==\nNVIDIA Release 24.05\n" + _report_text(node("gpu-1")) + "WARNING: something\n"
    assert inputs.parse_kubectl_log(prefixed("p1", text))["p1"]["probe_schema"] == 1  # type: ignore[index]


def test_an_empty_or_foreign_output_is_a_reason() -> None:
    out = inputs.parse_kubectl_log(prefixed("p1", "\n") + prefixed("p2", '{"a": 1}\n'))
    assert out == {
        "p1": "its output is not a probe report (empty)",
        "p2": "pod p2 is not a probe report (no probe_schema)",
    }


def test_a_line_without_prefix_is_bad_input() -> None:
    with pytest.raises(ReportError, match="line 2 has no"):
        inputs.parse_kubectl_log(prefixed("p1", "{\n") + "}\n")


def test_pod_states_become_failures_or_not() -> None:
    _, pods = kubernetes_files()
    other = {"kind": "Pod", "metadata": {"name": "web-1"}, "spec": {"containers": [{"name": "web"}]}, "status": {}}
    pods["items"].append(other)
    parsed = {p.pod: (p.node, p.failure) for p in inputs.parse_pod_list(pods)}
    assert set(parsed) == {"envpin-probe-x7k2p", "envpin-probe-m4q9z", "envpin-probe-p8w3n"}  # web-1 is not ours
    assert parsed["envpin-probe-x7k2p"] == ("gpu-c01", None)
    assert parsed["envpin-probe-m4q9z"] == ("gpu-c02", NodeFailure(FAILED, "the probe exited 1 (Error)"))
    # Never scheduled: the node comes from the DaemonSet's node affinity.
    node_name, failure = parsed["envpin-probe-p8w3n"]
    assert node_name == "gpu-c03" and failure is not None and failure.status == TIMED_OUT
    assert "Insufficient nvidia.com/gpu" in failure.reason


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (
            {"initContainerStatuses": [{"name": PROBE, "state": {"running": {}}}]},
            NodeFailure(TIMED_OUT, "the probe was still running when the pods were listed"),
        ),
        (
            {"initContainerStatuses": [{"name": PROBE, "state": {"waiting": {"reason": "PodInitializing"}}}]},
            NodeFailure(TIMED_OUT, "the probe has not started (PodInitializing)"),
        ),
        (
            {"initContainerStatuses": [{"name": PROBE, "state": {"terminated": {"exitCode": 2, "reason": "Error"}}}]},
            NodeFailure(FAILED, "the probe exited 2 (Error)"),
        ),
        ({"phase": "Pending"}, NodeFailure(TIMED_OUT, "the probe has not run (pod phase Pending)")),
    ],
)
def test_pod_status_rules(status: dict[str, Any], expected: NodeFailure) -> None:
    (p,) = inputs.parse_pod_list({"kind": "List", "items": [pod("p", "n", status)]})
    assert p.failure == expected


@pytest.mark.parametrize("conditions", [5, "PodScheduled", {"type": "PodScheduled"}, None, [7, "x"]])
def test_a_pod_list_with_malformed_conditions_is_a_node_that_has_not_run(  # type: ignore[no-untyped-def]
    cli, conditions: object, tmp_path: Path
) -> None:
    """kubectl's pod list is external input: a `conditions` that is not a list of objects is read as no
    condition, never an internal error."""
    status = {"phase": "Pending", "conditions": conditions}
    listed = {"kind": "List", "items": [pod("envpin-probe-q", "gpu-q1", status)]}
    (tmp_path / "pods.json").write_text(json.dumps(listed))
    res = cli("fleet", "report", str(tmp_path / "pods.json"))
    assert res.code == 1, res.stderr
    assert res.stderr == ""
    assert res.stdout.startswith("failed: 1 node timed out (gpu-q1); no node was probed"), res.stdout
    assert "the probe has not run (pod phase Pending)" in res.stdout


def test_logs_and_pods_are_merged_into_nodes(tmp_path: Path) -> None:
    folder = write_fleet(tmp_path / "fleet")
    entries = {e.name: e for e in inputs.read([folder])}
    assert set(entries) == {
        "gpu-a01",
        "gpu-a02",
        "gpu-a03",
        "gpu-a04",
        "gpu-b01",
        "gpu-h01",
        "gpu-c01",
        "gpu-c02",
        "gpu-c03",
    }
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
    entries = {e.name: e.item for e in inputs.read([tmp_path / "pods.json"])}
    assert entries["gpu-c01"] == NodeFailure(
        FAILED, "pod envpin-probe-x7k2p: the probe finished but its output was not collected (kubectl logs)"
    )


# --- the real CLI ----------------------------------------------------------------------------------------------


def test_fixed_fleet_exit_1_json_and_html(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    write_fleet(tmp_path / "reports")
    (tmp_path / "out").mkdir()
    res = cli("fleet", "report", "reports", "--format", "json", "--html", "out/fleet.html", cwd=tmp_path)
    assert res.code == 1
    doc = json.loads(res.stdout)
    assert doc["counts"] == {
        "breaking": 4,
        "classes": 3,
        "failed": 1,
        "info": 5,
        "missing": 0,
        "nodes": 9,
        "ok": 7,
        "outliers": 3,
        "risk": 2,
        "timed_out": 1,
        "unexpected": 0,
    }
    assert doc["status"] == "failed" and doc["expected"] is None
    assert res.stderr == "wrote out/fleet.html\n"
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["fleet.html"]  # written atomically
    text = cli("fleet", "report", "reports/gpu-a01.json", "reports/gpu-a02.json", cwd=tmp_path)
    assert text.code == 0 and text.stdout.startswith("2 nodes consistent except informational differences\n")


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        (None, ("missing",), "error: missing does not exist\nhint: check the path\n"),
        (
            "empty",
            ("empty",),
            "error: no probe reports (*.json, *.log, *.error.txt) in empty\n"
            "hint: write them with 'envpin probe --out DIR', or see docs/fleet.md\n",
        ),
        ("broken", ("broken",), "error: broken/x.json is not valid JSON (line 1, column 2: "),
        ("foreign", ("foreign",), "error: foreign/plan.json is not a probe report (no probe_schema)\n"),
        (
            "empty",
            ("empty", "--format", "xml"),
            "error: Invalid value for '--format': 'xml' is not one of 'text', 'json'.\n",
        ),
        (None, (), "error: Missing argument 'DIR|FILE...'.\n"),
    ],
)
def test_bad_input_is_one_error_and_exit_2(
    cli,
    tmp_path: Path,
    setup: str | None,
    args: tuple[str, ...],  # type: ignore[no-untyped-def]
    message: str,
) -> None:
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
        "sh",
        "-c",
        'python3 /opt/envpin/envpin.pyz --json -; rc=$?; [ "$rc" -le 1 ] || exit "$rc"',
    ]
    assert daemon_set["metadata"]["namespace"] == "envpin"
    skipped = cli("fleet", "manifest", "--kubernetes", "--image", PINNED, "--no-selftest")
    _, no_selftest = yaml.safe_load_all(skipped.stdout)
    # --quick shortens the self-test --no-selftest leaves out: refused, as docs/fleet.md's [--no-selftest|--quick]
    both = cli("fleet", "manifest", "--kubernetes", "--image", PINNED, "--no-selftest", "--quick")
    assert both.code == 2 and both.stdout == "" and "--no-selftest leaves out" in both.stderr
    probe = no_selftest["spec"]["template"]["spec"]["initContainers"][0]
    assert probe["command"] == ["python3", "/opt/envpin/envpin.pyz", "--json", "-", "--no-selftest"]
    assert probe["resources"]["requests"]["memory"] == "512Mi"


def test_manifest_warns_about_an_unpinned_image_and_writes_atomically(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "k8s").mkdir()
    res = cli(
        "fleet",
        "manifest",
        "--kubernetes",
        "--image",
        "nvcr.io/nvidia/tensorflow:24.05-tf2-py3",
        "--out",
        "k8s/probe.yaml",
        cwd=tmp_path,
    )
    assert res.code == 0 and res.stdout == "wrote k8s/probe.yaml\n"
    assert res.stderr.startswith("warning: nvcr.io/nvidia/tensorflow:24.05-tf2-py3 is not pinned by digest")
    assert [p.name for p in (tmp_path / "k8s").iterdir()] == ["probe.yaml"]
    res = cli("fleet", "manifest", "--kubernetes")
    assert res.code == 0 and "no --image given: using nvcr.io/nvidia/tensorflow:" in res.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--image", PINNED), "error: say which manifest to write: --kubernetes\n"),
        (("--kubernetes", "--image", "Not An Image"), "error: 'Not An Image' is not an image reference\n"),
        (("--kubernetes", "--image", "nvcr.io/nvidia/tensorflow"), "error: 'nvcr.io/nvidia/tensorflow' names no tag"),
        (("--kubernetes", "--image", PINNED, "--namespace", "Bad_NS"), "error: 'Bad_NS' is not a Kubernetes namespace"),
    ],
)
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
    names = [e.name for e in inputs.read([tmp_path])]
    assert names == ["gpu-c02", "gpu-c03", "gpu-c01"]  # by pod name: m4q9z, p8w3n, x7k2p
    (tmp_path / "pods.json").unlink()
    assert [e.name for e in inputs.read([tmp_path])] == ["envpin-probe-x7k2p"]


def test_inputs_naming_no_node_are_bad_input(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "pods.json").write_text(json.dumps({"kind": "List", "items": []}))
    res = cli("fleet", "report", "pods.json", cwd=tmp_path)
    assert res.code == 2 and res.stderr.startswith("error: no probe reports or probe pods in pods.json\nhint: ")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('{"probe_schema": 1, "cpu": {"x": {"value": ' + "9" * 5000 + "}}}", "holds a number too long to read"),
        (
            '{"kind": "List", "items": [{"metadata": {"name": "p"}, "status": {"initContainerStatuses": 5}}]}',
            "no probe reports or probe pods in",
        ),
    ],
)
def test_malformed_fleet_input_is_one_error(cli, tmp_path: Path, text: str, needle: str) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "in.json").write_text(text)
    res = cli("fleet", "report", str(tmp_path / "in.json"))
    lines = res.stderr.splitlines()
    assert res.code == 2 and len(lines) == 2 and needle in lines[0] and lines[1].startswith("hint: ")


# --- nodes without a report: Slurm's error files, the expected fleet ------------------------------------------

SLURM_FAILURE = "no result from the node: python3 is not installed on the node (not found on PATH)"


def _two_and_an_error(folder: Path, status: str = "failed", error: str = SLURM_FAILURE) -> Path:
    """Two reports and one error file, as `fleet probe --slurm` left them for a node that failed."""
    return write_slurm_run(folder, {"gpu-01": node("gpu-01"), "gpu-02": node("gpu-02")}, {"gpu-03": (status, error)})


def test_an_error_file_is_a_failed_node_end_to_end(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The re-run the README recommends: `fleet report DIR` on a folder `fleet probe --slurm` wrote."""
    _two_and_an_error(tmp_path / "fleet")
    res = cli("fleet", "report", "fleet", "--html", "fleet.html", cwd=tmp_path)
    assert res.code == 1, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "failed: 1 node failed (gpu-03); 2 probed nodes: no breaking or risk difference"
    assert lines[1] == "nodes: 3 (2 probed, 1 failed, 0 timed out)"
    assert "consistent" not in lines[0] and SLURM_FAILURE[:40] in res.stdout
    page = (tmp_path / "fleet.html").read_text()
    assert '<div class="verdict bad">failed: 1 node failed (gpu-03);' in page
    assert '<td class="n">gpu-03</td>' in page and "fleet/gpu-03.error.txt" in page
    doc = json.loads(cli("fleet", "report", "fleet", "--format", "json", cwd=tmp_path).stdout)
    assert doc["status"] == "failed" and doc["counts"]["failed"] == 1 and doc["counts"]["nodes"] == 3
    assert doc["nodes"]["gpu-03"] == {
        "status": "failed",
        "reason": SLURM_FAILURE,
        "source": "fleet/gpu-03.error.txt",
        "class": None,
        "device_class": None,
        "golden": None,
    }


def test_a_timed_out_error_file_and_an_error_file_given_by_name(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _two_and_an_error(tmp_path / "fleet", "timed_out", "the probe did not finish within 300 s")
    res = cli("fleet", "report", "fleet/gpu-01.json", "fleet/gpu-03.error.txt", cwd=tmp_path)
    assert res.code == 1
    assert res.stdout.splitlines()[0] == (
        "failed: 1 node timed out (gpu-03); 1 probed node: no breaking or risk difference"
    )


def test_a_folder_of_error_files_only_is_a_failed_fleet(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    write_slurm_run(tmp_path / "fleet", {}, {"gpu-01": ("failed", "x"), "gpu-02": ("timed_out", "y")})
    res = cli("fleet", "report", "fleet", cwd=tmp_path)
    assert res.code == 1
    assert res.stdout.splitlines()[0] == "failed: 1 node failed (gpu-01); 1 node timed out (gpu-02); no node was probed"


@pytest.mark.parametrize("text", ["", "status: ok\nerror: fine\n", "status: failed\n", "it broke\n"])
def test_a_malformed_error_file_is_bad_input(cli, tmp_path: Path, text: str) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "gpu-01.error.txt").write_text(text)
    res = cli("fleet", "report", str(tmp_path), cwd=tmp_path)
    lines = res.stderr.splitlines()
    assert res.code == 2 and res.stdout == "" and len(lines) == 2
    assert lines[0].startswith(f"error: {tmp_path}/gpu-01.error.txt is not an error file of 'envpin fleet probe'")
    assert lines[1].startswith("hint: envpin fleet probe --slurm writes <node>.error.txt")


def test_the_error_file_format_round_trips() -> None:
    text = inputs.error_file_text(TIMED_OUT, "no result within 360 s (srun: Job step aborted)")
    assert text == "status: timed_out\nerror: no result within 360 s (srun: Job step aborted)\n"
    assert inputs.parse_error_file(text, "x") == NodeFailure(
        TIMED_OUT, "no result within 360 s (srun: Job step aborted)"
    )


def test_expect_counts_the_missing_nodes(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    write_slurm_run(tmp_path / "fleet", {"gpu-01": node("gpu-01"), "gpu-02": node("gpu-02")})
    res = cli("fleet", "report", "fleet", "--expect", "3", cwd=tmp_path)
    assert res.code == 1 and res.stderr == ""
    lines = res.stdout.splitlines()
    assert (
        lines[0] == "failed: 1 node missing (2 of 3 expected nodes found); 2 probed nodes: no breaking or risk "
        "difference"
    )
    assert lines[1] == "nodes: 3 (2 probed, 0 failed, 0 timed out, 1 missing); expected: 3 (--expect)"
    assert (
        "missing: 1 of the 3 expected nodes left no report and no error file (2 found; --expect-nodes FILE "
        "would name them)"
    ) in lines
    doc = json.loads(cli("fleet", "report", "fleet", "--expect", "3", "--json", cwd=tmp_path).stdout)
    assert doc["counts"]["missing"] == 1 and doc["expected"] == {"count": 3, "source": None, "unexpected": []}
    assert cli("fleet", "report", "fleet", "--expect", "3", "--html", "f.html", cwd=tmp_path).code == 1
    assert "1 of the 3 expected nodes left no report" in (tmp_path / "f.html").read_text()
    more = cli("fleet", "report", "fleet", "--expect", "1", cwd=tmp_path)
    assert more.code == 1 and more.stdout.startswith("failed: 1 node more than expected (2 found, 1 expected); ")


def test_every_expected_node_present_is_consistent(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    long_name = "gpu-02.cluster.local"  # the report's host name; the list says gpu-02
    write_slurm_run(tmp_path / "fleet", {"gpu-01": node("gpu-01"), long_name: node(long_name)})
    (tmp_path / "nodes.txt").write_text("# the partition\ngpu-01\n\nnode/gpu-02   # kubectl get nodes -o name\n")
    for args in ((), ("--expect", "2"), ("--expect-nodes", "nodes.txt")):
        res = cli("fleet", "report", "fleet", *args, cwd=tmp_path)
        assert res.code == 0, (args, res.stdout, res.stderr)
        assert res.stdout.startswith("2 nodes consistent except informational differences\n")
    doc = json.loads(cli("fleet", "report", "fleet", "--expect-nodes", "nodes.txt", "--json", cwd=tmp_path).stdout)
    assert doc["status"] == "consistent" and doc["expected"] == {"count": 2, "source": "nodes.txt", "unexpected": []}


def test_expect_nodes_names_the_missing_and_the_unexpected(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _two_and_an_error(tmp_path / "fleet")
    (tmp_path / "nodes.txt").write_text("gpu-01\ngpu-03\ngpu-04\n")
    res = cli("fleet", "report", "fleet", "--expect-nodes", "nodes.txt", "--html", "fleet.html", cwd=tmp_path)
    assert res.code == 1
    lines = res.stdout.splitlines()
    assert lines[0] == (
        "failed: 1 node failed (gpu-03); 1 node missing (gpu-04); 1 node not in nodes.txt (gpu-02); "
        "2 probed nodes: no breaking or risk difference"
    )
    assert lines[1] == "nodes: 4 (2 probed, 1 failed, 0 timed out, 1 missing); expected: 3 (listed in nodes.txt)"
    row = next(line for line in lines if line.startswith("│ gpu-04 "))
    assert "│ missing │ nothing was found for this node" in row
    assert any(line.startswith("not expected: gpu-02 (not in nodes.txt") for line in lines)
    page = (tmp_path / "fleet.html").read_text()
    assert '<td class="n">gpu-04</td><td><span class="sev breaking">missing</span>' in page
    assert "gpu-02: not in <code>nodes.txt</code>" in page


def test_kubernetes_pods_without_a_report_fail_the_fleet(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A pod whose output holds no report is a failed node; a node whose pod left nothing is missing."""
    log = prefixed("envpin-probe-a", _report_text(node("gpu-c01"))) + prefixed("envpin-probe-b", "Killed\n")
    (tmp_path / "probe.log").write_text(log)
    res = cli("fleet", "report", "probe.log", cwd=tmp_path)
    assert res.code == 1 and res.stdout.startswith("failed: 1 node failed (envpin-probe-b); 1 probed node: ")
    assert "its output is not a probe report (first line: Killed)" in res.stdout
    # The collected log of one pod: a node list says which node it missed.
    (tmp_path / "probe.log").write_text(prefixed("envpin-probe-a", _report_text(node("gpu-c01"))))
    (tmp_path / "gpu-nodes.txt").write_text("node/gpu-c01\nnode/gpu-c02\n")
    res = cli("fleet", "report", "probe.log", "--expect-nodes", "gpu-nodes.txt", cwd=tmp_path)
    assert res.code == 1 and res.stdout.startswith("failed: 1 node missing (gpu-c02); ")
    # With the pod list, every node of the fixed Kubernetes files is accounted for.
    log, pods = kubernetes_files()
    (tmp_path / "probe.log").write_text(log)
    (tmp_path / "pods.json").write_text(json.dumps(pods))
    res = cli("fleet", "report", "probe.log", "pods.json", "--expect", "3", cwd=tmp_path)
    assert res.code == 1 and res.stdout.startswith("failed: 1 node failed (gpu-c02); 1 node timed out (gpu-c03); ")


@pytest.mark.parametrize(
    ("setup", "args", "message"),
    [
        (None, ("--expect", "0"), "error: --expect must be at least 1, not 0\nhint: give the number of nodes"),
        (None, ("--expect", "-2"), "error: --expect must be at least 1, not -2\n"),
        (None, ("--expect", "three"), "error: Invalid value for '--expect': 'three' is not a valid int.\n"),
        (
            "nodes.txt",
            ("--expect", "2", "--expect-nodes", "nodes.txt"),
            "error: --expect and --expect-nodes exclude each other\nhint: --expect N counts the nodes",
        ),
        (None, ("--expect-nodes", "nope.txt"), "error: node list nope.txt does not exist\nhint: check the path\n"),
        ("dir", ("--expect-nodes", "dir"), "error: node list dir is a folder, not a file\n"),
        ("", ("--expect-nodes", "nodes.txt"), "error: nodes.txt names no node\nhint: one node name per line"),
        ("# none yet\n\n", ("--expect-nodes", "nodes.txt"), "error: nodes.txt names no node\n"),
        (
            "gpu-01\ngpu-02\ngpu-01\n",
            ("--expect-nodes", "nodes.txt"),
            "error: nodes.txt names gpu-01 twice (lines 1 and 3)\n",
        ),
        ("gpu-01 gpu-02\n", ("--expect-nodes", "nodes.txt"), "error: nodes.txt line 1 holds more than one name"),
        (
            "gpu[01-04]\n",
            ("--expect-nodes", "nodes.txt"),
            "error: nodes.txt line 1 is a Slurm host list (gpu[01-04]), not a node name\n"
            "hint: list one node per line: scontrol show hostnames 'gpu[01-04]'\n",
        ),
    ],
)
def test_nonsense_expectations_are_one_error_and_exit_2(
    cli,
    tmp_path: Path,
    setup: str | None,  # type: ignore[no-untyped-def]
    args: tuple[str, ...],
    message: str,
) -> None:
    write_slurm_run(tmp_path / "fleet", {"gpu-01": node("gpu-01")})
    if setup == "dir":
        (tmp_path / "dir").mkdir()
    elif setup == "nodes.txt":
        (tmp_path / "nodes.txt").write_text("gpu-01\n")
    elif setup is not None:
        (tmp_path / "nodes.txt").write_text(setup)
    res = cli("fleet", "report", "fleet", *args, cwd=tmp_path)
    lines = res.stderr.splitlines()
    assert res.code == 2 and res.stdout == "" and res.stderr.startswith(message), res.stderr
    assert len(lines) == 2 and lines[1].startswith("hint: ") and "Traceback" not in res.stderr


@pytest.mark.parametrize("html", ["a.json", "reports/b.json", "reports/b.log", "reports/n1.error.txt"])
def test_html_naming_a_report_or_a_name_the_folder_is_read_for_is_refused(cli, html: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """--html over an input report would replace it with the page, and a page named *.json in the folder of
    reports would be read as a report the next time: both refused before anything is read or written."""
    (tmp_path / "reports").mkdir()
    for path in (tmp_path / "a.json", tmp_path / "reports" / "r.json"):
        path.write_text(_report_text(node(path.stem)))
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    res = cli("fleet", "report", "a.json", "reports", "--html", html, cwd=tmp_path)
    assert res.code == 2 and res.stdout == "", res
    lines = res.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith(f"error: --html {html} ") and lines[1].startswith("hint: "), lines
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before
    ok = cli("fleet", "report", "a.json", "reports", "--html", "reports/page.html", cwd=tmp_path)
    assert ok.code == 0, ok.stderr


def test_a_report_named_twice_or_also_inside_a_folder_named_is_one_node(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = write_fleet(tmp_path / "reports", kubernetes=False)
    once = json.loads(cli("fleet", "report", str(folder), "--format", "json").stdout)
    one = sorted(folder.glob("*.json"))[0]
    (tmp_path / "link.json").symlink_to(one)
    for args in ((str(folder), str(one)), (str(one), str(folder)), (str(folder), str(tmp_path / "link.json"))):
        res = cli("fleet", "report", *args, "--format", "json")
        doc = json.loads(res.stdout)
        assert doc["counts"] == once["counts"] and len(doc["nodes"]) == len(once["nodes"]), args
    alone = json.loads(cli("fleet", "report", str(one), str(one), "--format", "json").stdout)
    assert len(alone["nodes"]) == 1
