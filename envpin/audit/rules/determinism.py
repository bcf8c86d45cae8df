"""The determinism environment of the produced image: the recipe's switches for the base's TensorFlow, the
variables that must not be set or have no effect, XLA auto-clustering, Keras 3's default XLA compilation, the
driver check, PYTHONHASHSEED.

These judge the image the build produces (the last stage, or --target) with the ENV it inherits from the stages
it is built on; ARG values do not reach the running container and do not count.
"""

from __future__ import annotations

import re

from envpin.audit.check import Check, Context, RunRule
from envpin.audit.rule import EXAMPLE_BASE, EXAMPLE_DIGEST, Rule
from envpin.audit.words import Var
from envpin.errors import param
from envpin.knowledge import recipes

#: The switches a recipe may require; the other recipe variables have rules of their own.
SWITCHES = ("TF_DETERMINISTIC_OPS", "TF_CUDNN_DETERMINISTIC")
D9M_VARS = (*SWITCHES, "TF_CUDNN_USE_FRONTEND")
COMMON_VARS = ("PYTHONHASHSEED", "HOROVOD_FUSION_THRESHOLD")
TRUE = frozenset({"1", "true"})
_SEED = re.compile(r"0*([0-9]{1,10})\Z")

_NGC_22_03 = f"FROM nvcr.io/nvidia/tensorflow:22.03-tf2-py3@{EXAMPLE_DIGEST}\n"
_FWR_TF = (
    "NVIDIA/framework-reproducibility: TensorFlow determinism",
    "https://github.com/NVIDIA/framework-reproducibility/blob/master/doc/d9m/tensorflow.md",
)
_FWR_STATUS = (
    "NVIDIA/framework-reproducibility: TensorFlow determinism status",
    "https://github.com/NVIDIA/framework-reproducibility/blob/master/doc/d9m/tensorflow_status.md",
)
_TF_USE_CUDNN = (
    "TensorFlow tensorflow/core/util/use_cudnn.cc",
    "https://github.com/tensorflow/tensorflow/blob/master/tensorflow/core/util/use_cudnn.cc",
)
_PICKS = ("How the determinism rule picks the recipe", "#how-the-determinism-rule-picks-the-recipe")
_RECIPE_BLOCK = (
    "Adds the recipe's `ENV` block right after the produced stage's `FROM` (only the variables missing "
    "or wrong; correct values you set are kept) and removes wrong settings elsewhere in the stage "
    "chain so they cannot override it; a later `--fix` extends the block it wrote. "
)

D9M_ENV_MISSING = Rule(
    id="d9m-env-missing",
    severity="error",
    title="determinism environment missing for the base's TensorFlow",
    finds="The determinism variables the base's TensorFlow needs are not set in the produced image (warning when "
    "only the secondary `TF_CUDNN_USE_FRONTEND` is missing); reported on that stage's `FROM` line.",
    why="The TensorFlow version the base image implies (NGC tag -> envpin catalog -> recipe) needs "
    "these variables set before TensorFlow starts, or GPU ops such as cuDNN convolutions pick "
    "nondeterministic algorithms. Add the recipe's ENV block (`envpin audit --fix` inserts it).",
    bad=_NGC_22_03 + "ENV PYTHONHASHSEED=0\n",
    good=EXAMPLE_BASE,
    autofix=_RECIPE_BLOCK + "It changes what TensorFlow does at run time (deterministic kernels, some slower, "
    "or an error for an op without a deterministic version): that is the point.",
    references=(
        _PICKS,
        _FWR_TF,
        ("TensorFlow PR 31465: TF_DETERMINISTIC_OPS", "https://github.com/tensorflow/tensorflow/pull/31465"),
    ),
    fixable=True,
)

D9M_ENV_WRONG = Rule(
    id="d9m-env-wrong",
    severity="error",
    title="determinism environment wrong for the base's TensorFlow",
    finds="A determinism variable is set to a value TensorFlow reads as false, or the wrong switch is used "
    "(`TF_CUDNN_DETERMINISTIC` where `TF_DETERMINISTIC_OPS` is needed, or the reverse on stock TF 1.14-2.0); "
    "reported on the `ENV` line that sets it.",
    why="A determinism variable is set to a value TensorFlow reads as false, or the image relies on "
    "a switch that this TensorFlow version does not read or that covers only cuDNN "
    "(TF_CUDNN_DETERMINISTIC where TF_DETERMINISTIC_OPS is needed). Use the recipe's ENV block.",
    bad=_NGC_22_03 + "ENV TF_CUDNN_DETERMINISTIC=1 PYTHONHASHSEED=0\n",
    good=EXAMPLE_BASE,
    autofix=_RECIPE_BLOCK + "The wrong value is removed from its `ENV`, so the image ends with the recipe's.",
    references=(
        _PICKS,
        _FWR_TF,
        ("TensorFlow PR 24747: TF_CUDNN_DETERMINISTIC", "https://github.com/tensorflow/tensorflow/pull/24747"),
    ),
    fixable=True,
)

D9M_UNKNOWN_TF = Rule(
    id="d9m-unknown-tf",
    severity="info",
    title="TensorFlow version of the base not known",
    finds="The audit cannot tell which TensorFlow the base holds (not an NGC or `tensorflow/tensorflow` tag the "
    "catalog knows, a build argument without a value, ...), so determinism was not checked; the finding "
    "says why.",
    why="The determinism recipe depends on the TensorFlow version; when the base is not an NGC or "
    "tensorflow/tensorflow tag the catalog knows, the audit says so instead of guessing. Pass "
    "--tf MAJOR.MINOR after checking the image, or run `envpin catalog sync`.",
    bad=f"FROM registry.example.com/ml/tf-base:2024.1@{EXAMPLE_DIGEST}\nENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n",
    good=f"FROM tensorflow/tensorflow:2.15.0-gpu@{EXAMPLE_DIGEST}\nENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n",
    autofix="Leaves a comment; only the settings every TensorFlow version needs (`PYTHONHASHSEED`, "
    "`HOROVOD_FUSION_THRESHOLD`) are added for other findings. Audit with `--tf MAJOR.MINOR` to get the "
    "recipe.",
    references=(_PICKS,),
)

D9M_UNAVAILABLE = Rule(
    id="d9m-unavailable",
    severity="info",
    title="no GPU determinism switch for this TensorFlow",
    finds="The base's TensorFlow is older than 1.14 (stock), which has no GPU determinism switch.",
    why="TensorFlow before 1.14 (and NGC images before 19.06) has no switch that makes GPU ops "
    "deterministic; only a newer base can fix that.",
    bad=f"FROM tensorflow/tensorflow:1.13.2-gpu-py3@{EXAMPLE_DIGEST}\nENV PYTHONHASHSEED=0\n",
    good=f"FROM tensorflow/tensorflow:1.15.5-gpu-py3@{EXAMPLE_DIGEST}\nENV TF_CUDNN_DETERMINISTIC=1 PYTHONHASHSEED=0\n",
    autofix="Leaves a comment: moving to a newer base is a change of TensorFlow, not a fix.",
    references=(_FWR_TF, _PICKS),
)

CUDNN_AUTOTUNE_SET = Rule(
    id="cudnn-autotune-set",
    severity="error",
    title="TF_CUDNN_USE_AUTOTUNE is set to turn autotuning off",
    finds="`TF_CUDNN_USE_AUTOTUNE` (the name TensorFlow reads, `tensorflow/core/util/use_cudnn.cc`) set by an "
    "`ENV` of the produced image to a value the recipe table lists as harmful (`0`, `false`) or to one the "
    "Dockerfile computes: turning autotuning off thwarts deterministic cuDNN algorithm selection (TF PR "
    "24747). `1` (or `true`), TensorFlow's default, is harmless and not reported.",
    why="TensorFlow reads TF_CUDNN_USE_AUTOTUNE (tensorflow/core/util/use_cudnn.cc; default true). Setting it to "
    "0 together with TF_DETERMINISTIC_OPS or TF_CUDNN_DETERMINISTIC turns autotuning off, which thwarts the "
    "deterministic cuDNN algorithm selection. Remove it.",
    bad=EXAMPLE_BASE + "ENV TF_CUDNN_USE_AUTOTUNE=0\n",
    good=EXAMPLE_BASE,
    autofix="Removes the variable from every `ENV` of the produced stage and the stages it is built on (the rest "
    "of each `ENV` is kept): TensorFlow's default is what determinism expects.",
    references=(_TF_USE_CUDNN, ("TensorFlow PR 24747", "https://github.com/tensorflow/tensorflow/pull/24747")),
    fixable=True,
)

ENV_NO_EFFECT = Rule(
    id="env-no-effect",
    severity="warning",
    title="a variable TensorFlow never reads",
    finds="`TF_USE_CUDNN_AUTOTUNE` set: a misspelling from NVIDIA's determinism status notes that TensorFlow never "
    "reads, so whoever set it believes something is configured that is not.",
    why="TF_USE_CUDNN_AUTOTUNE is a misspelling (it appears in NVIDIA's determinism status notes); "
    "TensorFlow reads TF_CUDNN_USE_AUTOTUNE. Whoever set it believes autotuning is configured "
    "when it is not. Remove it, and do not set the real name either under determinism.",
    bad=EXAMPLE_BASE + "ENV TF_USE_CUDNN_AUTOTUNE=0\n",
    good=EXAMPLE_BASE,
    autofix="Removes the variable from every `ENV` of the produced stage and the stages it is built on: it did "
    "nothing, so nothing changes but the file.",
    references=(_FWR_STATUS, _TF_USE_CUDNN),
    fixable=True,
)

XLA_AUTO_JIT = Rule(
    id="xla-auto-jit",
    severity="warning",
    title="XLA auto-clustering enabled in an image that sets determinism",
    finds="`TF_XLA_FLAGS` with `--tf_xla_auto_jit=1/2/fusible` (or `--tf_xla_cpu_global_jit`) in an image that "
    "sets a determinism switch.",
    why="TF_XLA_FLAGS=--tf_xla_auto_jit=1/2/fusible compiles clusters with XLA. Under determinism "
    "XLA's GPU reductions are deterministic from TensorFlow 2.2 but its Scatter only from 2.8, and "
    "auto-clustering decides per run what is fused, which changes numerics. Drop the flag, or "
    "enable XLA per function with jit_compile=True.",
    bad=EXAMPLE_BASE + "ENV TF_XLA_FLAGS=--tf_xla_auto_jit=2\n",
    good=EXAMPLE_BASE + "# XLA where the model asks for it: @tf.function(jit_compile=True)\n",
    autofix="Leaves a comment: dropping auto-clustering changes speed and numerics, which the model's owner decides.",
    references=(_FWR_STATUS, ("TensorFlow XLA", "https://www.tensorflow.org/xla")),
)

NVIDIA_DISABLE_REQUIRE = Rule(
    id="nvidia-disable-require",
    severity="warning",
    title="NVIDIA_DISABLE_REQUIRE is set",
    finds="`NVIDIA_DISABLE_REQUIRE` set to a true value by an `ENV` of the produced image.",
    why="It turns off the container runtime's check that the host driver supports the image's CUDA, "
    "so the image starts on drivers it was not built for (forward compatibility included) and "
    "can fail or compute differently. Remove it and meet the driver requirement.",
    bad=EXAMPLE_BASE + "ENV NVIDIA_DISABLE_REQUIRE=1\n",
    good=EXAMPLE_BASE,
    autofix="Leaves a comment: without the check the image may start where it should not, but removing it may "
    "stop it starting on the hosts it runs on today.",
    references=(("`envpin doctor`: the host's driver against the image", "doctor.md"),),
)

PYTHONHASHSEED_UNSET = Rule(
    id="pythonhashseed-unset",
    severity="warning",
    title="PYTHONHASHSEED is not fixed",
    finds="`PYTHONHASHSEED` not set in the produced image, `random`, or not an integer 0..4294967295.",
    why="Without a fixed PYTHONHASHSEED, str and bytes hashes (set and dict-of-set iteration order) "
    "differ between processes. Set it to an integer with ENV, before Python starts.",
    bad=_NGC_22_03 + "ENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=random\n",
    good=EXAMPLE_BASE,
    autofix="Sets `PYTHONHASHSEED=0` in the recipe `ENV` block (an integer you set is kept): only hash order "
    "changes, and from now on it is the same in every process.",
    references=(("Python: PYTHONHASHSEED", "https://docs.python.org/3/using/cmdline.html#envvar-PYTHONHASHSEED"),),
    fixable=True,
)

_STOCK_2_17 = f"FROM tensorflow/tensorflow:2.17.0-gpu@{EXAMPLE_DIGEST}\nENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n"
#: The battery check whose table entry says where Keras 3 auto-jit raises (TF 2.16-2.19 allow Keras 3.0-3.6).
_AUTO_JIT_CHECK = "keras-auto-jit-max-pool"

KERAS3_AUTO_XLA = Rule(
    id="keras3-auto-xla",
    severity="warning",
    title="Keras 3 may compile the model with XLA under determinism",
    finds="A produced image whose base holds TensorFlow 2.16 or later (Keras 3 is `tf.keras`) and does not set "
    "`TF_USE_LEGACY_KERAS` to a true value: a warning where the TensorFlow still allows Keras 3.0-3.6 "
    "(2.16-2.19), an info finding from 2.20 (Keras 3.10+ required); reported on that stage's `FROM`.",
    why="Keras 3's model.compile() defaults to jit_compile='auto', which compiles with XLA on a machine with a "
    "GPU; XLA's MaxPool gradient has no deterministic implementation, so under determinism a model with "
    "MaxPool raises 'GPU MaxPool gradient ops do not yet have a deterministic XLA implementation.' with "
    "Keras 3.0-3.6. Pass jit_compile=False to model.compile(), or install Keras 3.7 or later and enable "
    "determinism before compiling (it then keeps XLA off). The Dockerfile cannot show the training code: "
    "once the code passes jit_compile=False, silence this with '# envpin: ignore=keras3-auto-xla'.",
    bad=_STOCK_2_17,
    good=_STOCK_2_17 + "# Keras 2 instead of Keras 3 (tf.keras then never defaults to XLA)\n"
    "RUN pip install --no-cache-dir tf-keras==2.17.0\nENV TF_USE_LEGACY_KERAS=1\n",
    autofix="Leaves a comment: the fix is in the training code (jit_compile=False) or in the Keras version, "
    "which the model's owner decides.",
    references=(
        ("TensorFlow issue 69417", "https://github.com/tensorflow/tensorflow/issues/69417"),
        (
            "Keras trainer.py (jit_compile='auto')",
            "https://github.com/keras-team/keras/blob/master/keras/src/trainers/trainer.py",
        ),
        (
            "Where common advice is wrong: jit_compile=True with determinism",
            "common-advice.md#jit_compiletrue-with-determinism",
        ),
    ),
)

RULES: tuple[Rule, ...] = (
    D9M_ENV_MISSING,
    D9M_ENV_WRONG,
    D9M_UNKNOWN_TF,
    D9M_UNAVAILABLE,
    CUDNN_AUTOTUNE_SET,
    ENV_NO_EFFECT,
    XLA_AUTO_JIT,
    NVIDIA_DISABLE_REQUIRE,
    PYTHONHASHSEED_UNSET,
    KERAS3_AUTO_XLA,
)


def truthy(var: Var | None) -> bool:
    """A variable set to a value TensorFlow reads as true."""
    return var is not None and var.value is not None and var.value.strip().lower() in TRUE


def check_determinism(ctx: Context) -> None:
    """The recipe's switches for the base's TensorFlow: unknown, unavailable, wrong or missing."""
    base, env, line = ctx.base, ctx.env(), ctx.target.from_.line
    if base.recipe is None:
        ctx.add(
            D9M_UNKNOWN_TF,
            line,
            base.reason or f"the TensorFlow version of {base.label} is not known",
            f"check the image's TensorFlow and audit with {param('tf')} MAJOR.MINOR (or run `envpin catalog sync`)",
        )
        return
    recipe = base.recipe
    required = {k: v for k, v in recipe.env_dict().items() if k not in COMMON_VARS}
    what = f"{base.label} (TensorFlow {base.tf_version}, recipe {recipe.id})"
    if not any(k in SWITCHES for k in required):
        ctx.add(D9M_UNAVAILABLE, line, f"{what} has no GPU determinism switch", "use a newer base image")
        return
    fixes = param("fix", command="audit")
    missing: list[str] = []
    for name, want in required.items():
        var = env.get(name)
        if var is None:
            missing.append(name)
        elif not var.unresolved and var.value is not None and var.value.strip().lower() not in TRUE:
            ctx.add(
                D9M_ENV_WRONG,
                var.line,
                f"{name}={var.value} is not a value TensorFlow reads as true; {what} needs {name}={want}",
                f"set {name}={want}",
            )
    for alt, needed in (
        ("TF_CUDNN_DETERMINISTIC", "TF_DETERMINISTIC_OPS"),
        ("TF_DETERMINISTIC_OPS", "TF_CUDNN_DETERMINISTIC"),
    ):
        var = env.get(alt)
        if needed in missing and alt not in required and var is not None and (truthy(var) or var.unresolved):
            reason = (
                "only makes cuDNN convolution and pooling deterministic"
                if alt == "TF_CUDNN_DETERMINISTIC"
                else f"is not read by TensorFlow {base.tf_version}"
            )
            ctx.add(
                D9M_ENV_WRONG,
                var.line,
                f"{alt} {reason}; {what} needs {needed}={required[needed]}",
                f"set {needed}={required[needed]} ({fixes} adds the recipe's ENV block)",
            )
            missing.remove(needed)
    if missing:
        severity = "error" if any(m in SWITCHES for m in missing) else "warning"
        settings = " ".join(f"{m}={required[m]}" for m in missing)
        ctx.add(
            D9M_ENV_MISSING,
            line,
            f"{what} needs {settings}, which the image does not set",
            f"add ENV {settings} after FROM ({fixes} adds the recipe's ENV block)",
            severity,
        )


def check_autotune(ctx: Context) -> None:
    """The recipe table's must-not-set and no-effect names, wherever an ENV of the image sets them."""
    fixes = param("fix", command="audit")
    for item in recipes.shared("unset"):
        for ins, value in ctx.env_settings(item.name):
            if not item.harms(None if value is None or "$" in value else value):
                continue  # a value the table says is harmless (TF_CUDNN_USE_AUTOTUNE=1, its default)
            ctx.add(
                CUDNN_AUTOTUNE_SET,
                ins.line,
                f"{item.name}={value} is set; {item.why}",
                f"remove {item.name} from ENV ({fixes} removes it)",
            )
    for item in recipes.shared("no_effect"):
        for ins, value in ctx.env_settings(item.name):
            ctx.add(
                ENV_NO_EFFECT,
                ins.line,
                f"{item.name}={value} has no effect: TensorFlow reads {item.instead}",
                f"remove {item.name} from ENV ({fixes} removes it); do not set {item.instead} either",
            )


def xla_auto_jit(flags: str) -> str | None:
    """The flag that turns auto-clustering on, if any (--tf_xla_auto_jit=1|2|fusible, CPU global jit)."""
    words = flags.split()
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if not eq and i + 1 < len(words) and not words[i + 1].startswith("-"):
            value = words[i + 1]
        if name == "--tf_xla_auto_jit" and value.strip("'\"") not in ("", "-1", "0"):
            return f"--tf_xla_auto_jit={value}"
        if name == "--tf_xla_cpu_global_jit" and value.lower() not in ("false", "0"):
            return word
    return None


def check_xla(ctx: Context) -> None:
    """XLA auto-clustering, only where a determinism switch is on (elsewhere nothing is promised)."""
    env = ctx.env()
    if not any(truthy(env.get(s)) for s in SWITCHES):
        return
    var = env.get("TF_XLA_FLAGS")
    flag = xla_auto_jit(var.value or "") if var is not None else None
    if var is not None and flag:
        ctx.add(
            XLA_AUTO_JIT,
            var.line,
            f"TF_XLA_FLAGS turns on XLA auto-clustering ({flag}) in an image that sets determinism",
            "drop --tf_xla_auto_jit from TF_XLA_FLAGS; use jit_compile=True per function if XLA is needed",
        )


def check_keras3(ctx: Context) -> None:
    """Keras 3's jit_compile='auto' where the base's TensorFlow is 2.16 or later (the recipe's Keras 3 step)."""
    records = ctx.base.records
    if records is None or not any(s.step == "keras3_no_auto_xla" for s in records.steps):
        return
    if truthy(ctx.env().get("TF_USE_LEGACY_KERAS")):
        return
    what = f"{ctx.base.label} (TensorFlow {ctx.base.tf_version})"
    if any(_AUTO_JIT_CHECK in e.checks for e in records.raises):
        ctx.add(
            KERAS3_AUTO_XLA,
            ctx.target.from_.line,
            f"{what} allows Keras 3.0-3.6, whose model.compile() defaults to XLA on a GPU, and XLA's MaxPool "
            "gradient raises under determinism",
            "pass jit_compile=False to model.compile(), or install keras>=3.7 and enable determinism before compiling",
        )
    else:
        ctx.add(
            KERAS3_AUTO_XLA,
            ctx.target.from_.line,
            f"{what} requires a Keras 3 that keeps jit_compile='auto' off only while op determinism is on: "
            "enable determinism before model.compile()",
            "call enable_op_determinism() (or envpin.enable_determinism()) before model.compile()",
            "info",
        )


def check_nvidia_disable_require(ctx: Context) -> None:
    """NVIDIA_DISABLE_REQUIRE set to anything but an empty or false value."""
    for ins, value in ctx.env_settings("NVIDIA_DISABLE_REQUIRE"):
        if value is None or value.strip().lower() not in ("", "0", "false", "f"):
            ctx.add(
                NVIDIA_DISABLE_REQUIRE,
                ins.line,
                f"NVIDIA_DISABLE_REQUIRE={value} turns off the driver/CUDA compatibility check",
                "remove NVIDIA_DISABLE_REQUIRE and run on a driver the image supports (envpin doctor)",
            )


def check_hashseed(ctx: Context) -> None:
    """PYTHONHASHSEED unset (reported on FROM) or set to what Python does not take as a seed."""
    var = ctx.env().get("PYTHONHASHSEED")
    if var is None:
        ctx.add(
            PYTHONHASHSEED_UNSET,
            ctx.target.from_.line,
            "PYTHONHASHSEED is not set, so str/bytes hashing (set iteration order) differs per process",
            f"add ENV PYTHONHASHSEED=0 ({param('fix', command='audit')} adds it)",
        )
    elif not var.unresolved and not seed_ok(var.value):
        ctx.add(
            PYTHONHASHSEED_UNSET,
            var.line,
            f"PYTHONHASHSEED={var.value} does not fix hashing (it must be an integer 0..4294967295)",
            "set ENV PYTHONHASHSEED=0",
        )


def seed_ok(value: str | None) -> bool:
    """PYTHONHASHSEED as Python accepts it: ASCII decimal 0..4294967295 (leading zeros allowed). Matched
    before int(), so '٢' is refused and 5,000 digits are a finding, not int()'s ValueError."""
    m = _SEED.match(value.strip()) if value is not None else None
    return m is not None and int(m.group(1)) <= 4294967295


CHECKS: tuple[Check, ...] = (
    check_determinism,
    check_autotune,
    check_xla,
    check_nvidia_disable_require,
    check_hashseed,
    check_keras3,
)
RUN_RULES: tuple[type[RunRule], ...] = ()
