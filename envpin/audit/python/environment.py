"""Environment variables the recipe table says must not be set (py-env-must-not-be-set) or that TensorFlow never
reads (py-env-no-effect), set by the script itself. No mechanical fix: the line is commented."""

from __future__ import annotations

from envpin.audit.python.refs import SCRIPTS
from envpin.audit.python.script import Script
from envpin.audit.rule import Rule
from envpin.knowledge import recipes

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from envpin.audit.python.edits import Fix, Startup

PY_ENV_UNSET = Rule(
    id="py-env-must-not-be-set",
    severity="error",
    title="The script sets an environment variable the recipe says must not be set",
    finds='`os.environ` (or `os.putenv`) setting a variable the recipe table lists under "unset" '
    "(`TF_CUDNN_USE_AUTOTUNE`) to a value the table lists as harmful (`0`, `false`) or to a computed one; "
    "`TF_CUDNN_USE_AUTOTUNE=1`, TensorFlow's default, is harmless and not reported.",
    why="TF_CUDNN_USE_AUTOTUNE=0 together with the determinism switch turns cuDNN autotuning off, which thwarts "
    "the deterministic cuDNN algorithm selection. Remove the line.",
    bad="import os\n\nos.environ['TF_CUDNN_USE_AUTOTUNE'] = '0'\n",
    good="import os\n\nos.environ['TF_DETERMINISTIC_OPS'] = '1'\n",
    autofix="Comments the line.",
    references=(("TensorFlow PR 24747", "https://github.com/tensorflow/tensorflow/pull/24747"), SCRIPTS),
    language="python",
)


PY_ENV_NO_EFFECT = Rule(
    id="py-env-no-effect",
    severity="warning",
    title="The script sets an environment variable TensorFlow never reads",
    finds="`os.environ` setting a variable the recipe table lists as having no effect (the misspelt "
    "`TF_USE_CUDNN_AUTOTUNE`).",
    why="TensorFlow never reads the name, so the line does nothing but suggest it does; the name it does read, "
    "TF_CUDNN_USE_AUTOTUNE, must not be set to 0 or false either. Remove the line.",
    bad="import os\n\nos.environ['TF_USE_CUDNN_AUTOTUNE'] = '0'\n",
    good="import os\n\nos.environ['TF_DETERMINISTIC_OPS'] = '1'\n",
    autofix="Comments the line.",
    references=(
        (
            "TensorFlow source: use_cudnn.cc",
            "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/util/use_cudnn.cc",
        ),
        SCRIPTS,
    ),
    language="python",
)


RULES: tuple[Rule, ...] = (PY_ENV_UNSET, PY_ENV_NO_EFFECT)


def check_env(s: Script) -> None:
    book = recipes.book()
    unset = {u.name: u for u in book.unset}
    no_effect = {u.name: u for u in book.no_effect}
    for line, key, value in s.env:
        if key in unset and unset[key].harms(value):
            s.add(PY_ENV_UNSET, line, f"{key} is set: {unset[key].why}", "remove the line")
        elif key in no_effect:
            s.add(PY_ENV_NO_EFFECT, line, f"{key} is never read: {no_effect[key].why}", "remove the line")


CHECKS = (check_env,)
FIXES: dict[str, Fix] = {}
FOLLOW_UPS: dict[str, Fix] = {}
STARTUP: dict[str, Startup] = {}
