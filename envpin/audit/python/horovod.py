"""Horovod: a script that imports it runs with Tensor Fusion off (HOROVOD_FUSION_THRESHOLD=0), set by the script
or its image (py-horovod-fusion). No mechanical fix: the variable belongs in the image's ENV, which the
Dockerfile audit's --fix sets."""

from __future__ import annotations

from envpin.audit.python.refs import FWR, SCRIPTS
from envpin.audit.python.script import Script
from envpin.audit.rule import Rule
from envpin.knowledge import recipes

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from envpin.audit.python.edits import Fix, Startup

PY_HOROVOD_FUSION = Rule(
    id="py-horovod-fusion",
    severity="warning",
    title="Horovod is used but HOROVOD_FUSION_THRESHOLD is not 0",
    finds="A script that imports Horovod where neither the script (`os.environ`) nor the image (a Dockerfile "
    "audited in the same run, or the lock) sets `HOROVOD_FUSION_THRESHOLD` to the recipe's `0`.",
    why="Horovod's Tensor Fusion batches allreduces in an order that can vary from run to run. Set "
    "HOROVOD_FUSION_THRESHOLD=0 in the image (or before hvd.init()).",
    bad="import horovod.tensorflow.keras as hvd\n\nhvd.init()\n",
    good="import os\n\nos.environ['HOROVOD_FUSION_THRESHOLD'] = '0'\nimport horovod.tensorflow.keras as hvd\n\n"
    "hvd.init()\n",
    autofix="Comments the import.",
    references=(
        FWR,
        ("Horovod: Tensor Fusion", "https://horovod.readthedocs.io/en/stable/tensor-fusion_include.html"),
        SCRIPTS,
    ),
    language="python",
)


RULES: tuple[Rule, ...] = (PY_HOROVOD_FUSION,)


def check_horovod(s: Script) -> None:
    if not s.names.uses("horovod"):
        return
    want = next((e.value for e in recipes.book().env if e.name == "HOROVOD_FUSION_THRESHOLD"), "0")
    mine = s.env_value("HOROVOD_FUSION_THRESHOLD")
    value = mine[1] if mine else s.target.image_env.get("HOROVOD_FUSION_THRESHOLD")
    if value != want:
        line = s.first_import_line(("horovod",))
        what = "is not set" if value is None else f"is {value}"
        s.add(
            PY_HOROVOD_FUSION,
            mine[0] if mine else line,
            f"Horovod is used but HOROVOD_FUSION_THRESHOLD {what} (in the script or the image), so tensor "
            "fusion reorders allreduces from run to run",
            f"set HOROVOD_FUSION_THRESHOLD={want} in the image (ENV) or before hvd.init()",
        )


CHECKS = (check_horovod,)
FIXES: dict[str, Fix] = {}
FOLLOW_UPS: dict[str, Fix] = {}
STARTUP: dict[str, Startup] = {}
