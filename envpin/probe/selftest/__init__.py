"""Determinism self-test: per-op verdicts, the golden training hash and seed hygiene.

Standard library only at import time, Python 3.6+ (it travels into images in envpin.pyz); TensorFlow and
NumPy are imported lazily, and only in fresh child processes:

* the op battery runs in a child started with ``TF_DETERMINISTIC_OPS=1`` (plus ``enable_op_determinism()``
  on TF >= 2.8) so determinism is on before the first op; ``compare=True`` runs it again in a child with
  determinism off, which shows what the recipe buys;
* each check runs an op (or its gradient) on fixed, seeded inputs several times and compares the outputs
  **bitwise** (the raw bytes), following NVIDIA's framework-reproducibility tests: gradients are taken
  through random upstream values ("gradient injection", new values per trial) and sizes are large enough
  that the GPU kernels that use atomicAdd actually spread the reduction over many thread blocks;
* an op that raises under determinism is reported, never allowed to stop the battery.

``python -m envpin.probe.selftest [--compare] [--quick]`` prints the whole result as JSON;
``--child`` is the battery child itself.

Modules: ``compare`` (bitwise comparison and per-check verdicts), ``ops`` (the checks and their inputs),
``battery`` (runs the checks in the child), ``run`` (the parent: children, the whole result, problems),
``report`` (one neutral summary that the Markdown report and the terminal view both draw from).
"""

from envpin.probe.selftest.battery import FULL, QUICK, battery
from envpin.probe.selftest.compare import (
    VERDICTS,
    classify_exception,
    clean_tf_message,
    compare_outputs,
    finish_check,
    pack,
    verdict_summary,
)
from envpin.probe.selftest.ops import select
from envpin.probe.selftest.report import render_markdown, summary
from envpin.probe.selftest.run import SCHEMA, main, problems, run_battery, run_selftest
from envpin.probe.selftest.trial import CHECKS, PLANTED, SEED

__all__ = [
    "CHECKS",
    "FULL",
    "PLANTED",
    "QUICK",
    "SCHEMA",
    "SEED",
    "VERDICTS",
    "battery",
    "classify_exception",
    "clean_tf_message",
    "compare_outputs",
    "finish_check",
    "main",
    "pack",
    "problems",
    "render_markdown",
    "run_battery",
    "run_selftest",
    "select",
    "summary",
    "verdict_summary",
]
