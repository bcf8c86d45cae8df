"""Flat field view of a report, the classification of every field, and the fingerprint.

A report's sections are flattened to dotted keys with string values (``cpu.isa_level`` ->
``x86-64-v4``, ``packages.distributions.numpy`` -> ``1.26.4``). Every key is classified by the first
matching rule of ``RULES``:

* breaking: can change numerical results (versions of TF/CUDA/cuDNN/cuBLAS/NCCL, GPU model and compute
  capability, driver major, CPU ISA level when computing on CPU, thread settings, oneDNN, determinism
  variables, XLA flags, package contents, the self-test's golden hash; NCCL settings wherever they are
  made, NCCL's topology files and plugins, the GPUs a process sees and their order, NVLink and the NVSwitch
  fabric, a TF_CONFIG cluster's shape);
* risk: may change results or speed (driver minor, kernel, container runtime, cgroup limits, CPU model, the
  bytes of an NCCL configuration file whose settings are the same);
* info: volatile or bookkeeping (hostname, UUIDs, PCI addresses, time, PIDs, paths of the interpreter,
  addresses and task indices that differ per job).

The fingerprint hashes exactly the breaking fields (``fingerprint_fields``), except TensorFlow runtime
settings, which only exist when the probed process had imported TensorFlow: hashing them would make one
environment hash differently depending on how it was probed. ``envpin diff`` still compares them.
"""

import fnmatch
import functools
import hashlib
import json
import math
import re
from typing import Any, Dict, List, Optional, Tuple

from envpin.portable import device

BREAKING = "breaking"
RISK = "risk"
INFO = "info"
SEVERITIES = (BREAKING, RISK, INFO)

# Top-level report keys that are sections of fields (everything else is metadata).
SECTIONS = (
    "host",
    "probe",
    "image",
    "os",
    "container",
    "cpu",
    "memory",
    "limits",
    "python",
    "packages",
    "tensorflow",
    "cuda",
    "gpu",
    "env",
    "distributed",
)


class Rule(object):
    """pattern (fnmatch on the dotted key), severity and the reason shown in diffs.

    cpu_only: breaking only when computing on CPU (a report without a GPU), risk otherwise.
    fingerprint: False keeps a breaking field out of the fingerprint (it is still diffed).
    absent: severity when only one of two reports has the key (default: the rule's severity).
    """

    def __init__(
        self,
        pattern: str,
        severity: str,
        reason: str,
        cpu_only: bool = False,
        fingerprint: bool = True,
        absent: Optional[str] = None,
    ) -> None:
        self.pattern = pattern
        self.severity = severity
        self.reason = reason
        self.cpu_only = cpu_only
        self.fingerprint = fingerprint
        self.absent = absent
        # The pattern's text before its first wildcard: a key that does not start with it cannot match, and
        # is not matched (nor the pattern compiled) at all.
        cut = min([i for i in (pattern.find("*"), pattern.find("?"), pattern.find("[")) if i >= 0] or [len(pattern)])
        self.literal = pattern[:cut]
        # What follows it: "" (the pattern is the key itself) and "*" (any key that starts with it) match
        # without compiling the pattern.
        self.tail = pattern[cut:]

    def matches(self, key: str) -> bool:
        """fnmatch's answer (case-sensitive) for `key`."""
        if not key.startswith(self.literal):
            return False
        if self.tail == "*":
            return True
        return key == self.literal if not self.tail else fnmatch.fnmatchcase(key, self.pattern)


#: NCCL variables that are not numerics settings, whether the environment sets them (env.*) or an NCCL
#: configuration file does (distributed.nccl.from_files.*): one table, so a setting is classified the same
#: wherever it was made. Every other NCCL_* variable is breaking.
NCCL_VARIABLE_RULES = (
    ("NCCL_DEBUG*", INFO, "logging only"),
    ("NCCL_COMM_ID", INFO, "where rank 0 listens (its address left out): differs per job"),
    ("NCCL_RAS_ADDR", INFO, "where NCCL's RAS service listens (its address left out)"),
    ("NCCL_SOCKET_MAGIC", INFO, "a per-job handshake value (withheld)"),
    ("NCCL_MNNVL_UUID", INFO, "names one multi-node NVLink domain, not its kind"),
    ("NCCL_CONF_FILE", INFO, "a path: the file's settings are compared as distributed.nccl.*"),
    ("NCCL_TOPO_FILE", INFO, "a path: the file's contents are compared as distributed.nccl.topo_file"),
    ("NCCL_GRAPH_FILE", INFO, "a path: the file's contents are compared as distributed.nccl.graph_file"),
    ("NCCL_TOPO_DUMP_FILE", INFO, "where NCCL writes the topology it detected"),
    ("NCCL_GRAPH_DUMP_FILE", INFO, "where NCCL writes the rings and trees it chose"),
    ("NCCL_*_PLUGIN", INFO, "which plugin: the library NCCL would load is compared as distributed.nccl.plugins.*"),
)


def _nccl_variable_rules(prefix: str) -> "List[Rule]":
    return [Rule(prefix + pattern, severity, reason) for pattern, severity, reason in NCCL_VARIABLE_RULES]


RULES = [
    Rule("host.*", INFO, "volatile: differs per machine and per run"),
    Rule("probe.*", INFO, "how the probe itself ran"),
    Rule("golden.*", BREAKING, "the self-test's golden training hash: the machines train differently"),
    Rule("image.ngc_version", BREAKING, "NGC release: the TensorFlow/CUDA/cuDNN stack of the image"),
    Rule("image.build_id", RISK, "another NGC build of the image"),
    Rule("image.*", INFO, "envpin labels and lock bookkeeping"),
    Rule("os.arch", BREAKING, "CPU architecture"),
    Rule("os.glibc", BREAKING, "C library: libm computes the transcendental functions used on CPU"),
    Rule("os.kernel*", RISK, "kernel"),
    Rule("os.release*", RISK, "OS release"),
    Rule("os.*", INFO, "machine description"),
    Rule("container.runtime", RISK, "container runtime"),
    Rule("container.in_container", RISK, "container runtime"),
    Rule("container.gpu_runtime", RISK, "container runtime"),
    Rule(
        "container.image",
        INFO,
        "the image file the runtime started: a host path (its contents are compared field by field)",
    ),
    Rule("container.*", INFO, "container identity"),
    Rule("cpu.isa_level", BREAKING, "CPU ISA level: oneDNN/Eigen/MKL dispatch on CPU", cpu_only=True),
    Rule("cpu.simd_flags", BREAKING, "SIMD extensions: kernel dispatch on CPU", cpu_only=True),
    Rule("cpu.affinity_cpus", BREAKING, "usable CPUs: default thread pools split reductions", cpu_only=True),
    Rule("cpu.affinity", INFO, "which CPU ids (their number is compared as cpu.affinity_cpus)"),
    Rule("cpu.*", RISK, "CPU model and features"),
    Rule("memory.*", INFO, "memory size"),
    Rule("limits.*.file", INFO, "which cgroup file was read (its path names the container)"),
    Rule("limits.*", RISK, "cgroup limits: speed, out-of-memory"),
    Rule("python.executable", INFO, "interpreter path"),
    Rule("python.prefix", INFO, "interpreter path"),
    Rule("python.base_prefix", INFO, "interpreter path"),
    Rule("python.flags*", INFO, "interpreter flags of the probe run"),
    Rule("python.build", RISK, "interpreter build"),
    Rule("python.compiler", RISK, "interpreter build"),
    Rule("python.*", BREAKING, "Python version, ABI or hash randomization"),
    Rule("packages.paths", INFO, "where packages were found"),
    Rule("packages.count", INFO, "number of distributions (each one is compared)"),
    Rule("packages.shadowed*", RISK, "a distribution installed twice on sys.path"),
    Rule("packages.record_check*", INFO, "what the RECORD check covered (its findings are packages.changed, .missing)"),
    Rule(
        "packages.changed",
        BREAKING,
        "installed files whose content no longer matches their distribution's RECORD: edited after install",
    ),
    Rule("packages.missing", BREAKING, "installed files their distribution's RECORD lists that are gone"),
    Rule(
        "packages.startup_hooks",
        BREAKING,
        "code every interpreter runs at start-up without an import: sitecustomize, usercustomize, .pth import lines",
        absent=INFO,
    ),
    Rule("packages.*", BREAKING, "package contents"),
    Rule("tensorflow.location", INFO, "where TensorFlow is installed"),
    Rule("tensorflow.runtime", INFO, "runtime settings are only read when TensorFlow is imported"),
    Rule(
        "tensorflow.runtime.keras_precision_policy",
        BREAKING,
        "Keras global dtype policy: mixed_float16 or mixed_bfloat16 compute in half precision",
        fingerprint=False,
        absent=INFO,
    ),
    Rule(
        "tensorflow.runtime.tf32",
        BREAKING,
        "TensorFloat-32 math for float32 matmuls and convolutions on Ampere and later GPUs (on by default)",
        fingerprint=False,
        absent=INFO,
    ),
    Rule(
        "tensorflow.runtime.*",
        BREAKING,
        "TensorFlow runtime setting (threads, op determinism, build)",
        fingerprint=False,
        absent=INFO,
    ),
    Rule("tensorflow.*", BREAKING, "TensorFlow version or build"),
    Rule("cuda.*.path", RISK, "library loaded from another file"),
    Rule("cuda.*.loaded_by", INFO, "who loaded the library"),
    Rule("cuda.*.requested", INFO, "name the library was asked for"),
    Rule("cuda.*.raw", INFO, "raw version number (compared as .version)"),
    Rule("cuda.loaded_libraries*", RISK, "mapped shared libraries"),
    Rule("cuda.*", BREAKING, "CUDA/cuDNN/cuBLAS/NCCL version"),
    Rule("gpu.driver_major", BREAKING, "NVIDIA driver major version"),
    Rule("gpu.cuda_driver_version", BREAKING, "CUDA version of the driver"),
    Rule("gpu.count", BREAKING, "number of GPUs"),
    Rule("gpu.devices.*.name", BREAKING, "GPU model"),
    Rule("gpu.devices.*.compute_capability", BREAKING, "GPU compute capability"),
    Rule("gpu.devices.*.uuid", INFO, "GPU identity"),
    Rule("gpu.devices.*.pci_bus_id", INFO, "GPU slot"),
    Rule("gpu.devices.*.persistence_mode", INFO, "driver persistence"),
    Rule(
        "gpu.devices.*.nvlink_active_links",
        BREAKING,
        "active NVLink links: the paths NCCL builds rings and trees on, and TensorFlow's ring order",
    ),
    Rule(
        "gpu.devices.*.fabric.state",
        BREAKING,
        "NVSwitch fabric: NCCL can reduce through NVLink SHARP (NVLS), not deterministic between calls "
        "(NVIDIA/nccl#1497)",
    ),
    Rule("gpu.devices.*.fabric.health", RISK, "NVLink fabric health: bandwidth"),
    Rule("gpu.devices.*.fabric.*", INFO, "NVLink fabric registration (clique, status)"),
    Rule("gpu.devices.*.mig_devices", BREAKING, "MIG instances: CUDA sees these slices, not the whole GPU"),
    Rule("gpu.backend", INFO, "how the GPUs were read"),
    Rule("gpu.fallback_reason", INFO, "how the GPUs were read"),
    Rule("gpu.driver_version", RISK, "NVIDIA driver minor version (major is compared as gpu.driver_major)"),
    Rule("gpu.*", RISK, "GPU configuration (memory, ECC, MIG, clocks, power)"),
    Rule("env.TF_CPP_*", INFO, "logging only"),
    Rule(
        "env.TF_CONFIG",
        INFO,
        "the cluster's host names (withheld): its shape, task and RPC layer are compared as distributed.tf_config.*",
    ),
    Rule(
        "env.CUDA_VISIBLE_DEVICES",
        INFO,
        "which GPUs, by index or UUID: compared as distributed.gpus.* by place and device class (a UUID names "
        "one card, not its kind)",
    ),
    *_nccl_variable_rules("env."),
    Rule("env.HOROVOD_LOG_LEVEL", INFO, "logging only"),
    Rule("env.CUDA_CACHE_*", INFO, "JIT cache location"),
    Rule("env.ENVPIN_*", INFO, "envpin bookkeeping"),
    Rule("env.NVIDIA_TF32_OVERRIDE", BREAKING, "TF32 math on Ampere and later"),
    Rule("env.NVIDIA_TENSORFLOW_VERSION", BREAKING, "NGC release"),
    Rule("env.NVIDIA_REQUIRE_*", INFO, "container runtime requirement"),
    Rule("env.NVIDIA_PRODUCT_NAME", INFO, "image name"),
    Rule(
        "env.NVIDIA_VISIBLE_DEVICES",
        INFO,
        "which GPUs the container runtime exposes (a device plugin names them by UUID; their number and "
        "models are compared under gpu.*)",
    ),
    Rule("env.NVIDIA_*", RISK, "NGC image or container runtime setting"),
    Rule("env.PYTHONHASHSEED", BREAKING, "hash seed: set and dict iteration order"),
    Rule("env.PYTHON*", RISK, "interpreter setting"),
    Rule("env.LD_PRELOAD", BREAKING, "preloaded libraries replace symbols"),
    Rule("env.LD_LIBRARY_PATH", RISK, "library search path (loaded versions are compared under cuda.*)"),
    Rule("env.*_NUM_THREADS", BREAKING, "thread settings: how reductions are split"),
    Rule("env.TF_NUM_*", BREAKING, "thread settings: how reductions are split"),
    Rule("env.OMP_*", BREAKING, "OpenMP threading"),
    Rule("env.KMP_*", BREAKING, "OpenMP threading"),
    Rule("env.GOMP_*", BREAKING, "OpenMP threading"),
    Rule("env.TF_ENABLE_ONEDNN_OPTS", BREAKING, "oneDNN on/off: other CPU kernels and fusions"),
    Rule("env.TF_ENABLE_MKL_NATIVE_FORMAT", BREAKING, "oneDNN setting"),
    Rule("env.ONEDNN_*", BREAKING, "oneDNN setting"),
    Rule("env.DNNL_*", BREAKING, "oneDNN setting"),
    Rule("env.MKLDNN_*", BREAKING, "oneDNN setting"),
    Rule("env.MKL_*", BREAKING, "MKL setting (threads, conditional numerical reproducibility)"),
    Rule("env.TF_DETERMINISTIC_OPS", BREAKING, "determinism switch"),
    Rule("env.TF_CUDNN_*", BREAKING, "determinism / cuDNN algorithm selection"),
    Rule("env.TF_USE_CUDNN_*", BREAKING, "determinism / cuDNN algorithm selection"),
    Rule("env.TF_DISABLE_*", BREAKING, "determinism exception switch"),
    Rule("env.XLA_FLAGS", BREAKING, "XLA flags"),
    Rule("env.TF_XLA_FLAGS", BREAKING, "XLA flags"),
    Rule("env.NCCL_*", BREAKING, "collective communication setting"),
    Rule("env.HOROVOD_*", BREAKING, "collective communication setting"),
    Rule("env.*", BREAKING, "TensorFlow, CUDA library or numerics setting"),
    Rule("distributed.nccl.rules", INFO, "which NCCL release's rules the files and plugins were read by"),
    Rule(
        "distributed.nccl.conf.*.sha256",
        RISK,
        "the configuration file's bytes: a comment or a line the environment overrides changes only this "
        "(what NCCL takes from it is compared as distributed.nccl.from_files.*)",
    ),
    Rule("distributed.nccl.conf.*.*", INFO, "the configuration file's own lines (compared as they take effect)"),
    Rule("distributed.nccl.conf.*", RISK, "an NCCL configuration file that could not be read"),
    *_nccl_variable_rules("distributed.nccl.from_files."),
    Rule(
        "distributed.nccl.from_files.*",
        BREAKING,
        "set by an NCCL configuration file: NCCL uses it as if the environment had it",
    ),
    Rule(
        "distributed.nccl.effective.*",
        INFO,
        "NCCL's view of each variable and where it comes from (compared as env.* or distributed.nccl.from_files.*)",
    ),
    Rule(
        "distributed.nccl.topo_file*.sha256",
        BREAKING,
        "the topology NCCL reads instead of detecting it: it decides rings, trees and channels",
    ),
    Rule(
        "distributed.nccl.graph_file*.sha256",
        BREAKING,
        "the rings and trees NCCL loads instead of searching for them",
    ),
    Rule("distributed.nccl.topo_file.*", INFO, "how the topology file was found"),
    Rule("distributed.nccl.graph_file.*", INFO, "how the graph file was found"),
    Rule("distributed.nccl.plugins.*.found_by", INFO, "where the dynamic loader finds the plugin"),
    Rule(
        "distributed.nccl.*",
        BREAKING,
        "an NCCL input: a plugin library (network, algorithm and protocol choices), a topology or graph file",
    ),
    Rule(
        "distributed.gpus.*",
        BREAKING,
        "the GPUs the process sees, in order: the rank-to-GPU mapping decides the reduction order (NVIDIA/nccl#23)",
    ),
    Rule("distributed.tf_config.cluster*", BREAKING, "the cluster's shape: its jobs and how many tasks each has"),
    Rule("distributed.tf_config.task_index", INFO, "this task's index: the workers of one job differ only in it"),
    Rule("distributed.tf_config.task_type", RISK, "this task's role (chief, worker, evaluator, ps)"),
    Rule("distributed.tf_config", BREAKING, "a TF_CONFIG TensorFlow cannot read as a cluster"),
    Rule("distributed.tf_config.*", RISK, "how the tasks talk (rpc_layer) and where the cluster runs (environment)"),
    Rule(
        "distributed.horovod.*",
        INFO,
        "Horovod and its settings in effect: a variable that is set is compared as env.HOROVOD_*, a default "
        "as the Horovod version (packages.distributions.horovod)",
    ),
    Rule("distributed.*", RISK, "a part of the distributed stack that could not be read"),
]

DEFAULT_RULE = Rule("*", RISK, "unclassified field")


# Reports repeat the same keys (a fleet of reports: thousands of times each), and the first-match scan costs
# about a hundred fnmatch calls per key; bounded, because keys come from reports.
@functools.lru_cache(maxsize=65536)
def rule_for(key: str) -> Rule:
    for rule in RULES:
        if rule.matches(key):
            return rule
    return DEFAULT_RULE


def _scalar(v: Any) -> str:
    if isinstance(v, str):
        return v
    if v is None:
        return "null"
    # What json.dumps gives, without its cost for the common types (a report holds hundreds of numbers).
    kind = type(v)
    if kind is bool:
        return "true" if v else "false"
    if kind is int:
        return str(v)
    if kind is float and math.isfinite(v):
        return repr(v)
    return json.dumps(v, sort_keys=True)


def flatten_value(prefix: str, v: Any, out: Dict[str, str]) -> None:
    """Add one field's value to `out` as dotted keys under `prefix` with string values (what the
    fingerprint, diff and the Markdown report all read)."""
    if isinstance(v, dict):
        if not v:
            out[prefix] = "{}"
        for k in sorted(v):
            x = v[k]
            # Most leaves are strings (package versions, settings): stored without another call.
            if type(x) is str:
                out["%s.%s" % (prefix, k)] = x
            else:
                flatten_value("%s.%s" % (prefix, k), x, out)
    elif isinstance(v, list) and any(isinstance(x, (dict, list)) for x in v):
        for i, x in enumerate(v):
            flatten_value("%s.%d" % (prefix, i), x, out)
    elif isinstance(v, list):
        out[prefix] = json.dumps(v, separators=(",", ":"), ensure_ascii=False)
    else:
        out[prefix] = _scalar(v)


def field_text(field: Any) -> Optional[str]:
    """The comparable text of a field that is not a plain value (None for a value)."""
    if not isinstance(field, dict):
        return "error: malformed field"
    if "value" in field:
        return None
    if field.get("redacted"):
        return "<redacted>"
    if "error" in field:
        return "error: %s" % field["error"]
    if "unavailable" in field:
        return "unavailable"
    return "error: malformed field"


def flatten_field(key: str, field: Any, out: Dict[str, str]) -> None:
    """Add one field of a section (a dict with its value, or an error, redaction or unavailability) to
    `out` under its dotted `key` ('cpu.isa_level')."""
    if type(field) is dict and "value" in field:
        v = field["value"]
        if type(v) is str:
            out[key] = v
        else:
            flatten_value(key, v, out)
    else:
        text = field_text(field)
        out[key] = "error: malformed field" if text is None else text


def flatten(report: Dict[str, Any]) -> Dict[str, str]:
    """Every field of every section as dotted key -> string, plus golden.<device class>."""
    out: Dict[str, str] = {}
    for section in SECTIONS:
        fields = report.get(section)
        if not isinstance(fields, dict):
            continue
        for name in sorted(fields):
            flatten_field("%s.%s" % (section, name), fields[name], out)
    # `out` holds the sections' fields, all a device class taken from the fields reads.
    for key, digest in golden_fields(report, out):
        out[key] = digest
    return out


def gpu_present(flat: Dict[str, str]) -> bool:
    count = flat.get("gpu.count", "")
    return count.isdigit() and int(count) > 0


def device_class(report: Dict[str, Any], flat: Optional[Dict[str, str]] = None) -> str:
    """The class of device the golden hash belongs to: the self-test's own class if it gives one (it knows
    what TensorFlow used), else the same rule (envpin.portable.device) applied to the report's fields."""
    selftest = report.get("selftest")
    golden = selftest.get("golden") if isinstance(selftest, dict) else None
    chosen = golden.get("device_class") if isinstance(golden, dict) else None
    if isinstance(chosen, str) and chosen:
        return chosen
    return device.from_flat(flat if flat is not None else _flat_sections(report))


def _flat_sections(report: Dict[str, Any]) -> Dict[str, str]:
    stripped = dict(report)
    stripped.pop("selftest", None)
    return flatten(stripped)


#: How the multi-replica self-test's hashes extend a device class: a per-replica hash compares only at one
#: replica count (MirroredStrategy) or worker count (MWMS), so the count is part of its class.
_COUNTED = re.compile(r";(?:replicas|workers)=\d+$")


def counted_class(device_class_: str, what: str, count: int) -> str:
    """'cpu:...;onednn=off;replicas=2': the class of a per-replica hash (`what`: replicas or workers)."""
    return "%s;%s=%d" % (device_class_, what, count)


def base_class(device_class_: str) -> str:
    """The device class without the replica or worker count :func:`counted_class` added."""
    return _COUNTED.sub("", device_class_)


def _replica_golden(part: Any, what: str, fallback: str) -> Optional[Tuple[str, str]]:
    """(key, hash) of one multi-replica set-up: its first run's per-replica hashes, when they all agree."""
    if not isinstance(part, dict):
        return None
    runs = part.get("replica_hashes")
    first = runs[0] if isinstance(runs, list) and runs and isinstance(runs[0], dict) else None
    if not first:
        return None
    hashes = set(first.values())
    if len(hashes) != 1:
        return None  # replicas that disagree have no golden hash: the verdict says why
    digest = hashes.pop()
    if not isinstance(digest, str) or not digest:
        return None
    chosen = part.get("device_class")
    cls = chosen if isinstance(chosen, str) and chosen else fallback
    return "golden.%s" % counted_class(cls, what, len(first)), digest


def golden_fields(report: Dict[str, Any], flat: Optional[Dict[str, str]] = None) -> List[Tuple[str, str]]:
    """Every golden hash of a report's self-test as (key, hash), keys 'golden.<device class>': the golden
    training hash, then one per multi-replica set-up (MirroredStrategy, MWMS) whose replicas agree, its class
    counted (:func:`counted_class`). `flat`: the report's sections flattened, when the caller has them (a
    class the self-test does not give is read from them)."""
    selftest = report.get("selftest")
    if not isinstance(selftest, dict):
        return []
    out = []
    golden = selftest.get("golden")
    cls = device_class(report, flat)
    if isinstance(golden, dict) and isinstance(golden.get("hash"), str) and golden["hash"]:
        out.append(("golden.%s" % cls, golden["hash"]))
    multi = selftest.get("replicas")
    if isinstance(multi, dict):
        for part, what in (("mirrored", "replicas"), ("multi_worker", "workers")):
            found = _replica_golden(multi.get(part), what, cls)
            if found is not None:
                out.append(found)
    return out


def severity(key: str, cpu_compute: bool, absent: bool = False) -> Tuple[str, str]:
    """(severity, reason) of a difference in ``key``.

    cpu_compute: at least one side computes on CPU (has no GPU), so CPU features are breaking.
    absent: the key exists in only one of the two sides."""
    rule = rule_for(key)
    sev = rule.severity
    if rule.cpu_only and not cpu_compute:
        sev = RISK
    if absent and rule.absent is not None:
        sev = rule.absent
    return sev, rule.reason


def fingerprint_fields(report: Dict[str, Any], flat: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    """The result-affecting fields: every breaking field of the report (CPU features only when the
    report has no GPU), never volatile ones, never TensorFlow runtime settings. `flat`: flatten(report),
    when the caller has it already."""
    if flat is None:
        flat = flatten(report)
    cpu_compute = not gpu_present(flat)
    return {key: flat[key] for key in sorted(flat) if fingerprinted(key, cpu_compute)}


def fingerprinted(key: str, cpu_compute: bool) -> bool:
    """Whether the field `key` is one fingerprint_fields takes, for a report that computes on its CPU (has
    no GPU) or not."""
    taken = _fingerprinted(key)
    return bool(taken or (taken is False and cpu_compute))


@functools.lru_cache(maxsize=65536)
def _fingerprinted(key: str) -> Optional[bool]:
    """Whether `key` is a fingerprint field: True always, False only when computing on CPU, None never."""
    rule = rule_for(key)
    if rule.severity != BREAKING or not rule.fingerprint:
        return None
    return not rule.cpu_only


def fingerprint_of_fields(fields: Dict[str, str]) -> str:
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # surrogatepass: a report read from JSON may carry lone surrogates (\udcxx); valid text hashes as before.
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def fingerprint(report: Dict[str, Any]) -> str:
    """sha256 over the canonical JSON of fingerprint_fields(report)."""
    return fingerprint_of_fields(fingerprint_fields(report))


def documented_fields(report: Dict[str, Any]) -> List[Tuple[str, str, str]]:
    """(key, severity, reason) for every field of a report: used by the Markdown rendering."""
    flat = flatten(report)
    cpu_compute = not gpu_present(flat)
    return [(k, *severity(k, cpu_compute)) for k in sorted(flat)]


def rules_table() -> str:
    """The classification rules as a Markdown table (docs/probe.md embeds it; a test keeps them equal)."""
    lines = [
        "| field (first match wins) | class | in fingerprint | why |",
        "| --- | --- | --- | --- |",
    ]
    for rule in [*RULES, DEFAULT_RULE]:
        if rule.severity != BREAKING:
            fp = "no"
        elif not rule.fingerprint:
            fp = "no (diffed only)"
        elif rule.cpu_only:
            fp = "when the report has no GPU"
        else:
            fp = "yes"
        sev = rule.severity + (" (risk with a GPU)" if rule.cpu_only else "")
        lines.append("| `%s` | %s | %s | %s |" % (rule.pattern, sev, fp, rule.reason))
    return "\n".join(lines) + "\n"
