"""Horovod: a script that imports it runs with Tensor Fusion off (HOROVOD_FUSION_THRESHOLD=0), set by the script
or its image (py-horovod-fusion), and without autotuning (py-horovod-autotune: the distributed recipe's
HOROVOD_AUTOTUNE). No mechanical fix: the variables belong in the image's ENV, which the Dockerfile audit's --fix
(fusion) and `envpin render --distributed` (autotune) set."""

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


PY_HOROVOD_AUTOTUNE = Rule(
    id="py-horovod-autotune",
    severity="warning",
    title="Horovod's autotuning is turned on",
    finds="A script that imports Horovod where the script (`os.environ`) or the image sets `HOROVOD_AUTOTUNE` to "
    "another value than the distributed recipe's `0` (Horovod turns autotuning on for a value above 0).",
    why="Autotuning changes the fusion threshold, cycle time, response cache and hierarchical allreduce/allgather "
    "while training, so each run can group and order its allreduces differently. Tune once, then fix the values "
    "it found; keep HOROVOD_AUTOTUNE=0 (and start horovodrun without its autotune option, which sets it).",
    bad="import os\n\nos.environ['HOROVOD_AUTOTUNE'] = '1'\nos.environ['HOROVOD_FUSION_THRESHOLD'] = '0'\n"
    "import horovod.tensorflow.keras as hvd\n\nhvd.init()\n",
    good="import os\n\nos.environ['HOROVOD_AUTOTUNE'] = '0'\nos.environ['HOROVOD_FUSION_THRESHOLD'] = '0'\n"
    "import horovod.tensorflow.keras as hvd\n\nhvd.init()\n",
    autofix="Comments the line.",
    references=(
        ("Horovod: Autotune", "https://horovod.readthedocs.io/en/stable/autotune_include.html"),
        ("The distributed recipe", "distributed.md"),
        SCRIPTS,
    ),
    language="python",
)


RULES: tuple[Rule, ...] = (PY_HOROVOD_FUSION, PY_HOROVOD_AUTOTUNE)


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


def check_autotune(s: Script) -> None:
    part = recipes.book().distributed
    var = next((e for e in part.env if e.name == "HOROVOD_AUTOTUNE"), None) if part else None
    if var is None or var.value is None or not s.names.uses("horovod"):
        return
    want = var.value
    mine = s.env_value("HOROVOD_AUTOTUNE")
    value = mine[1] if mine else s.target.image_env.get("HOROVOD_AUTOTUNE")
    if value is None or value.strip() == want or not value.strip().isdigit() or int(value) <= 0:
        return  # unset or off (Horovod turns it on only for a number above 0); a computed value is not judged
    s.add(
        PY_HOROVOD_AUTOTUNE,
        mine[0] if mine else s.first_import_line(("horovod",)),
        f"HOROVOD_AUTOTUNE={value} (in the {'script' if mine else 'image'}) turns Horovod's autotuning on; the "
        f"distributed recipe sets {want}: {var.why}",
        f"set HOROVOD_AUTOTUNE={want} (the distributed recipe's value), and fix the values autotuning found instead",
    )


CHECKS = (check_horovod, check_autotune)
FIXES: dict[str, Fix] = {}
FOLLOW_UPS: dict[str, Fix] = {}
STARTUP: dict[str, Startup] = {}
