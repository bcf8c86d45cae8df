"""The Python interpreter and every installed distribution, read from metadata files on disk.

importlib.metadata would be simpler but only exists from Python 3.8; NGC 19.xx-20.xx images ship 3.6.
Reading ``*.dist-info/METADATA`` and ``*.egg-info/PKG-INFO`` headers ourselves is also faster.
"""

import hashlib
import os
import platform
import re
import sys
from typing import Any, Dict, List, Optional, Tuple

from envpin.probe import installed
from envpin.probe._common import Context, capture, read_file, unavailable, value

_HEADER = re.compile(r"^(Name|Version):[ \t]*(.*?)\s*$", re.MULTILINE)


def normalize(name: str) -> str:
    """PEP 503 name: 'Tensorflow_GPU' and 'tensorflow-gpu' are one distribution."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _read(path: str, limit: Optional[int] = None) -> bytes:
    return read_file(path) if limit is None else read_file(path, limit)


def _metadata(meta_path: str, fallback: str) -> Tuple[str, str]:
    """(name, version) from the RFC 822 header of METADATA / PKG-INFO, or from the folder name."""
    head = _read(meta_path, 65536).decode("utf-8", "replace").split("\n\n", 1)[0]
    found = dict((m.group(1), m.group(2)) for m in _HEADER.finditer(head))
    if "Name" in found and "Version" in found:
        return found["Name"], found["Version"]
    stem = re.sub(r"\.(dist|egg)-info$", "", fallback)
    name, _, version = stem.partition("-")
    return found.get("Name", name), found.get("Version", version.split("-py")[0] or "unknown")


def _dist_entry(location: str, entry: str) -> Optional[Dict[str, str]]:
    """One installed distribution: name, version and the hash of its file list (RECORD)."""
    full = os.path.join(location, entry)
    if entry.endswith(".dist-info"):
        meta = os.path.join(full, "METADATA")
        lists = [os.path.join(full, "RECORD")]
    elif entry.endswith(".egg-info"):
        if os.path.isfile(full):  # a bare PKG-INFO file named *.egg-info (distutils installs)
            meta, lists = full, []
        else:
            meta = os.path.join(full, "PKG-INFO")
            lists = [os.path.join(full, n) for n in ("installed-files.txt", "SOURCES.txt")]
    elif entry == "EGG-INFO":  # a zipped or unpacked .egg on sys.path
        meta = os.path.join(full, "PKG-INFO")
        lists = [os.path.join(full, "SOURCES.txt")]
    else:
        return None
    if not os.path.isfile(meta):
        return None
    name, version = _metadata(meta, entry)
    # RECORD lists every installed file with its sha256, so hashing it hashes the installed contents as
    # installed; a file edited in place afterwards is found by envpin.probe.installed.
    digest_source = meta
    for candidate in lists:
        if os.path.isfile(candidate):
            digest_source = candidate
            break
    digest = hashlib.sha256(_read(digest_source)).hexdigest()
    return {
        "name": normalize(name),
        "version": version,
        "location": location,
        "record": digest_source,
        "record_sha256": digest,
    }


def search_paths() -> List[str]:
    """sys.path directories, in import order, without the working directory (not part of the env)."""
    seen = set()
    out = []
    cwd = os.getcwd() if hasattr(os, "getcwd") else ""
    for entry in sys.path:
        if entry in ("", ".") or os.path.abspath(entry) == cwd:
            continue
        real = os.path.realpath(entry)
        if real in seen or not os.path.isdir(real):
            continue
        seen.add(real)
        out.append(entry)
    return out


def scan_distributions(paths: List[str]) -> Tuple[List[Dict[str, str]], Dict[str, List[str]]]:
    """Every distribution on the given paths; the first one of a name on sys.path is the one imported,
    later ones are returned as shadowed."""
    winners: Dict[str, Dict[str, str]] = {}
    shadowed: Dict[str, List[str]] = {}
    for location in paths:
        try:
            entries = sorted(os.listdir(location))
        except OSError:
            continue
        if location.endswith(".egg") and "EGG-INFO" in entries:
            entries = ["EGG-INFO"]
        for entry in entries:
            if not (entry.endswith(".dist-info") or entry.endswith(".egg-info") or entry == "EGG-INFO"):
                continue
            try:
                dist = _dist_entry(location, entry)
            except (OSError, ValueError):
                continue
            if dist is None:
                continue
            if dist["name"] in winners:
                shadowed.setdefault(dist["name"], []).append("%s@%s" % (dist["version"], location))
            else:
                winners[dist["name"]] = dist
    return [winners[k] for k in sorted(winners)], shadowed


def distributions(ctx: Context) -> Tuple[List[Dict[str, str]], Dict[str, List[str]], List[str]]:
    """Cached scan (the tensorflow collector reuses it)."""
    if "dists" not in ctx.cache:
        paths = search_paths()
        dists, shadowed = scan_distributions(paths)
        ctx.cache["dists"] = (dists, shadowed, paths)
    found: Tuple[List[Dict[str, str]], Dict[str, List[str]], List[str]] = ctx.cache["dists"]
    return found


def site_hash(dists: List[Dict[str, str]]) -> str:
    h = hashlib.sha256()
    for d in dists:
        h.update(("%s==%s %s\n" % (d["name"], d["version"], d["record_sha256"])).encode("utf-8"))
    return "sha256:" + h.hexdigest()


def collect_packages(ctx: Context) -> Dict[str, Any]:
    src = "*.dist-info/METADATA, *.egg-info/PKG-INFO on sys.path"
    scan = capture(src, distributions, ctx)
    if "value" not in scan:
        return {"distributions": scan}
    dists, shadowed, paths = scan["value"]
    out: Dict[str, Any] = {
        "distributions": value({d["name"]: d["version"] for d in dists}, src),
        "count": value(len(dists), src),
        "site_hash": value(site_hash(dists), "sha256 over name==version + sha256(RECORD) of every distribution"),
        "shadowed": value(shadowed, src + " (later duplicates on sys.path)"),
        "paths": value(paths, "sys.path"),
        "startup_hooks": capture(
            "sitecustomize/usercustomize on sys.path, *.pth with import lines in site-packages folders",
            installed.startup_hooks,
            paths,
        ),
    }
    record_src = "each installed file's size and hash against its distribution's RECORD"
    if not ctx.check_files:
        out["record_check"] = unavailable(
            "not checked: this probe left the installed files out (a probe inside an image checks them, a probe "
            "of the host when asked)",
            record_src,
        )
        return out
    checked = capture(record_src, installed.check_installed, dists)
    if "value" not in checked:
        out["record_check"] = checked
        return out
    out["record_check"] = value(checked["value"]["totals"], record_src)
    # Only when a file differs: the report of an environment as installed keeps the fields it had before.
    for name in ("changed", "missing"):
        if checked["value"][name]:
            out[name] = value(checked["value"][name], record_src)
    return out


def collect_python(ctx: Context) -> Dict[str, Any]:
    impl = sys.implementation
    return {
        "version": value(platform.python_version(), "platform.python_version()"),
        "implementation": value("%s (%s)" % (impl.name, impl.cache_tag), "sys.implementation"),
        "build": capture("platform.python_build()", lambda: " ".join(platform.python_build())),
        "compiler": capture("platform.python_compiler()", platform.python_compiler),
        "executable": value(sys.executable, "sys.executable"),
        "prefix": value(sys.prefix, "sys.prefix"),
        "base_prefix": value(getattr(sys, "base_prefix", sys.prefix), "sys.base_prefix"),
        "hash_randomization": value(bool(sys.flags.hash_randomization), "sys.flags.hash_randomization"),
        "abi": value(
            {
                "byteorder": sys.byteorder,
                "maxsize": sys.maxsize,
                "float_repr_style": sys.float_repr_style,
                "float_dig": sys.float_info.dig,
            },
            "sys",
        ),
        "flags": value(
            {"isolated": bool(sys.flags.isolated), "optimize": sys.flags.optimize},
            "sys.flags",
        ),
    }
