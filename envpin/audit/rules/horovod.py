"""Horovod: an image that installs or builds Horovod turns its Tensor Fusion off (HOROVOD_FUSION_THRESHOLD=0)."""

from __future__ import annotations

from envpin.audit.check import Check, Context, RunRule
from envpin.audit.parser import Stage
from envpin.audit.pipspec import PIP_NAMES, pip_call, req_name
from envpin.audit.rule import EXAMPLE_DIGEST, Rule
from envpin.audit.shell import Command
from envpin.errors import param

_NGC = f"FROM nvcr.io/nvidia/tensorflow:22.03-tf2-py3@{EXAMPLE_DIGEST}\n"

HOROVOD_FUSION_THRESHOLD = Rule(
    id="horovod-fusion-threshold",
    severity="warning",
    title="Horovod installed but HOROVOD_FUSION_THRESHOLD is not 0",
    finds="Horovod installed or built by the Dockerfile (`pip install horovod`, an `ENV`/`ARG` `HOROVOD_*`, "
    "`HOROVOD_*` build variables of a command) but `HOROVOD_FUSION_THRESHOLD` is not `0` in the produced "
    "image; reported where Horovod first comes in, or on the `ENV` that sets another value.",
    why="Horovod's Tensor Fusion batches allreduces in an order that can vary from run to run; NVIDIA's "
    "determinism notes say you may need to disable it. Set HOROVOD_FUSION_THRESHOLD=0.",
    bad=_NGC + "ENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n"
    "RUN HOROVOD_GPU_OPERATIONS=NCCL pip install --no-cache-dir horovod==0.28.1\n",
    good=_NGC + "ENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0 HOROVOD_FUSION_THRESHOLD=0\n"
    "RUN HOROVOD_GPU_OPERATIONS=NCCL pip install --no-cache-dir horovod==0.28.1\n",
    autofix="Sets `HOROVOD_FUSION_THRESHOLD=0` in the recipe `ENV` block after the produced stage's `FROM` (a "
    "wrong value elsewhere in the stage chain is removed). Allreduces are no longer batched, which costs "
    "speed on many small tensors.",
    references=(
        (
            "NVIDIA/framework-reproducibility: TensorFlow determinism (Horovod)",
            "https://github.com/NVIDIA/framework-reproducibility/blob/master/doc/d9m/tensorflow.md",
        ),
        ("Horovod: Tensor Fusion", "https://horovod.readthedocs.io/en/stable/tensor-fusion_include.html"),
    ),
    fixable=True,
)

RULES: tuple[Rule, ...] = (HOROVOD_FUSION_THRESHOLD,)


class _Horovod(RunRule):
    """horovod-fusion-threshold: where Horovod comes in (the first line: an ENV/ARG HOROVOD_*, a HOROVOD_*
    build variable of a command, pip install horovod), then the produced image's HOROVOD_FUSION_THRESHOLD."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx)
        self.sites: list[tuple[int, str]] = []

    def stage(self, st: Stage) -> None:
        for ins in st.instructions:
            if ins.keyword in ("ENV", "ARG"):
                for p in ins.pairs:
                    if p.key.startswith("HOROVOD_") and p.key != "HOROVOD_FUSION_THRESHOLD":
                        self.sites.append((ins.line, f"{ins.keyword} {p.key}"))

    def wants(self, name: str, assigns: bool) -> bool:
        return assigns or name.startswith(PIP_NAMES)

    def command(self, cmd: Command) -> None:
        if not cmd.argv:
            return
        for key in cmd.assigns:
            if key.startswith("HOROVOD_") and key != "HOROVOD_FUSION_THRESHOLD":
                self.sites.append((self.ins.line, f"{key} build variable"))
        # a requirement named horovod has the word in it (any case): only then is the pip call worth reading
        if cmd.name.startswith(PIP_NAMES) and "horovod" in " ".join(cmd.argv).lower():
            call = pip_call(cmd)
            if call and any(req_name(s) == "horovod" for s in call.specs):
                self.sites.append((self.ins.line, "pip install horovod"))

    def finish(self) -> None:
        if not self.sites:
            return
        ctx = self.ctx
        line, how = min(self.sites)
        var = ctx.env().get("HOROVOD_FUSION_THRESHOLD")
        if var is None:
            ctx.add(
                HOROVOD_FUSION_THRESHOLD,
                line,
                f"Horovod is installed ({how}) but HOROVOD_FUSION_THRESHOLD is not set, so tensor fusion "
                "reorders allreduces from run to run",
                f"add ENV HOROVOD_FUSION_THRESHOLD=0 ({param('fix', command='audit')} adds it)",
            )
        elif not var.unresolved and (var.value or "").strip() != "0":
            ctx.add(
                HOROVOD_FUSION_THRESHOLD,
                var.line,
                f"HOROVOD_FUSION_THRESHOLD={var.value} keeps Horovod's tensor fusion on ({how})",
                "set ENV HOROVOD_FUSION_THRESHOLD=0",
            )


CHECKS: tuple[Check, ...] = ()
RUN_RULES: tuple[type[RunRule], ...] = (_Horovod,)
