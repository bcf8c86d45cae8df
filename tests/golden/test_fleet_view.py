"""`envpin fleet probe --slurm`'s summary, byte for byte (regenerate with pytest --update-golden): where each
node's report or error went, then the same fleet summary `envpin fleet report` prints."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from envpin.api import FleetProbe
from envpin.fleet.slurm import NodeOutcome, fleet_result
from envpin.views import slurm as view
from tests.fleetdata import node

HERE = Path(__file__).resolve().parent


def _render(res: FleetProbe, as_json: bool = False) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    view.probed(
        res, as_json, Console(file=out, width=120, color_system=None), Console(file=err, width=120, color_system=None)
    )
    return out.getvalue(), err.getvalue()


def _probed() -> FleetProbe:
    reports = Path("fleet-reports")
    outcomes = [
        NodeOutcome("gpu-01", "ok", reports / "gpu-01.json", data=node("gpu-01")),
        NodeOutcome("gpu-02", "ok", reports / "gpu-02.json", data=node("gpu-02", env__OMP_NUM_THREADS="3")),
        NodeOutcome("gpu-03", "ok", reports / "gpu-03.json", data=node("gpu-03")),
        NodeOutcome(
            "gpu-04",
            "failed",
            reports / "gpu-04.error.txt",
            "no result from the node: python3 is not installed on the node (not found on PATH)",
        ),
        NodeOutcome("gpu-05", "timed_out", reports / "gpu-05.error.txt", "the probe did not finish within 5 s"),
    ]
    return FleetProbe(job_id="42", partition="gpu", out=reports, outcomes=outcomes, result=fleet_result(outcomes))


def test_summary_with_a_divergent_a_failed_and_a_late_node(update_golden: bool) -> None:
    res = _probed()
    stdout, stderr = _render(res)
    golden = HERE / "fleet" / "slurm-summary.txt"
    if update_golden:
        golden.write_text(stdout)
    assert stdout == golden.read_text(), "fleet/slurm-summary.txt differs (pytest --update-golden)"
    assert stderr == "slurm job 42 in partition gpu released\n"
    assert res.exit_code == 1
    assert "env.OMP_NUM_THREADS" in stdout and "gpu-02" in stdout
    assert [n.status for n in res.result.nodes].count("timed_out") == 1


def test_the_json_is_where_each_node_went_and_the_fleet_reports(capsys: pytest.CaptureFixture[str]) -> None:
    """`fleet probe --format json`: the job, one entry per node, and under "fleet" exactly what `fleet report
    --format json` prints for the folder; the release line stays on stderr."""
    from envpin.fleet.aggregate import to_json_text

    res = _probed()
    stdout, stderr = _render(res, as_json=True)
    data = json.loads(capsys.readouterr().out)
    assert stdout == "" and stderr == "slurm job 42 in partition gpu released\n"
    assert (data["job_id"], data["partition"], data["out"]) == ("42", "gpu", "fleet-reports")
    assert [(n["node"], n["status"]) for n in data["nodes"]][3:] == [("gpu-04", "failed"), ("gpu-05", "timed_out")]
    assert data["nodes"][0] == {"node": "gpu-01", "status": "ok", "report": "fleet-reports/gpu-01.json", "error": None}
    assert data["fleet"] == json.loads(to_json_text(res.result))
