"""Environment variables that can change a result, and the image identity NGC and envpin leave behind.

Only names with a determinism-relevant prefix are recorded (see ``RELEVANT_PREFIXES``); the rest of the
environment (HOME, PATH, cloud credentials...) never enters a report. A recorded name that looks like a
credential, or whose value does, is stored as ``{"present": true, "redacted": true}``.
"""

import hashlib
import os
import re
from typing import Any, Dict, List

from envpin.probe import secrets
from envpin.probe._common import Context, Unavailable, capture, read_file

# TensorFlow, XLA, the CUDA stack, collectives, BLAS/OpenMP threading, NGC image variables, Python.
RELEVANT_PREFIXES = (
    "TF_",
    "TENSORFLOW_",
    "XLA_",
    "CUDA_",
    "CUBLAS_",
    "CUBLASLT_",
    "CUDNN_",
    "NCCL_",
    "HOROVOD_",
    "NVIDIA_",
    "TRT_",
    "TENSORRT_",
    "OMP_",
    "KMP_",
    "GOMP_",
    "MKL_",
    "MKLDNN_",
    "DNNL_",
    "ONEDNN_",
    "OPENBLAS_",
    "GOTO",
    "BLIS_",
    "NUMEXPR_",
    "VECLIB_",
    "PYTHON",
    "ENVPIN_",
)
RELEVANT_NAMES = ("LD_LIBRARY_PATH", "LD_PRELOAD", "CUDA_HOME", "CUDNN_PATH")
# Terraform shares the TF_ prefix; its variables say nothing about TensorFlow.
TERRAFORM_PREFIXES = (
    "TF_CLI_",
    "TF_VAR_",
    "TF_LOG",
    "TF_IN_AUTOMATION",
    "TF_INPUT",
    "TF_DATA_DIR",
    "TF_WORKSPACE",
    "TF_PLUGIN_CACHE",
    "TF_REGISTRY_",
    "TF_TOKEN_",
    "TF_APPEND_USER_AGENT",
    "TF_IGNORE",
    "TF_STATE_PERSIST_INTERVAL",
)

# Where a generated envpin image keeps its lock (the Dockerfile copies it next to the probe).
LOCK_CANDIDATES = ("/opt/envpin/envpin.lock", "/envpin.lock")
LABEL_FILES = ("/opt/envpin/labels.json",)


def relevant(name: str) -> bool:
    if name.startswith(TERRAFORM_PREFIXES):
        return False
    return name in RELEVANT_NAMES or name.startswith(RELEVANT_PREFIXES)


#: Variables whose value names a host and a port (NCCL's bootstrap root, its RAS listener): the address is
#: replaced by ADDRESS and the port kept. A report never holds IP addresses or other machines' names (the
#: probe's own host name is the one it records, and --anonymize replaces it); these differ per job, not per
#: environment, so they are classified info (envpin.probe.fields).
ADDRESS_VARIABLES = ("NCCL_COMM_ID", "NCCL_RAS_ADDR")
ADDRESS = "<address>"
#: Values kept out of reports whole, with why: a per-job handshake value (the NCCL docs suggest deriving it
#: from SLURM_JOB_ID), and TensorFlow's cluster description, whose host names the distributed section leaves
#: out while it records the cluster's shape.
WITHHELD = {
    "NCCL_SOCKET_MAGIC": "a per-job handshake value",
    "TF_CONFIG": "holds the cluster's host names; its shape is recorded as distributed.tf_config",
}


def address_redacted(raw: str) -> str:
    """``host:port`` (a name, an IPv4 address or ``[IPv6]``) as ``<address>:port``; without a port (or with
    something else after the last ':'), ``<address>``."""
    text = raw.strip()
    head, sep, port = text.rpartition(":")
    bracketed = head.startswith("[") and head.endswith("]")
    # a bare IPv6 address (a:b::c) has no port to keep
    if sep and port.isdigit() and head and (bracketed or (":" not in head and not head.startswith("["))):
        return "%s:%s" % (ADDRESS, port)
    return ADDRESS


def env_field(name: str, raw: str) -> Dict[str, Any]:
    """One environment variable as a field: redacted when it looks like a credential or is withheld,
    an address's host replaced (ADDRESS_VARIABLES). NCCL's configuration files give their lines the same
    treatment (envpin.probe.distributed), so a setting reads the same wherever it was made."""
    source = "environ:" + name
    if name in WITHHELD:
        return {"present": True, "redacted": True, "reason": WITHHELD[name], "source": source}
    if secrets.secret_name(name):
        return {"present": True, "redacted": True, "reason": "name looks like a credential", "source": source}
    why = secrets.secret_value(raw)
    if why:
        return {"present": True, "redacted": True, "reason": why, "source": source}
    if name in ADDRESS_VARIABLES:
        return {"value": address_redacted(raw), "source": source + " (address left out)"}
    return {"value": raw, "source": source}


def collect_env(ctx: Context) -> Dict[str, Any]:
    section = {}
    for name in sorted(ctx.environ):
        if relevant(name):
            section[name] = env_field(name, ctx.environ[name])
    return section


def _env_value(ctx: Context, name: str) -> str:
    if name not in ctx.environ:
        raise Unavailable("%s is not set" % name)
    field = env_field(name, ctx.environ[name])
    if "value" not in field:
        raise Unavailable("%s is set but redacted" % name)
    return str(field["value"])


def _lock_file(ctx: Context) -> Dict[str, Any]:
    candidates: List[str] = []
    if ctx.environ.get("ENVPIN_LOCK"):
        candidates.append(ctx.environ["ENVPIN_LOCK"])
    candidates.extend(LOCK_CANDIDATES)
    for path in candidates:
        real = ctx.path(path)
        if os.path.isfile(real):
            data = read_file(real, whole=True)
            text = data.decode("utf-8", "replace")
            info: Dict[str, Any] = {"path": path, "sha256": "sha256:" + hashlib.sha256(data).hexdigest()}
            # A light read of the TOML (no tomllib on 3.6): the lock's expected fingerprint, if any.
            expected = re.search(r'(?ms)^\[expected\]\s*$.*?^fingerprint\s*=\s*"(sha256:[0-9a-f]+)"', text)
            if expected:
                info["expected_fingerprint"] = expected.group(1)
            return info
    raise Unavailable("no envpin lock in the image (looked at %s)" % ", ".join(candidates))


PLAN_CANDIDATES = ("/opt/envpin/plan.json",)
# The probe's own settings, not labels of the image.
PROBE_KNOBS = ("ENVPIN_PROBE_ROOT", "ENVPIN_NVML_LIBRARY")


def _plan_file(ctx: Context) -> Dict[str, Any]:
    """The build plan the generated Dockerfile copies in (ENVPIN_PLAN): what the image was meant to be."""
    import json

    candidates = [ctx.environ["ENVPIN_PLAN"]] if ctx.environ.get("ENVPIN_PLAN") else []
    candidates.extend(p for p in PLAN_CANDIDATES if p not in candidates)
    for path in candidates:
        real = ctx.path(path)
        if os.path.isfile(real):
            data = read_file(real, whole=True)
            plan = json.loads(data.decode("utf-8"))
            info: Dict[str, Any] = {"path": path, "sha256": "sha256:" + hashlib.sha256(data).hexdigest()}
            for key in ("name", "tag", "release", "tf_version", "envpin_version", "base_digest"):
                if isinstance(plan.get(key), str):
                    info[key] = plan[key]
            recipe = plan.get("recipe")
            if isinstance(recipe, dict):
                info["recipe"] = "%s %s" % (recipe.get("id", "?"), recipe.get("hash", ""))
            return info
    raise Unavailable("no envpin plan in the image (looked at %s)" % ", ".join(candidates))


def _labels(ctx: Context) -> Dict[str, Any]:
    import json

    out: Dict[str, Any] = {}
    for name in sorted(ctx.environ):
        if name.startswith("ENVPIN_") and name not in PROBE_KNOBS:
            field = env_field(name, ctx.environ[name])
            out[name] = field.get("value", secrets.REDACTED)
    for path in LABEL_FILES:
        real = ctx.path(path)
        if os.path.isfile(real):
            data = json.loads(read_file(real, whole=True).decode("utf-8"))
            if isinstance(data, dict):
                for key in sorted(data):
                    out[str(key)] = secrets.scrub(data[key])
    if not out:
        raise Unavailable("no ENVPIN_* variables and no %s" % ", ".join(LABEL_FILES))
    return out


def collect_image(ctx: Context) -> Dict[str, Any]:
    """Which image this is: the NGC release and build id, and what envpin baked into it."""
    return {
        "ngc_version": capture("environ:NVIDIA_TENSORFLOW_VERSION", _env_value, ctx, "NVIDIA_TENSORFLOW_VERSION"),
        "build_id": capture("environ:NVIDIA_BUILD_ID", _env_value, ctx, "NVIDIA_BUILD_ID"),
        "envpin_labels": capture("environ:ENVPIN_* + " + ",".join(LABEL_FILES), _labels, ctx),
        "envpin_lock": capture("file:" + ",".join(LOCK_CANDIDATES), _lock_file, ctx),
        "envpin_plan": capture("file:$ENVPIN_PLAN," + ",".join(PLAN_CANDIDATES), _plan_file, ctx),
    }
