"""TensorFlow: version and build info read from files on disk, runtime settings only when TF is loaded.

Importing TensorFlow takes seconds, so the default probe never does. ``build_info.py`` is parsed with
``ast`` instead of imported; it comes in three shapes across TF releases:

* TF <= 2.1:  ``cuda_version_number = '10.0'`` module-level assignments;
* TF 2.2:     ``build_info = {'cuda_version': '10.1', ...}``;
* TF >= 2.3:  ``build_info = collections.OrderedDict([('cuda_version', '11.0'), ...])``.
"""

import ast
import os
import sys
from typing import Any, Dict, Optional

from envpin.probe import pyenv
from envpin.probe._common import Context, Unavailable, capture, read_file, unavailable, value

TF_DISTRIBUTIONS = (
    "tensorflow",
    "tensorflow-gpu",
    "tensorflow-cpu",
    "nvidia-tensorflow",
    "intel-tensorflow",
    "tensorflow-intel",
    "tensorflow-rocm",
    "tensorflow-aarch64",
    "tensorflow-macos",
    "tf-nightly",
    "tf-nightly-gpu",
    "tf-nightly-cpu",
)

# Old build_info names -> the names TF >= 2.2 uses, so reports from old and new images compare.
_RENAMES = {"cuda_version_number": "cuda_version", "cudnn_version_number": "cudnn_version"}
_KEEP = (
    "cuda_version",
    "cudnn_version",
    "cuda_compute_capabilities",
    "is_cuda_build",
    "is_rocm_build",
    "is_tensorrt_build",
    "tensorrt_version",
    "nccl_version",
    "cpu_compiler",
)


def parse_build_info(source: str) -> Dict[str, Any]:
    """Literal values of TF's generated build_info.py, without executing it."""
    tree = ast.parse(source)
    found: Dict[str, Any] = {}
    for node in tree.body:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        if isinstance(target, ast.Name):
            if target.id == "build_info":
                found.update(_dict_literal(node.value))
                continue
            try:
                found[_RENAMES.get(target.id, target.id)] = ast.literal_eval(node.value)
            except ValueError:
                continue
        elif isinstance(target, ast.Subscript) and getattr(target.value, "id", None) == "build_info":
            key = _subscript_key(target)
            if key is not None:
                try:
                    found[key] = ast.literal_eval(node.value)
                except ValueError:
                    continue
    out = {k: found[k] for k in _KEEP if k in found}
    if not out:
        raise ValueError("no build facts (cuda_version, is_cuda_build...) in build_info.py")
    return out


def _subscript_key(node: ast.Subscript) -> Optional[str]:
    sl = node.slice
    if type(sl).__name__ == "Index":  # Python < 3.9 wraps the key in ast.Index
        sl = sl.value  # type: ignore
    try:
        key = ast.literal_eval(sl)
    except ValueError:
        return None
    return key if isinstance(key, str) else None


def _dict_literal(node: ast.AST) -> Dict[str, Any]:
    if isinstance(node, ast.Call) and node.args:  # collections.OrderedDict([...]) or dict([...])
        node = node.args[0]
    try:
        data = ast.literal_eval(node)
    except ValueError:
        return {}
    if isinstance(data, dict):
        return data
    if isinstance(data, (list, tuple)):
        return {k: v for k, v in data if isinstance(k, str)}
    return {}


def _tf_distribution(ctx: Context) -> Dict[str, str]:
    dists = {d["name"]: d for d in pyenv.distributions(ctx)[0]}
    for name in TF_DISTRIBUTIONS:
        if name in dists:
            return {"name": name, "version": dists[name]["version"]}
    raise Unavailable("no TensorFlow distribution installed (looked for %s)" % ", ".join(TF_DISTRIBUTIONS[:4]))


def _package_dir() -> str:
    for entry in pyenv.search_paths():
        candidate = os.path.join(entry, "tensorflow")
        if os.path.isfile(os.path.join(candidate, "__init__.py")):
            return candidate
    raise Unavailable("no tensorflow package on sys.path")


def _build_info(ctx: Context) -> Dict[str, Any]:
    path = os.path.join(_package_dir(), "python", "platform", "build_info.py")
    if not os.path.isfile(path):
        raise Unavailable("no tensorflow/python/platform/build_info.py")
    return parse_build_info(read_file(path).decode("utf-8", "replace"))


def _runtime(ctx: Context) -> Dict[str, Any]:
    """Settings that exist only in a process that imported TensorFlow (intra/inter-op threads, op
    determinism as switched on by the API, the exact git build)."""
    if "tensorflow" not in sys.modules and not ctx.with_tf:
        raise Unavailable(
            "TensorFlow is not imported in this process: the probe reads these only when asked to import it"
        )
    import tensorflow as tf

    out: Dict[str, Any] = {"version": getattr(tf, "__version__", "unknown")}
    version_mod = getattr(tf, "version", None)
    if version_mod is not None:
        out["git_version"] = getattr(version_mod, "GIT_VERSION", "unknown")
        out["compiler_version"] = getattr(version_mod, "COMPILER_VERSION", "unknown")
    config = getattr(tf, "config", None)
    threading = getattr(config, "threading", None)
    if threading is not None:
        out["intra_op_threads"] = threading.get_intra_op_parallelism_threads()
        out["inter_op_threads"] = threading.get_inter_op_parallelism_threads()
    out["op_determinism"] = _op_determinism(tf)
    tf32 = getattr(getattr(config, "experimental", None), "tensor_float_32_execution_enabled", None)
    if tf32 is not None:  # TF 2.4 and later: on by default, used on Ampere and later GPUs only
        out["tf32"] = "on" if tf32() else "off"
    policy = _keras_policy()
    if policy is not None:
        out["keras_precision_policy"] = policy
    onednn = onednn_enabled()
    if onednn is not None:
        out["onednn"] = "on" if onednn else "off"
    sysconfig = getattr(tf, "sysconfig", None)
    if sysconfig is not None and hasattr(sysconfig, "get_build_info"):
        info = dict(sysconfig.get_build_info())
        out["build_info"] = {k: info[k] for k in sorted(info) if k in _KEEP}
    return out


def _keras_policy() -> Optional[str]:
    """The Keras global dtype policy (float32, or mixed_float16/mixed_bfloat16: layers compute in half precision)
    when the process has imported Keras (a tracked run's process, where the script may have set it); None
    otherwise: importing Keras only to read its default would cost seconds and say nothing."""
    for name in ("keras", "tf_keras"):
        module = sys.modules.get(name)
        mixed = getattr(module, "mixed_precision", None)
        if mixed is not None and hasattr(mixed, "global_policy"):
            try:
                return str(mixed.global_policy().name)
            except Exception:  # a Keras half imported, or one whose policy API differs: not read
                return None
    return None


def onednn_enabled() -> Optional[bool]:
    """Whether TensorFlow runs oneDNN's custom CPU ops in this process (its own IsMklEnabled(), which
    applies TF_ENABLE_ONEDNN_OPTS and the CPU-feature default); None where this TensorFlow lacks it."""
    try:
        from tensorflow.python.util import _pywrap_util_port

        return bool(_pywrap_util_port.IsMklEnabled())
    except (ImportError, AttributeError):
        return None


def _op_determinism(tf: Any) -> Any:
    """True/False as set by enable_op_determinism() (TF >= 2.8); the getter is not public API."""
    try:
        from tensorflow.python.framework import config as tf_config

        return bool(tf_config.is_op_determinism_enabled())
    except (ImportError, AttributeError):
        experimental = getattr(getattr(tf, "config", None), "experimental", None)
        if experimental is not None and hasattr(experimental, "is_op_determinism_enabled"):
            return bool(experimental.is_op_determinism_enabled())
    return "not available in this TensorFlow"


def collect_tensorflow(ctx: Context) -> Dict[str, Any]:
    dist = capture("dist-info METADATA (%s)" % "/".join(TF_DISTRIBUTIONS[:3]), _tf_distribution, ctx)
    section = {"distribution": dist}
    if "value" in dist:
        section["version"] = value(dist["value"]["version"], dist["source"])
    else:
        section["version"] = dict(dist)
        section["build_info"] = unavailable("TensorFlow is not installed", dist["source"])
        section["runtime"] = (
            capture("import tensorflow", _runtime, ctx)
            if "tensorflow" in sys.modules
            else (unavailable("TensorFlow is not installed", dist["source"]))
        )
        return section
    section["location"] = capture("sys.path", _package_dir)
    section["build_info"] = capture("tensorflow/python/platform/build_info.py (ast)", _build_info, ctx)
    section["runtime"] = capture("import tensorflow (tf.version, tf.config)", _runtime, ctx)
    return section
