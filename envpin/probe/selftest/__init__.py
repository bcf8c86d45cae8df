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

The names below are loaded from their module on first use (envpin.portable.lazy, as in envpin.probe):
importing the package, e.g. for ``envpin.probe.selftest.expect``, does not load the battery, its checks and the
runner.
"""

import sys

from envpin.portable.lazy import LazyModule

TYPE_CHECKING = False  # typing's without importing it; annotations naming its types are quoted (3.6 evaluates them)
if TYPE_CHECKING:  # the one declaration of the public names: `name as name` exports it
    from typing import Any, Callable

    from envpin.probe.selftest.battery import FULL as FULL
    from envpin.probe.selftest.battery import QUICK as QUICK
    from envpin.probe.selftest.battery import battery as battery
    from envpin.probe.selftest.compare import VERDICTS as VERDICTS
    from envpin.probe.selftest.compare import classify_exception as classify_exception
    from envpin.probe.selftest.compare import clean_tf_message as clean_tf_message
    from envpin.probe.selftest.compare import compare_outputs as compare_outputs
    from envpin.probe.selftest.compare import finish_check as finish_check
    from envpin.probe.selftest.compare import pack as pack
    from envpin.probe.selftest.compare import verdict_summary as verdict_summary

    # the registries live in trial, but only importing ops (and ops_seeds) fills them
    from envpin.probe.selftest.ops import CHECKS as CHECKS
    from envpin.probe.selftest.ops import PLANTED as PLANTED
    from envpin.probe.selftest.ops import select as select
    from envpin.probe.selftest.report import render_markdown as render_markdown
    from envpin.probe.selftest.report import summary as summary
    from envpin.probe.selftest.run import SCHEMA as SCHEMA
    from envpin.probe.selftest.run import main as main
    from envpin.probe.selftest.run import problems as problems
    from envpin.probe.selftest.run import run_battery as run_battery
    from envpin.probe.selftest.run import run_selftest as run_selftest
    from envpin.probe.selftest.trial import SEED as SEED


class _Package(LazyModule):
    """envpin.probe.selftest: its declared names imported from their module on first access, then kept."""

    # `battery` names both a module and the function it defines; the package's attribute is the function, as
    # it was when the package imported it eagerly: importing the module (which sets the package attribute
    # of that name) must not replace it.
    @property
    def battery(self) -> "Callable[..., Any]":
        from envpin.probe.selftest.battery import battery

        return battery

    @battery.setter
    def battery(self, value: object) -> None:
        pass


sys.modules[__name__].__class__ = _Package
