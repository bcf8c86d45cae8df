"""How NCCL reads its inputs besides the environment, release by release: its configuration files, and the
names of the plugin libraries it asks the dynamic loader for. Pure functions of text, settings and an NCCL
version; the collector that reads the files and finds the libraries is envpin.probe.distributed.

Everything here was read in NVIDIA/nccl's sources (the mirror at 5067397c, tags v2.18.1-1 to v2.30.7-1):

* ``src/misc/param.cc`` ``initEnvFunc``: with ``$NCCL_CONF_FILE`` set and not empty, NCCL reads that file
  instead of ``~/.nccl.conf`` (since 2.23.4, commit 68b54236); then always ``/etc/nccl.conf``. Every line
  goes to ``setenv(name, value, 0)`` (``ncclOsSetEnv``, ``src/os/linux.cc``), which never replaces a
  variable already set: the process environment wins over the first file, the first file over
  ``/etc/nccl.conf``, and within one file the first line of a name over a later one.
* ``setEnvFile``, the line syntax: everything before the first ``=`` is the name (at most 1023 bytes),
  everything after it the value (at most 1023 bytes), verbatim: no blanks trimmed, no quotes removed; a line
  without ``=`` is skipped; a line that starts with ``#`` is a comment since 2.26.2 (f44ac759); the line
  ends at a NUL byte (C strings). Until 2.30.2 lines are read with ``getline`` and only a trailing ``\\n`` is
  dropped; from 2.30.3 (b3aeda4a) with ``fgets`` into a 4096-byte buffer, so a longer line is read as
  several, and a trailing ``\\r`` is dropped too. The home folder is the passwd entry's until 2.30.2 and
  ``$HOME`` from 2.30.3.
* The plugins (``src/plugin/plugin_open.cc``, ``net.cc``, ``tuner.cc``, ``profiler.cc``, ``env.cc`` since
  2.26.2; ``src/net.cc``, ``src/misc/tuner.cc``, ``src/misc/profiler.cc`` before): see
  ``plugin_candidates``.
"""

import re
from typing import Dict, List, Optional, Tuple

Version = Tuple[int, int, int]

#: The newest release read; an NCCL whose version is unknown is read by its rules.
NEWEST: Version = (2, 30, 7)
CONF_FILE_SINCE: Version = (2, 23, 4)
COMMENTS_SINCE: Version = (2, 26, 2)
FGETS_SINCE: Version = (2, 30, 3)  # 4096-byte lines, a trailing \r dropped, $HOME
PLUGIN_OPEN_SINCE: Version = (2, 26, 2)  # plugin_open.cc: "none", NCCL_NET_PLUGIN lists
PLUGIN_VERBATIM_SINCE: Version = (2, 21, 5)  # the name as given is tried before lib<prefix>-<name>.so
STATIC_PLUGIN_SINCE: Version = (2, 22, 3)  # a name that is a prefix of STATIC_PLUGIN: the program itself
#: Since when NCCL loads each kind of plugin (the first tag whose sources read its variable).
PLUGIN_SINCE: Dict[str, Version] = {"net": (0, 0, 0), "tuner": (2, 19, 1), "profiler": (2, 23, 4), "env": (2, 28, 7)}
PLUGIN_VARIABLES = {
    "net": "NCCL_NET_PLUGIN",
    "tuner": "NCCL_TUNER_PLUGIN",
    "profiler": "NCCL_PROFILER_PLUGIN",
    "env": "NCCL_ENV_PLUGIN",
}
PLUGIN_PREFIX = {"net": "libnccl-net", "tuner": "libnccl-tuner", "profiler": "libnccl-profiler", "env": "libnccl-env"}
#: What the probe records instead of a file for a plugin NCCL finds in the program itself.
STATIC = "(the program itself)"

_NAME_MAX = 1023
_VALUE_MAX = 1023
_FGETS_LINE = 4095  # fgets(line, 4096, file) reads at most 4095 bytes
_PLUGIN_NAME_MAX = 254  # snprintf(libName_, MAX_STR_LEN=255, ...)
_NET_PLUGINS_MAX = 14  # NCCL_NET_MAX_PLUGINS (16) less the two internal ones (IB, Socket)

_VERSION = re.compile(r"^\s*(\d+)\.(\d+)\.(\d+)")


def parse_version(text: Optional[str]) -> Optional[Version]:
    """'2.28.3' (as envpin.probe.cudalibs reports it) -> (2, 28, 3); None for anything else."""
    m = _VERSION.match(text or "")
    return (int(m.group(1)), int(m.group(2)), int(m.group(3))) if m else None


def rules_of(version: Optional[Version]) -> Version:
    """The release whose reading rules apply: the NCCL found, else the newest read."""
    return version if version is not None else NEWEST


def _lines(data: bytes, version: Version) -> List[bytes]:
    """The lines setEnvFile sees, each as the C string it works on (up to its first NUL), with the trailing
    newline (and, from 2.30.3, carriage return) dropped."""
    out: List[bytes] = []
    if version >= FGETS_SINCE:
        start = 0
        while start < len(data):
            end = data.find(b"\n", start, start + _FGETS_LINE)
            stop = end + 1 if end >= 0 else min(start + _FGETS_LINE, len(data))
            chunk = data[start:stop].split(b"\0", 1)[0]
            start = stop
            if chunk.endswith(b"\n"):
                chunk = chunk[:-1]
            if chunk.endswith(b"\r"):
                chunk = chunk[:-1]
            out.append(chunk)
        return out
    if not data:
        return out
    for raw in data.split(b"\n"):
        out.append(raw.split(b"\0", 1)[0])
    if data.endswith(b"\n"):
        out.pop()  # getline: the text after the last newline is no further line when it is empty
    return out


def parse_conf(data: bytes, version: Optional[Version] = None) -> List[Tuple[str, str]]:
    """(name, value) for every line NCCL hands to setenv, in file order (the first of a name is the one that
    counts: setenv never replaces), as the given NCCL release reads the file. Bytes that are not UTF-8 are
    kept as surrogate escapes, the way os.environ holds them."""
    rules = rules_of(version)
    out: List[Tuple[str, str]] = []
    for line in _lines(data, rules):
        if rules >= COMMENTS_SINCE and line.startswith(b"#"):
            continue
        cut = line.find(b"=")
        if cut < 0:
            continue
        name = line[: min(cut, _NAME_MAX)]
        if not name:
            continue  # setenv("") fails with EINVAL: nothing is set
        value = line[cut + 1 : cut + 1 + _VALUE_MAX]
        out.append((name.decode("utf-8", "surrogateescape"), value.decode("utf-8", "surrogateescape")))
    return out


def conf_files(
    environ: Dict[str, str], version: Optional[Version], passwd_home: Optional[str]
) -> List[Tuple[str, str]]:
    """(label, path) of the files NCCL reads, first (strongest) first: ``conf_file`` ($NCCL_CONF_FILE) or
    ``home`` (``<home>/.nccl.conf``), then ``etc``. `passwd_home`: the passwd entry's home folder, which
    releases before 2.30.3 use instead of $HOME."""
    rules = rules_of(version)
    out: List[Tuple[str, str]] = []
    named = environ.get("NCCL_CONF_FILE")
    if rules >= CONF_FILE_SINCE and named:
        out.append(("conf_file", named[:1023]))
    else:
        home = environ.get("HOME") if rules >= FGETS_SINCE else passwd_home
        if home is not None:
            out.append(("home", ("%s/.nccl.conf" % home)[:1023]))
    out.append(("etc", "/etc/nccl.conf"))
    return out


def resolve(
    environ: Dict[str, str], files: List[Tuple[str, List[Tuple[str, str]]]]
) -> Tuple[Dict[str, Tuple[str, str]], Dict[str, Tuple[str, str]]]:
    """NCCL's precedence over the environment and the parsed files (strongest file first): returns
    (from_files, effective). from_files: name -> (value, file label) for what the files add to the
    environment; effective: name -> (value, "env" or the file label) for every NCCL_* variable of the
    environment and everything the files add."""
    from_files: Dict[str, Tuple[str, str]] = {}
    for label, pairs in files:
        for name, value in pairs:
            if name not in environ and name not in from_files:
                from_files[name] = (value, label)
    effective = {name: (environ[name], "env") for name in environ if name.startswith("NCCL_")}
    effective.update(from_files)
    return from_files, effective


def _opened_names(prefix: str, name: Optional[str], version: Version) -> List[str]:
    """The names one plugin load asks dlopen for, in order (plugin_open.cc ``openPluginLib`` since 2.26.2,
    the per-plugin functions of src/net.cc and src/misc/tuner.cc before)."""
    if version >= PLUGIN_OPEN_SINCE:
        if not name:
            return ["%s.so" % prefix]
        names = [name[:_PLUGIN_NAME_MAX]]
        # A path or a library name (lib*.so) is only tried as given.
        if "/" not in name and not (name.startswith("lib") and name.endswith(".so")):
            names.append(("%s-%s.so" % (prefix, name))[:_PLUGIN_NAME_MAX])
        return names
    if not name:
        return ["%s.so" % prefix]
    if version >= PLUGIN_VERBATIM_SINCE:
        return [name, "%s-%s.so" % (prefix, name)]
    return ["%s-%s.so" % (prefix, name)]


def plugin_candidates(kind: str, setting: Optional[str], version: Optional[Version]) -> List[List[str]]:
    """For one kind of plugin (net, tuner, profiler, env) and its variable's value (None: unset), the plugin
    loads NCCL tries: one list of library names per load, each tried in order until one opens (a load of the
    net plugin per name of an NCCL_NET_PLUGIN list). [] where this release has no such plugin or it is off.

    Since 2.26.2: unset, the default ``lib<prefix>.so``; ``none`` (any case) turns the plugin off; a name is
    tried as given, then as ``lib<prefix>-<name>.so`` unless it holds a '/' or is a ``lib*.so`` name;
    NCCL_NET_PLUGIN is a comma-separated list (empty entries skipped; set but empty: no external net
    plugin). 2.21.5 to 2.26.1: a non-empty name as given, then ``lib<prefix>-<name>.so`` (the profiler,
    2.23.4 on: only as given), unset or empty the default. Before 2.21.5: the net plugin
    ``libnccl-net-<name>.so`` (unset or empty: ``libnccl-net.so``); the tuner (2.19.1 on) only a name that
    is set, as given. When no tuner library opens, NCCL looks for the tuner (and the profiler) in the net
    plugin, whose library is recorded as the net plugin."""
    rules = rules_of(version)
    if rules < PLUGIN_SINCE[kind]:
        return []
    prefix = PLUGIN_PREFIX[kind]
    if rules >= PLUGIN_OPEN_SINCE:
        if setting is not None and setting.lower() == "none":
            return []
        if kind == "net":
            if setting is None:
                return [["%s.so" % prefix]]
            names = [n for n in setting.split(",") if n and len(n) + 1 <= _PLUGIN_NAME_MAX + 1]
            return [_opened_names(prefix, n, rules) for n in names[:_NET_PLUGINS_MAX]]
        return [_opened_names(prefix, setting, rules)]
    if kind == "profiler":
        return [[setting] if setting else ["%s.so" % prefix]]
    if kind == "tuner" and rules < PLUGIN_VERBATIM_SINCE:
        return [[setting]] if setting else []
    return [_opened_names(prefix, setting, rules)]


def static_plugin(name: str, version: Optional[Version]) -> bool:
    """Whether dlopen is handed NULL for this name (the program's own symbols): since 2.22.3 a name that,
    case aside, is a prefix of ``STATIC_PLUGIN`` (``strncasecmp(name, "STATIC_PLUGIN", strlen(name))``)."""
    return rules_of(version) >= STATIC_PLUGIN_SINCE and bool(name) and "STATIC_PLUGIN".startswith(name.upper())
