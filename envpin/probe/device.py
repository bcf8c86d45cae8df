"""The device class: the one rule for naming "machines that should train bit-identically".

Golden training hashes are recorded and compared per device class, so the self-test (which knows what
TensorFlow actually used) and the fingerprint side (which only has a report) must build the same string.
Standard library only, Python 3.6+.

Format:
* GPU: ``gpu:<model>;cc=<major.minor>;count=<n>`` (several models: ``|``-joined, sorted) — cuBLAS and
  cuDNN promise equal bits only on the same architecture and SM count;
* CPU: ``cpu:<ISA level>;intra_op=<n>;inter_op=<n>;onednn=<on|off|unknown>`` — thread pools and oneDNN
  change the floating-point reduction order on CPUs.
"""

from typing import Any, Dict, Optional, Sequence, Tuple


def device_class(gpus: Sequence[Tuple[str, str]], cpu: str, intra_op: str, inter_op: str, onednn: str) -> str:
    """The class for these readings; `gpus` is a list of (model name, compute capability)."""
    if gpus:
        models = sorted(set("%s;cc=%s" % (name, cc or "unknown") for name, cc in gpus))
        return "gpu:%s;count=%d" % ("|".join(models), len(gpus))
    return "cpu:%s;intra_op=%s;inter_op=%s;onednn=%s" % (cpu, intra_op, inter_op, onednn)


def from_flat(flat: Dict[str, str]) -> str:
    """The class as far as a report's flattened fields tell it (used only when a golden hash comes without
    the self-test's own class): GPUs and ISA level from the report, threads and oneDNN from its env."""
    gpus = []
    i = 0
    while "gpu.devices.%d.name" % i in flat:
        gpus.append((flat["gpu.devices.%d.name" % i], flat.get("gpu.devices.%d.compute_capability" % i, "")))
        i += 1
    isa = flat.get("cpu.isa_level") or flat.get("os.arch") or "unknown"
    onednn = _switch(flat.get("env.TF_ENABLE_ONEDNN_OPTS"))
    return device_class(gpus, isa, flat.get("env.TF_NUM_INTRAOP_THREADS") or "default",
                        flat.get("env.TF_NUM_INTEROP_THREADS") or "default", onednn)


def _switch(value: Optional[Any]) -> str:
    if value is None or str(value).strip() == "":
        return "unknown"
    return "on" if str(value).strip().lower() in ("1", "true", "yes", "on") else "off"
