"""The device class: the one rule for naming "machines that should train bit-identically".

Golden training hashes are recorded and compared per device class, so the self-test (which knows what
TensorFlow actually used) and the fingerprint side (which only has a report) must build the same string.
Standard library only, Python 3.6+.

Format (as self-test results record it, and as reports' ``golden.<device class>`` fields key it):
* GPU: ``gpu:<model>;cc=<major.minor>;count=<n>`` (several models: ``|``-joined, sorted) — cuBLAS and
  cuDNN promise equal bits only on the same architecture and SM count;
* CPU: ``cpu:<ISA level>;intra_op=<n>;inter_op=<n>;onednn=<on|off|unknown>`` — thread pools and oneDNN
  change the floating-point reduction order on CPUs.
"""

from typing import Any, Dict, Iterable, Optional, Sequence, Tuple

from envpin.portable import versions

X86_64 = ("x86_64", "AMD64", "amd64")
AARCH64 = ("aarch64", "arm64")

# CPU flags for which TensorFlow >= 2.9 on Linux x86-64 turns oneDNN's custom ops on when
# TF_ENABLE_ONEDNN_OPTS is unset (tensorflow/core/util/port.cc, DefaultOneDnnPolicy: AVX512_VNNI,
# AVX512_BF16, AVX_VNNI, AMX_TILE/INT8/BF16, or an Arm Neoverse V1); without any of them it stays off.
ONEDNN_DEFAULT_FLAGS = ("avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_int8", "amx_bf16")


def device_class(gpus: Sequence[Tuple[str, str]], cpu: str, intra_op: str, inter_op: str, onednn: str) -> str:
    """The class for these readings; `gpus` is a list of (model name, compute capability)."""
    if gpus:
        models = sorted(set("%s;cc=%s" % (name, cc or "unknown") for name, cc in gpus))
        return "gpu:%s;count=%d" % ("|".join(models), len(gpus))
    return "cpu:%s;intra_op=%s;inter_op=%s;onednn=%s" % (cpu, intra_op, inter_op, onednn)


def thread_count(setting: Optional[Any], default: str) -> str:
    """A TF_NUM_*_THREADS setting as the class holds it: a positive count as given, anything else (unset,
    0, junk) means TensorFlow's own pool size, which `default` names."""
    text = str(setting).strip() if setting is not None else ""
    return text if text.isdigit() and int(text) > 0 else default


def onednn_switch(value: Optional[Any]) -> Optional[str]:
    """TF_ENABLE_ONEDNN_OPTS as 'on' or 'off'; None when it is unset or empty (TensorFlow's default applies)."""
    if value is None or str(value).strip() == "":
        return None
    return "on" if str(value).strip().lower() in ("1", "true", "yes", "on") else "off"


def onednn_default(tf_version: Optional[str], flags: Iterable[str], machine: str) -> str:
    """oneDNN's custom ops with TF_ENABLE_ONEDNN_OPTS unset: on in TensorFlow >= 2.9 on x86-64 CPUs with
    neural-network instructions (VNNI, BF16, AMX), off otherwise; 'unknown' without a TensorFlow version."""
    if tf_version is None:
        return "unknown"
    if (versions.parse_version(tf_version) or (0,)) < (2, 9):
        return "off"
    if machine in AARCH64:
        # TensorFlow also turns them on for one Arm core (Neoverse V1, by its CPU id): TensorFlow's own
        # answer (probe --with-tf, the self-test) says; this rule cannot.
        return "unknown"
    if machine not in X86_64:
        return "off"
    return "on" if set(flags) & set(ONEDNN_DEFAULT_FLAGS) else "off"


def from_flat(flat: Dict[str, str]) -> str:
    """The class as far as a report's flattened fields tell it (used only when a golden hash comes without
    the self-test's own class): GPUs and ISA level from the report; threads from TensorFlow's runtime when
    set there, else from its env (unset: the CPUs the probe could use, as TensorFlow sizes its pools);
    oneDNN as TensorFlow itself reported it when the probe ran with TensorFlow imported, else from its env
    or TensorFlow's default rule. The ISA level lacks the oneDNN-relevant extensions the self-test appends
    on CPUs that have them."""
    gpus = []
    i = 0
    while "gpu.devices.%d.name" % i in flat:
        gpus.append((flat["gpu.devices.%d.name" % i], flat.get("gpu.devices.%d.compute_capability" % i, "")))
        i += 1
    arch = _reading(flat.get("os.arch"))
    isa = _reading(flat.get("cpu.isa_level")) or arch or "unknown"
    usable = _reading(flat.get("cpu.affinity_cpus"))
    onednn = _reading(flat.get("tensorflow.runtime.onednn")) or onednn_switch(flat.get("env.TF_ENABLE_ONEDNN_OPTS"))
    if onednn is None:
        flags = (_reading(flat.get("cpu.flags")) or "").split()
        onednn = onednn_default(_reading(flat.get("tensorflow.version")), flags, arch or "")
    pool = usable or "default"
    counts = []
    for kind, env in (("intra", "TF_NUM_INTRAOP_THREADS"), ("inter", "TF_NUM_INTEROP_THREADS")):
        # A count set through tf.config.threading in the probed process outranks the environment.
        live = thread_count(flat.get("tensorflow.runtime.%s_op_threads" % kind), "")
        counts.append(live or thread_count(flat.get("env." + env), pool))
    return device_class(gpus, isa, counts[0], counts[1], onednn)


def _reading(text: Optional[str]) -> Optional[str]:
    """A field's value, or None when the report recorded it as missing or failed."""
    if not text or text == "unavailable" or text.startswith("error:"):
        return None
    return text
