"""`envpin fleet probe --slurm`'s summary, byte for byte (regenerate with pytest --update-golden): where each
node's report or error went, then the same fleet summary `envpin fleet report` prints."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from envpin.api import FleetProbe
from envpin.fleet.slurm import NodeOutcome, fleet_result
from envpin.views import slurm as view
from tests.fleetdata import node

HERE = Path(__file__).resolve().parent


def _render(res: FleetProbe) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    view.probed(res, Console(file=out, width=120, color_system=None), Console(file=err, width=120, color_system=None))
    return out.getvalue(), err.getvalue()


def test_summary_with_a_divergent_a_failed_and_a_late_node(update_golden: bool) -> None:
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
    res = FleetProbe(job_id="42", partition="gpu", out=reports, outcomes=outcomes, result=fleet_result(outcomes))
    stdout, stderr = _render(res)
    golden = HERE / "fleet" / "slurm-summary.txt"
    if update_golden:
        golden.write_text(stdout)
    assert stdout == golden.read_text(), "fleet/slurm-summary.txt differs (pytest --update-golden)"
    assert stderr == "slurm job 42 in partition gpu released\n"
    assert res.exit_code == 1
    assert "env.OMP_NUM_THREADS" in stdout and "gpu-02" in stdout
    assert [n.status for n in res.result.nodes].count("timed_out") == 1
