"""The CUDA libraries actually loaded: CUDA runtime, driver API, cuDNN, cuBLAS and NCCL, asked by ctypes.

"Declared" versions (the image's CUDA_VERSION/CUDNN_VERSION variables, TensorFlow's build_info) say what
the image was built for; what counts for the numbers is the library the dynamic loader really maps.
For each library the probe:

1. uses the copy already mapped into this process (``/proc/self/maps``), when TensorFlow loaded one;
2. otherwise asks the dynamic loader for the sonames found on LD_LIBRARY_PATH and in /etc/ld.so.cache
   (the way TensorFlow's dlopen resolves them), preferring the declared major version, then falls back
   to the usual CUDA folders and pip's ``nvidia/*/lib`` folders;
3. calls the library's own version function (``cudnnGetVersion``...) and reads the mapped path back
   from ``/proc/self/maps``.
"""

import ctypes
import os
import re
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from envpin.probe import pyenv
from envpin.probe._common import Context, Unavailable, capture, describe, read_file

FALLBACK_DIRS = (
    "/usr/local/cuda/lib64",
    "/usr/local/cuda/targets/x86_64-linux/lib",
    "/usr/local/cuda/targets/sbsa-linux/lib",
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/usr/lib64",
)

# Libraries worth listing when mapped: the CUDA stack, TensorFlow itself, and CPU math/threading runtimes.
_INTERESTING = re.compile(
    r"^lib(cuda|cudart|cudnn|cublas|nccl|nvrtc|cufft|curand|cusolver|cusparse|nvinfer|nvidia-ml|nvjitlink"
    r"|tensorflow|mkl|dnnl|mkldnn|gomp|iomp|openblas|tbb)"
)


def _decode_cuda(v: int) -> str:
    return "%d.%d" % (v // 1000, (v % 1000) // 10)


def _decode_mmp(v: int) -> str:
    # cuDNN < 9 and NCCL < 2.9 encode M*1000 + m*100 + p; later releases M*10000 + m*100 + p.
    if v >= 10000:
        return "%d.%d.%d" % (v // 10000, (v % 10000) // 100, v % 100)
    return "%d.%d.%d" % (v // 1000, (v % 1000) // 100, v % 100)


def _int_out(lib: Any, symbol: str) -> int:
    fn = getattr(lib, symbol)
    out = ctypes.c_int(0)
    rc = fn(ctypes.byref(out))
    if rc != 0:
        raise RuntimeError("%s returned error %d" % (symbol, rc))
    return out.value


def _cudart_version(lib: Any) -> Tuple[str, int]:
    raw = _int_out(lib, "cudaRuntimeGetVersion")
    return _decode_cuda(raw), raw


def _driver_version(lib: Any) -> Tuple[str, int]:
    raw = _int_out(lib, "cuDriverGetVersion")
    return _decode_cuda(raw), raw


def _cudnn_version(lib: Any) -> Tuple[str, int]:
    fn = lib.cudnnGetVersion
    fn.restype = ctypes.c_size_t
    fn.argtypes = []
    raw = int(fn())
    return _decode_mmp(raw), raw


def _nccl_version(lib: Any) -> Tuple[str, int]:
    raw = _int_out(lib, "ncclGetVersion")
    return _decode_mmp(raw), raw


def _cublas_version(lib: Any) -> Tuple[str, int]:
    fn = lib.cublasGetProperty  # (libraryPropertyType: MAJOR=0, MINOR=1, PATCH=2, int*) since CUDA 8
    parts = []
    for prop in (0, 1, 2):
        out = ctypes.c_int(0)
        rc = fn(ctypes.c_int(prop), ctypes.byref(out))
        if rc != 0:
            raise RuntimeError("cublasGetProperty returned status %d" % rc)
        parts.append(out.value)
    return "%d.%d.%d" % tuple(parts), parts[0] * 10000 + parts[1] * 100 + parts[2]


# name -> (library stem, version function, symbol shown as source, which declared major to prefer)
LIBRARIES = (
    ("runtime", "libcudart", _cudart_version, "cudaRuntimeGetVersion", "cuda"),
    ("driver_api", "libcuda", _driver_version, "cuDriverGetVersion", None),
    ("cudnn", "libcudnn", _cudnn_version, "cudnnGetVersion", "cudnn"),
    ("cublas", "libcublas", _cublas_version, "cublasGetProperty", "cuda"),
    ("nccl", "libnccl", _nccl_version, "ncclGetVersion", "nccl"),
)


def mapped_libraries(ctx: Context) -> Dict[str, str]:
    """basename -> path of every shared object mapped into this process."""
    out: Dict[str, str] = {}
    for line in ctx.read_text("/proc/self/maps", limit=64 * 1024 * 1024).splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/") and ".so" in parts[5]:
            path = parts[5].strip()
            if path.endswith(" (deleted)"):
                path = path[: -len(" (deleted)")]
            out.setdefault(os.path.basename(path), path)
    return out


def _soname_re(stem: str) -> Any:
    return re.compile(r"^" + re.escape(stem) + r"\.so(\.[0-9]+)*$")


def _version_key(name: str) -> Tuple[int, ...]:
    nums = re.findall(r"\.([0-9]+)", name.split(".so", 1)[-1])
    return tuple(int(n) for n in nums)


def _ld_cache_data(ctx: Context) -> bytes:
    """/etc/ld.so.cache, read once per probe (b"" when it cannot be read)."""
    if "ldcache_data" not in ctx.cache:
        try:
            ctx.cache["ldcache_data"] = read_file(ctx.path("/etc/ld.so.cache"), 16 * 1024 * 1024)
        except (IOError, OSError):
            ctx.cache["ldcache_data"] = b""
    data: bytes = ctx.cache["ldcache_data"]
    return data


_CACHE_NAME = re.compile(rb"lib[A-Za-z0-9_+\-]*\.so[0-9.]*$")


def _ld_cache_names(ctx: Context) -> List[str]:
    if "ldcache" not in ctx.cache:
        # The old format stores each soname as a string of its own, glibc's current one ("glibc-ld.so.cache1.1")
        # only as the tail of its path: the names are the last component of every string that is one.
        names = set()
        for text in _ld_cache_data(ctx).split(b"\x00"):
            m = _CACHE_NAME.match(text.rsplit(b"/", 1)[-1])
            if m is not None:
                names.add(m.group(0).decode("ascii", "replace"))
        ctx.cache["ldcache"] = sorted(names)
    found: List[str] = ctx.cache["ldcache"]
    return found


#: The loader's own folders after LD_LIBRARY_PATH and the cache (glibc's trusted directories; Debian's
#: multiarch ones are in the cache).
DEFAULT_DIRS = ("/lib64", "/usr/lib64", "/lib", "/usr/lib")


def ld_cache_path(ctx: Context, name: str) -> Optional[str]:
    """The path /etc/ld.so.cache gives for a library name: the first NUL-terminated absolute path among its
    strings that ends in ``/<name>`` (the cache's string table stores a soname as the tail of its path, so
    the paths are what can be read without parsing its binary entries; with several, the loader would
    choose by architecture and hardware capabilities). None when the cache names no such library."""
    data = _ld_cache_data(ctx)
    needle = b"/" + name.encode("utf-8", "surrogateescape") + b"\x00"
    at = data.find(needle)
    while at >= 0:
        path = data[data.rfind(b"\x00", 0, at) + 1 : at + len(needle) - 1]
        if path.startswith(b"/"):
            return path.decode("utf-8", "surrogateescape")
        at = data.find(needle, at + 1)
    return None


def find_library(ctx: Context, name: str) -> Optional[Tuple[str, str]]:
    """(how, path) of the file ``dlopen(name)`` would map, found without loading it (loading a library runs
    its constructors): a name with a '/' is that path; otherwise the folders of LD_LIBRARY_PATH in order,
    then /etc/ld.so.cache, then the loader's default folders. The RPATH/RUNPATH of the library that calls
    dlopen is not read. None when no such file exists."""
    if not name:
        return None
    if "/" in name:
        where = ctx.path(name) if name.startswith("/") else name
        return ("path", where) if os.path.isfile(where) else None
    for directory in ctx.environ.get("LD_LIBRARY_PATH", "").split(":"):
        if directory and name in _dir_names(ctx, directory):
            candidate = os.path.join(directory, name)
            if os.path.isfile(candidate):
                return "LD_LIBRARY_PATH", candidate
    cached = ld_cache_path(ctx, name)
    if cached is not None and os.path.isfile(ctx.path(cached)):
        return "/etc/ld.so.cache", ctx.path(cached)
    for directory in DEFAULT_DIRS:
        candidate = os.path.join(ctx.path(directory), name)
        if os.path.isfile(candidate):
            return "default folder", candidate
    return None


def _dir_names(ctx: Context, directory: str) -> List[str]:
    """Cached directory listing (five libraries look through the same folders)."""
    listings: Dict[str, List[str]] = ctx.cache.setdefault("listings", {})
    if directory not in listings:
        try:
            listings[directory] = os.listdir(directory)
        except (OSError, ValueError, TypeError):
            listings[directory] = []
    return listings[directory]


def _pip_dirs(ctx: Context) -> List[str]:
    """Folders of pip's nvidia-* wheels (nvidia/cudnn/lib, nvidia/cu13/lib...)."""
    out = []
    for entry in pyenv.search_paths():
        base = os.path.join(entry, "nvidia")
        for sub in sorted(_dir_names(ctx, base)):
            lib = os.path.join(base, sub, "lib")
            if os.path.isdir(lib):
                out.append(lib)
    return out


def _declared_major(ctx: Context, which: Optional[str]) -> Optional[str]:
    if which is None:
        return None
    declared = ctx.cache.get("declared", {})
    text = declared.get(which) or ""
    m = re.match(r"\s*(?:64_)?([0-9]+)", str(text))
    return m.group(1) if m else None


def _candidates(ctx: Context, stem: str, prefer_major: Optional[str]) -> List[Tuple[str, str]]:
    """(how, name-or-path) pairs to try, best first."""
    pattern = _soname_re(stem)
    sonames: Set[str] = set()
    ld_path = ctx.environ.get("LD_LIBRARY_PATH", "")
    for directory in ld_path.split(":"):
        if directory:
            sonames.update(n for n in _dir_names(ctx, directory) if pattern.match(n))
    sonames.update(n for n in _ld_cache_names(ctx) if pattern.match(n))
    full = []
    for directory in [ctx.path(d) for d in FALLBACK_DIRS] + _pip_dirs(ctx):
        for n in sorted(_dir_names(ctx, directory)):
            if pattern.match(n):
                full.append(os.path.join(directory, n))

    def rank(name: str) -> Tuple[int, int, Tuple[int, ...]]:
        key = _version_key(os.path.basename(name))
        preferred = 1 if prefer_major is not None and key[:1] == (int(prefer_major),) else 0
        # A real soname (libcudnn.so.8) before the bare development link (libcudnn.so).
        return (preferred, 1 if key else 0, key)

    ordered = [("dynamic loader", n) for n in sorted(sonames, key=rank, reverse=True)]
    ordered += [("path", p) for p in sorted(full, key=rank, reverse=True)]
    return ordered


def _load(
    ctx: Context, stem: str, symbol: str, fn: Callable[[Any], Tuple[str, int]], prefer: Optional[str]
) -> Dict[str, Any]:
    mapped = mapped_libraries(ctx)
    pattern = re.compile(r"^" + re.escape(stem) + r"\.so")
    already = sorted(p for b, p in mapped.items() if pattern.match(b))
    attempts: List[Tuple[str, str]] = []
    if already:
        attempts.append(("process", already[0]))
    attempts.extend(_candidates(ctx, stem, _declared_major(ctx, prefer)))
    if not attempts:
        raise Unavailable("%s not found (LD_LIBRARY_PATH, /etc/ld.so.cache, %s)" % (stem, FALLBACK_DIRS[0]))
    failures = []
    for how, target in attempts:
        try:
            lib = ctypes.CDLL(target)
        except OSError as exc:
            failures.append("%s: %s" % (target, describe(exc)))
            continue
        try:
            version, raw = fn(lib)
        except AttributeError:
            failures.append("%s: no %s symbol" % (target, symbol))
            continue
        except Exception as exc:
            failures.append("%s: %s" % (target, describe(exc)))
            continue
        now = mapped_libraries(ctx)
        path = next((p for b, p in sorted(now.items()) if pattern.match(b)), target)
        return {
            "version": version,
            "raw": raw,
            "path": os.path.realpath(path) if path.startswith("/") else path,
            "loaded_by": "process" if how == "process" else "probe",
            "requested": target,
        }
    raise RuntimeError("no loadable %s; tried %s" % (stem, "; ".join(failures[:4])))


def _declared(ctx: Context) -> Dict[str, str]:
    out = {}
    for var, key in (
        ("CUDA_VERSION", "cuda"),
        ("CUDNN_VERSION", "cudnn"),
        ("NCCL_VERSION", "nccl"),
        ("CUBLAS_VERSION", "cublas"),
        ("TRT_VERSION", "tensorrt"),
    ):
        if ctx.environ.get(var):
            out[key] = ctx.environ[var]
    for path in ("/usr/local/cuda/version.json", "/usr/local/cuda/version.txt"):
        if ctx.exists(path):
            text = ctx.read_text(path)
            m = re.search(r'"cuda"\s*:\s*\{[^}]*"version"\s*:\s*"([^"]+)"', text) or re.search(
                r"CUDA Version\s+([0-9.]+)", text
            )
            if m:
                out["cuda_toolkit_file"] = m.group(1)
            break
    tf_build = ctx.cache.get("tf_build_info") or {}
    for key in ("cuda_version", "cudnn_version"):
        if key in tf_build:
            out["tensorflow_" + key] = str(tf_build[key])
    if not out:
        raise Unavailable("no CUDA_VERSION/CUDNN_VERSION variables, /usr/local/cuda/version.*, or TF CUDA build")
    return out


def collect_cuda(ctx: Context) -> Dict[str, Any]:
    declared = capture(
        "environ CUDA_VERSION/CUDNN_VERSION/NCCL_VERSION, /usr/local/cuda/version.*, TF build_info", _declared, ctx
    )
    section: Dict[str, Any] = {"declared": declared}
    d = declared.get("value", {})
    # Prefer what TensorFlow was built for, then what the image declares.
    ctx.cache["declared"] = {
        "cuda": d.get("tensorflow_cuda_version") or d.get("cuda") or d.get("cuda_toolkit_file"),
        "cudnn": d.get("tensorflow_cudnn_version") or d.get("cudnn"),
        "nccl": d.get("nccl"),
    }
    for name, stem, fn, symbol, prefer in LIBRARIES:
        section[name] = capture("ctypes %s.so %s()" % (stem, symbol), _load, ctx, stem, symbol, fn, prefer)
    nccl = section["nccl"].get("value")
    ctx.cache["nccl_version"] = nccl.get("version") if isinstance(nccl, dict) else None
    section["loaded_libraries"] = capture(
        ctx.path("/proc/self/maps"),
        lambda: {b: p for b, p in sorted(mapped_libraries(ctx).items()) if _INTERESTING.match(b)},
    )
    return section
