"""The distributed stack: NCCL's configuration files, topology and graph files and plugins, the GPUs a
process sees and their order, TensorFlow's cluster (TF_CONFIG) and Horovod's settings.

A field exists only where there is something to record: a machine without NCCL configuration files,
plugins, a CUDA_VISIBLE_DEVICES over its GPUs, TF_CONFIG or Horovod has an empty section, so a lock recorded
before this section existed still verifies there; where there is something, a lock recorded without it
names the difference.

What is recorded where (envpin.probe.fields classifies the keys):

* ``nccl.conf.<etc|home|conf_file>``: each configuration file NCCL reads (envpin.probe.nccl: which, and
  how), its sha256, size and settings. ``nccl.from_files``: what the files add to the environment, by NCCL's
  precedence (the environment wins, then the first file): these are the settings of the files that take
  effect, and they are fingerprinted. ``nccl.effective``: every NCCL_* variable NCCL sees with its value
  and where it comes from (``env`` or the file), for reading; a variable of the environment is compared as
  ``env.<NAME>``. ``nccl.rules``: whose reading rules were applied (the NCCL release found, else the newest).
* ``nccl.topo_file`` / ``nccl.graph_file``: the sha256 of the XML files NCCL_TOPO_FILE and NCCL_GRAPH_FILE
  name (and of /var/run/nvidia-topologyd/virtualTopology.xml, which NCCL reads when NCCL_TOPO_FILE is
  unset): never their paths, which are host paths.
* ``nccl.plugins.<net|tuner|profiler|env>``: the plugin libraries NCCL would load, by the name NCCL asks
  for, found as the dynamic loader would (envpin.probe.cudalibs.find_library, without loading them), with
  their sha256.
* ``gpus``: with CUDA_VISIBLE_DEVICES set over the GPUs NVML lists, the devices the process sees in their
  order, by NVML index and device class (``2:NVIDIA H100 80GB HBM3;cc=9.0``): the rank-to-GPU mapping. A UUID
  is resolved to its index (an abbreviated one too, as CUDA accepts it) and never recorded. Inside a
  container NVIDIA_VISIBLE_DEVICES has already decided which GPUs NVML lists (gpu.count, gpu.devices.*).
* ``tf_config``: TF_CONFIG's cluster shape (each job's task count), this task's type and index, rpc_layer and
  environment; no host ever.
* ``horovod.*``: the installed Horovod (from the package scan, never imported) and its settings with the
  defaults of its source when unset.

Values from configuration files are treated as the environment's are (envpin.probe.envvars.env_field):
secret-looking names and values are redacted, NCCL_COMM_ID and NCCL_RAS_ADDR keep only their port,
NCCL_SOCKET_MAGIC is withheld. Interface and HCA names (NCCL_SOCKET_IFNAME, NCCL_IB_HCA) are kept: they are
configuration (``ib0``, ``mlx5_0``) that machines of one kind share, not the identity of one machine, and they
decide which networks NCCL builds its rings on.
"""

import json
import os
import re
from typing import Any, Dict, List, Optional, Tuple

from envpin.probe import cudalibs, envvars, nccl, pyenv, secrets
from envpin.probe._common import Context, Unavailable, capture, describe, hash_file, read_file, value

TOPOLOGYD_FILE = "/var/run/nvidia-topologyd/virtualTopology.xml"
#: The most of a configuration file the probe parses (real ones are a few lines).
CONF_LIMIT = 4 * 1024 * 1024
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LABELS = {"etc": "/etc/nccl.conf", "home": "~/.nccl.conf", "conf_file": "$NCCL_CONF_FILE"}


def _shown(name: str, raw: str) -> str:
    """A setting's value as the report may hold it: the env section's own rules (envvars.env_field)."""
    shown: str = envvars.env_field(name, raw).get("value", secrets.REDACTED)
    return shown


def _passwd_home() -> Optional[str]:
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_dir
    except (ImportError, KeyError, OSError):
        return None


def _recordable(name: str) -> bool:
    """A name a file sets that the report may hold: the environment's rule (envvars.relevant: NCCL_*, TF_*,
    CUDA_*... a variable under another name is not read at all, so a credential under an unrelated name, or a
    line ``<token>=1``, never enters the report), spelled as a program can ask for it, not itself looking
    like a credential."""
    return envvars.relevant(name) and bool(_NAME.match(name)) and not secrets.secret_value(name)


def _read_conf(path: str, version: Optional[nccl.Version]) -> Optional[Tuple[bytes, Any]]:
    """The file's bytes and its parsed lines, None when NCCL could not open it either (absent)."""
    try:
        data = read_file(path, CONF_LIMIT, whole=True)
    except FileNotFoundError:
        return None
    return data, nccl.parse_conf(data, version)


def _conf_value(data: bytes, pairs: List[Tuple[str, str]]) -> Dict[str, Any]:
    import hashlib

    settings: Dict[str, str] = {}
    other = 0
    for name, raw in pairs:
        if not _recordable(name):
            other += 1
            continue
        settings.setdefault(name, _shown(name, raw))
    out: Dict[str, Any] = {
        "sha256": "sha256:" + hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "settings": settings,
    }
    if other:
        out["other_lines"] = other
    return out


def _xml_file(ctx: Context, named: Optional[str], default: Optional[str], variable: str) -> Optional[Dict[str, Any]]:
    """The field for the XML file NCCL reads for `variable`: the file it names, else `default` (a system path,
    read under the probe's root); None when there is nothing to record (unset with no default file, or a
    topology file NCCL cannot open: NCCL then detects the topology itself). A graph file NCCL cannot open
    stops NCCL: recorded as unavailable."""
    path = named if named is not None else (ctx.path(default) if default else None)
    source = ("file named by %s" % variable) if named is not None else (default or "")
    if not path:
        return None
    try:
        digest, size = hash_file(path)
    except FileNotFoundError:
        if named is not None and variable == "NCCL_GRAPH_FILE":
            return {
                "unavailable": "%s names a file that does not exist: NCCL stops with a system error" % variable,
                "source": source,
            }
        return None
    except Exception as exc:
        return {"error": describe(exc), "source": source}
    return value(
        {"sha256": digest, "bytes": size, "named_by": variable if named is not None else "default path"}, source
    )


def _plugins(
    ctx: Context, kind: str, settings: Dict[str, str], version: Optional[nccl.Version]
) -> Optional[Dict[str, Any]]:
    """The field for one kind of NCCL plugin: {library name: {sha256, found_by}} of every load that would
    open a library (the first name of a load the loader finds), None when none would."""
    variable = nccl.PLUGIN_VARIABLES[kind]
    found: Dict[str, Any] = {}
    for names in nccl.plugin_candidates(kind, settings.get(variable), version):
        for name in names:
            if nccl.static_plugin(name, version):
                found["static"] = {"found_by": nccl.STATIC}
                break
            where = cudalibs.find_library(ctx, name)
            if where is None:
                continue
            how, path = where
            digest, _ = hash_file(os.path.realpath(path))
            found[os.path.basename(name)] = {"sha256": digest, "found_by": how}
            break
    return found or None


def _collect_nccl(ctx: Context, out: Dict[str, Any]) -> None:
    version = nccl.parse_version(ctx.cache.get("nccl_version"))
    environ = ctx.environ
    found: Dict[str, Any] = {}
    parsed: List[Tuple[str, List[Tuple[str, str]]]] = []
    passwd_home = _passwd_home() if nccl.rules_of(version) < nccl.FGETS_SINCE else None  # $HOME from 2.30.3
    for label, path in nccl.conf_files(environ, version, passwd_home):
        source = "file:" + _LABELS[label]
        try:  # /etc/nccl.conf under the probe's root; the files a variable names as the process opens them
            got = _read_conf(ctx.path(path) if label == "etc" else path, version)
        except Exception as exc:
            found["nccl.conf." + label] = {"error": describe(exc), "source": source}
            continue
        if got is None:
            continue
        data, pairs = got
        found["nccl.conf." + label] = value(_conf_value(data, pairs), source)
        parsed.append((label, pairs))
    from_files, effective = nccl.resolve(environ, parsed)
    settings = dict(environ)
    settings.update({name: raw for name, (raw, _) in from_files.items()})
    added = {n: _shown(n, raw) for n, (raw, _) in sorted(from_files.items()) if _recordable(n)}
    if added:
        found["nccl.from_files"] = value(
            added, "NCCL's precedence: the environment, then " + ", then ".join(_LABELS[lb] for lb, _ in parsed)
        )
    seen = {
        n: {"value": _shown(n, raw), "source": "env" if where == "env" else _LABELS[where]}
        for n, (raw, where) in sorted(effective.items())
        if _recordable(n)
    }
    if seen:
        found["nccl.effective"] = value(seen, "environ NCCL_*, NCCL's configuration files")
    topo = _xml_file(ctx, settings.get("NCCL_TOPO_FILE"), TOPOLOGYD_FILE, "NCCL_TOPO_FILE")
    if topo is not None:
        found["nccl.topo_file"] = topo
    graph = _xml_file(ctx, settings.get("NCCL_GRAPH_FILE"), None, "NCCL_GRAPH_FILE")
    if graph is not None:
        found["nccl.graph_file"] = graph
    for kind in ("net", "tuner", "profiler", "env"):
        source = "%s, else %s.so: LD_LIBRARY_PATH, /etc/ld.so.cache, %s" % (
            nccl.PLUGIN_VARIABLES[kind],
            nccl.PLUGIN_PREFIX[kind],
            ", ".join(cudalibs.DEFAULT_DIRS),
        )
        field = capture(source, _plugins, ctx, kind, settings, version)
        if field.get("value") is not None or "value" not in field:
            found["nccl.plugins." + kind] = field
    if found:
        rules = ".".join(str(n) for n in nccl.rules_of(version))
        said = (
            "NCCL %s (the library cuda.nccl found)" if version is not None else "NCCL %s (none found: the newest read)"
        )
        found["nccl.rules"] = value(said % rules, "envpin.probe.nccl")
    out.update(found)


# --- the GPUs a process sees ----------------------------------------------------------------------------


def device_class(device: Dict[str, Any]) -> str:
    """``<NVML index>:<model>;cc=<compute capability>``: the GPU's kind and place, never its UUID."""
    return "%d:%s;cc=%s" % (device["index"], device.get("name") or "unknown", device.get("cc") or "unknown")


def visible_devices(raw: str, devices: List[Dict[str, Any]]) -> List[str]:
    """CUDA_VISIBLE_DEVICES over NVML's devices, as CUDA reads it (CUDA Programming Guide, "CUDA Environment
    Variables"): a comma-separated list of indices (the GPUs' ordinals "as determined by nvidia-smi") or
    UUIDs, abbreviated ones included ("enough digits from the beginning ... to uniquely identify that GPU");
    the devices are enumerated in the order of the list, and an invalid entry hides itself and every entry
    after it. A MIG device (``MIG-...``) is kept as ``MIG`` in its place (its parent is not resolved here).
    Empty: no GPU."""
    out: List[str] = []
    for entry in raw.split(","):  # as written: whether CUDA allows blanks around an entry is not documented
        if entry.isdigit():
            index = int(entry)
            if index >= len(devices):
                break
            out.append(device_class(devices[index]))
        elif entry.upper().startswith("MIG-"):
            out.append("MIG")
        elif entry.upper().startswith("GPU-"):
            matches = [d for d in devices if (d.get("uuid") or "").lower().startswith(entry.lower())]
            if len(matches) != 1:
                break
            out.append(device_class(matches[0]))
        else:
            break
    return out


def _collect_gpus(ctx: Context, out: Dict[str, Any]) -> None:
    raw = ctx.environ.get("CUDA_VISIBLE_DEVICES")
    devices: List[Dict[str, Any]] = ctx.cache.get("gpu_devices") or []
    if raw is None or not devices:
        return
    order = visible_devices(raw, devices)
    source = "environ:CUDA_VISIBLE_DEVICES over the GPUs of gpu.devices (UUIDs resolved, never recorded)"
    out["gpus.count"] = value(len(order), source)
    out["gpus.order"] = value(order, source)


# --- TensorFlow's cluster -------------------------------------------------------------------------------


def tf_config_shape(raw: str) -> Dict[str, Any]:
    """What TF_CONFIG says about the cluster without naming a host: each job's task count (``cluster`` maps
    a job to a list, or an index -> address object, of ``host:port``), this task's type and index, and the
    rpc_layer and environment. Raises ValueError for a TF_CONFIG TensorFlow could not read as a cluster."""
    doc = json.loads(raw)
    if not isinstance(doc, dict):
        raise ValueError("TF_CONFIG is not a JSON object")
    out: Dict[str, Any] = {}
    cluster = doc.get("cluster")
    if cluster is not None:
        if not isinstance(cluster, dict):
            raise ValueError("TF_CONFIG's cluster is not an object")
        shape: Dict[str, int] = {}
        for job in sorted(cluster):
            tasks = cluster[job]
            if not isinstance(tasks, (list, dict)):
                raise ValueError("TF_CONFIG's job %r has neither a list nor an object of tasks" % str(job)[:40])
            shape[str(job)] = len(tasks)
        out["cluster"] = shape
    task = doc.get("task")
    if isinstance(task, dict):
        if isinstance(task.get("type"), str):
            out["task_type"] = task["type"]
        if isinstance(task.get("index"), (int, str)) and not isinstance(task.get("index"), bool):
            out["task_index"] = task["index"]
    for key in ("rpc_layer", "environment"):
        if isinstance(doc.get(key), str):
            out[key] = doc[key]
    return out


def _collect_tf_config(ctx: Context, out: Dict[str, Any]) -> None:
    raw = ctx.environ.get("TF_CONFIG")
    if raw is None:
        return
    source = "environ:TF_CONFIG (hosts left out)"
    try:
        shape = tf_config_shape(raw)
    except ValueError as exc:  # json.JSONDecodeError included; its message gives a position, never the text
        out["tf_config"] = {"error": describe(exc), "source": source}
        return
    for key in sorted(shape):
        out["tf_config." + key] = value(shape[key], source)


# --- Horovod --------------------------------------------------------------------------------------------

#: Horovod's settings that change what is fused, cached or reduced in which order, with the default its
#: source gives when the variable is unset (horovod/horovod horovod/common/operations.cc and global_state.h
#: at v0.28.1, the last release; the same values from v0.21.0 on, read at each tag from v0.20.3 to v0.28.1):
#: (name, default, first release that reads it).
HOROVOD_SETTINGS = (
    ("HOROVOD_FUSION_THRESHOLD", "134217728", (0, 21, 0)),  # 128 * 1024 * 1024 bytes (64 MiB up to v0.20)
    ("HOROVOD_CYCLE_TIME", "1", (0, 21, 0)),  # ms (5 up to v0.20); 0 with HOROVOD_ENABLE_XLA_OPS (v0.23.0 on)
    ("HOROVOD_CACHE_CAPACITY", "1024", (0, 21, 0)),
    ("HOROVOD_HIERARCHICAL_ALLREDUCE", "0", (0, 21, 0)),
    ("HOROVOD_HIERARCHICAL_ALLGATHER", "0", (0, 21, 0)),
    ("HOROVOD_TORUS_ALLREDUCE", "0", (0, 26, 0)),
    ("HOROVOD_DISABLE_GROUP_FUSION", "0", (0, 21, 0)),
    ("HOROVOD_AUTOTUNE", "0", (0, 21, 0)),
    ("HOROVOD_NUM_NCCL_STREAMS", "1", (0, 21, 0)),
    ("HOROVOD_BATCH_D2D_MEMCOPIES", "1", (0, 21, 0)),
    ("HOROVOD_ENABLE_XLA_OPS", "0", (0, 23, 0)),
)
HOROVOD_DEFAULTS_UNTIL = (0, 28, 1)
_DEFAULT_SOURCE = "default (horovod/common/operations.cc, global_state.h)"


def horovod_settings(environ: Dict[str, str], version: Optional[Tuple[int, ...]]) -> Dict[str, Dict[str, str]]:
    """name -> {value, source} for every setting of HOROVOD_SETTINGS: the environment's value (as the env
    section shows it), else the default of this Horovod release where its source was read, else ``unset``."""
    known = version is not None and (0, 21, 0) <= version[:3] <= HOROVOD_DEFAULTS_UNTIL
    xla = environ.get("HOROVOD_ENABLE_XLA_OPS", "").strip()
    out: Dict[str, Dict[str, str]] = {}
    for name, default, since in HOROVOD_SETTINGS:
        if name in environ:
            out[name] = {"value": _shown(name, environ[name]), "source": "env"}
        elif known and version is not None and version[:3] >= since:
            if name == "HOROVOD_CYCLE_TIME" and version[:3] >= (0, 23, 0) and _strtol(xla) > 0:
                default = "0"
            out[name] = {"value": default, "source": _DEFAULT_SOURCE}
        else:
            out[name] = {"value": "unset", "source": "no default recorded for this Horovod release"}
    return out


def _strtol(text: str) -> int:
    """C's strtol(text, NULL, 10) as Horovod reads a switch: the leading digits, 0 without any."""
    m = re.match(r"\s*([+-]?\d+)", text)
    return int(m.group(1)) if m else 0


def _collect_horovod(ctx: Context, out: Dict[str, Any]) -> None:
    dists, _, _ = pyenv.distributions(ctx)
    found = next((d for d in dists if d["name"] == "horovod"), None)
    if found is None:
        return
    source = "horovod's distribution metadata (packages.distributions)"
    out["horovod.version"] = value(found["version"], source)
    parsed = tuple(int(p) for p in re.findall(r"\d+", found["version"])[:3]) or None
    out["horovod.settings"] = value(
        horovod_settings(ctx.environ, parsed), "environ HOROVOD_*, Horovod's defaults when unset"
    )


def collect_distributed(ctx: Context) -> Dict[str, Any]:
    """The section: every part guarded on its own, so one that fails records its error and the rest goes on."""
    out: Dict[str, Any] = {}
    for name, part in (
        ("nccl", _collect_nccl),
        ("gpus", _collect_gpus),
        ("tf_config", _collect_tf_config),
        ("horovod", _collect_horovod),
    ):
        try:
            part(ctx, out)
        except Unavailable:
            continue
        except Exception as exc:
            out[name] = {"error": describe(exc), "source": "envpin.probe.distributed"}
    return out
