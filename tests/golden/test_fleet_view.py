"""`envpin fleet probe --slurm`'s summary, byte for byte (regenerate with pytest --update-golden)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from envpin.api import FleetProbe
from envpin.slurm import Divergence, NodeSummary
from envpin.views import slurm as view

HERE = Path(__file__).resolve().parent
CPU = "cpu:x86-64-v3;intra_op=2;inter_op=2;onednn=unknown"
FP_A = "sha256:" + "60dc983a0c77" + "0" * 52
FP_B = "sha256:" + "c5aa499d1465" + "1" * 52


def _render(res: FleetProbe) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    view.probed(res, Console(file=out, width=120, color_system=None), Console(file=err, width=120, color_system=None))
    return out.getvalue(), err.getvalue()


def test_summary_with_a_divergent_a_failed_and_a_late_node(update_golden: bool) -> None:
    reports = Path("fleet-reports")
    res = FleetProbe(
        job_id="42", partition="gpu", out=reports,
        rows=[
            NodeSummary("gpu-01", "ok", reports / "gpu-01.json", None, CPU, FP_A),
            NodeSummary("gpu-02", "ok", reports / "gpu-02.json", None, CPU, FP_B),
            NodeSummary("gpu-03", "ok", reports / "gpu-03.json", None, CPU, FP_A),
            NodeSummary("gpu-04", "failed", reports / "gpu-04.error.txt",
                        "no result from the node: execve(): python3: No such file or directory", None, None),
            NodeSummary("gpu-05", "timeout", reports / "gpu-05.error.txt", "the probe did not finish within 5 s",
                        None, None),
        ],
        reference=["gpu-01", "gpu-03"],
        divergences=[Divergence("gpu-02", "env.OMP_NUM_THREADS", "3", None,
                                "thread settings: how reductions are split")],
    )
    stdout, stderr = _render(res)
    golden = HERE / "fleet" / "slurm-summary.txt"
    if update_golden:
        golden.write_text(stdout)
    assert stdout == golden.read_text(), "fleet/slurm-summary.txt differs (pytest --update-golden)"
    assert stderr == "slurm job 42 in partition gpu released\n"
    assert res.exit_code == 1
