"""Run the collectors into one report; render it as canonical JSON and as Markdown; write files atomically."""

import contextlib
import datetime
import json
import os
import re
import sys
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple  # noqa: F401 (Tuple: a type comment)

from envpin.portable.atomic import replace_all, write_into, write_target
from envpin.portable.version import __version__
from envpin.probe import cpu, cudalibs, distributed, envvars, fields, nvml, pyenv, secrets, system, tf
from envpin.probe._common import Context, describe, guarded_section, value

PROBE_SCHEMA = 1

# Section order matters only for caching: tensorflow reads the package scan, cuda reads TF build info.
COLLECTORS = (
    ("host", system.collect_host),
    ("image", envvars.collect_image),
    ("os", system.collect_os),
    ("container", system.collect_container),
    ("cpu", cpu.collect_cpu),
    ("memory", system.collect_memory),
    ("limits", system.collect_limits),
    ("python", pyenv.collect_python),
    ("packages", pyenv.collect_packages),
    ("tensorflow", tf.collect_tensorflow),
    ("cuda", cudalibs.collect_cuda),
    ("gpu", nvml.collect_gpu),
    ("env", envvars.collect_env),
    # After cuda (the NCCL release whose rules apply), gpu (the devices) and packages (Horovod).
    ("distributed", distributed.collect_distributed),
)


def tensorflow_missing() -> Optional[str]:
    """Why the self-test cannot run in this interpreter (None when TensorFlow is importable), found without
    importing TensorFlow: the default self-test must cost nothing in images that do not have it."""
    import importlib.util

    try:
        found = importlib.util.find_spec("tensorflow")
    except (ImportError, ValueError) as exc:
        return "TensorFlow cannot be found by %s: %s" % (sys.executable, describe(exc))
    if found is None:
        return "TensorFlow is not installed for %s (no module named tensorflow)" % sys.executable
    return None


def _selftest(
    compare: bool,
    quick: bool,
    requested: bool,
    replicas: Optional[int] = None,
    timeout: Optional[float] = None,
    progress: Optional[Callable[[int, int, str], None]] = None,
) -> Dict[str, Any]:
    """The determinism self-test lives in its own module, imported only when it runs (it imports TF).

    Not requested explicitly (the default), it runs where TensorFlow is importable and otherwise records why
    it did not run, instead of failing."""
    if not requested:
        missing = tensorflow_missing()
        if missing:
            return {"skipped": missing + "; the fingerprint is complete without it"}
    try:
        from envpin.probe.selftest.run import run_selftest
    except Exception as exc:
        return {"error": "self-test unavailable: " + describe(exc)}
    try:
        result = run_selftest(compare=compare, quick=quick, replicas=replicas, timeout=timeout, progress=progress)
    except Exception as exc:
        return {"error": "self-test failed to run: " + describe(exc)}
    if not isinstance(result, dict):
        return {"error": "self-test returned %s, not an object" % type(result).__name__}
    return result


def collect(
    selftest: Optional[bool] = False,
    quick: bool = False,
    compare: bool = False,
    *,
    with_tf: bool = False,
    root: Optional[str] = None,
    environ: Optional[Dict[str, str]] = None,
    anonymize: bool = False,
    replicas: Optional[int] = None,
    timeout: Optional[float] = None,
    progress: Optional[Callable[[int, int, str], None]] = None,
    check_files: bool = False,
) -> Dict[str, Any]:
    """Probe this process's environment and return the report (a JSON-able dict).

    selftest: True runs the determinism self-test, False leaves it out, None (what images run by default)
    runs it where TensorFlow is importable and otherwise records why not. quick/compare are handed to the
    self-test; quick never shortens the fingerprint; replicas adds the multi-replica self-test to it; timeout
    is each self-test child's limit in CPU seconds (default: ENVPIN_SELFTEST_TIMEOUT or 600).
    with_tf imports TensorFlow to read runtime settings (seconds). root reads /proc, /sys and /etc under
    another folder (default: ENVPIN_PROBE_ROOT or /). anonymize replaces the host name, user name and home
    folder by <host>, <user> and <home> everywhere (before the fingerprint is taken). progress(done, total,
    part) hears how far the self-test is (envpin.probe.selftest.run.run_selftest). check_files hashes every
    installed file against its distribution's RECORD (seconds with TensorFlow installed; what the image probe
    and `verify` do, while a probe of the host leaves it out unless asked)."""
    started = time.monotonic()
    env = dict(os.environ if environ is None else environ)
    ctx = Context(
        root=root or env.get("ENVPIN_PROBE_ROOT") or "/", environ=env, with_tf=with_tf, check_files=check_files
    )
    report: Dict[str, Any] = {"probe_schema": PROBE_SCHEMA, "envpin_version": __version__}
    for name, fn in COLLECTORS:
        report[name] = guarded_section(name, fn, ctx)
        if name == "tensorflow":
            build = report[name].get("build_info", {})
            ctx.cache["tf_build_info"] = build.get("value") if isinstance(build, dict) else None
    if selftest is not False:
        report["selftest"] = _selftest(
            compare=compare,
            quick=quick,
            requested=bool(selftest),
            replicas=replicas,
            timeout=timeout,
            progress=progress,
        )
    report = secrets.scrub(report)
    who = None
    if anonymize:
        hostname = report.get("host", {}).get("hostname", {})
        who = secrets.identity(env, str(hostname.get("value", "")) if isinstance(hostname, dict) else "")
        report = secrets.anonymize(report, who)
    errors = sorted(k for k, v in fields.flatten(report).items() if v.startswith("error:"))
    options: Dict[str, Any] = {
        "selftest": "auto" if selftest is None else selftest,
        "quick": quick,
        "compare": compare,
        "with_tf": with_tf,
        "root": ctx.root,
        "anonymize": anonymize,
    }
    if replicas:
        options["replicas"] = replicas  # only when asked: reports without it keep their exact form
    if timeout:
        options["timeout"] = timeout
    if check_files:
        options["check_files"] = True  # only when asked: reports without it keep their exact form
    report["probe"] = {
        "duration_s": value(round(time.monotonic() - started, 3), "time.monotonic()"),
        "options": value(options, "arguments"),
        "interpreter": value(sys.executable, "sys.executable"),
        "errors": value(errors, "fields that recorded an error"),
    }
    if who is not None:
        report["probe"] = secrets.anonymize(report["probe"], who)
    report["fingerprint"] = fields.fingerprint(report)
    return report


def to_json(report: Dict[str, Any]) -> str:
    """Canonical JSON: sorted keys, two-space indent, trailing newline, ASCII only.

    ASCII because Python 3.6 in a C-locale container cannot print non-ASCII text, and because undecodable
    bytes (an environment variable holding invalid UTF-8) arrive as lone surrogates that only a \\u
    escape can carry."""
    return json.dumps(report, sort_keys=True, indent=2, ensure_ascii=True) + "\n"


def _md(text: str) -> str:
    """Table-cell text: pipes escaped, angle brackets as entities (``<redacted>`` is not an HTML tag)."""
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _field_rows(section: Dict[str, Any]) -> List[List[str]]:
    rows = []
    for name in sorted(section):
        f = section[name]
        text = fields.field_text(f)
        src = f.get("source", "") if isinstance(f, dict) else ""
        if text is not None:
            rows.append([name, text if text != "unavailable" else "unavailable: " + f["unavailable"], src])
            continue
        flat: Dict[str, str] = {}
        fields.flatten_value(name, f["value"], flat)
        for key in sorted(flat):
            rows.append([key, flat[key], src])
    return rows


def to_markdown(report: Dict[str, Any]) -> str:
    """A human rendering of the report: one table per section; fingerprinted fields are marked."""
    fp_keys = set(fields.fingerprint_fields(report))
    host = report.get("host", {})

    def hv(name: str) -> str:
        f = host.get(name, {})
        return str(f.get("value", "?")) if isinstance(f, dict) else "?"

    errors = report.get("probe", {}).get("errors", {}).get("value", [])
    lines = [
        "# envpin probe report",
        "",
        "- fingerprint: `%s`" % report.get("fingerprint", "?"),
        "- fingerprinted fields: %d (marked **F** below)" % len(fp_keys),
        "- host: `%s`, %s, pid %s" % (hv("hostname"), hv("time_utc"), hv("pid")),
        "- probe schema %s, envpin %s" % (report.get("probe_schema"), report.get("envpin_version")),
        "- fields with errors: %s" % (", ".join("`%s`" % e for e in errors) if errors else "none"),
        "",
    ]
    for section in fields.SECTIONS:
        body = report.get(section)
        if not isinstance(body, dict) or not body:  # the distributed section is empty without one
            continue
        lines += ["## %s" % section, "", "| | field | value | source |", "| --- | --- | --- | --- |"]
        for key, text, src in _field_rows(body):
            mark = "**F**" if "%s.%s" % (section, key) in fp_keys else ""
            lines.append("| %s | `%s` | %s | %s |" % (mark, key.replace("|", "\\|"), _md(text), _md(src)))
        lines.append("")
        if section == "distributed":
            lines += _nccl_settings_markdown(body)
    if isinstance(report.get("selftest"), dict):
        lines += _selftest_markdown(report["selftest"])
    return "\n".join(lines)


def _nccl_settings_markdown(section: Dict[str, Any]) -> List[str]:
    """Every variable NCCL sees, its value and where it comes from, in one table (the fields spread it over
    nccl.effective.<NAME>.value and .source)."""
    effective = section.get("nccl.effective", {})
    settings = effective.get("value") if isinstance(effective, dict) else None
    if not isinstance(settings, dict) or not settings:
        return []
    lines = ["### NCCL settings in effect", "", "| variable | value | from |", "| --- | --- | --- |"]
    for name in sorted(settings):
        got = settings[name] if isinstance(settings[name], dict) else {}
        lines.append(
            "| `%s` | %s | %s |" % (_md(name), _md(str(got.get("value", ""))), _md(str(got.get("source", ""))))
        )
    return [*lines, ""]


def _selftest_markdown(result: Dict[str, Any]) -> List[str]:
    """The self-test's own Markdown rendering; the raw JSON when the section is not one it can read."""
    try:
        from envpin.probe.selftest.report import render_markdown

        return [*render_markdown(result).splitlines(), ""]
    except Exception:
        return ["## selftest", "", "```json", json.dumps(result, sort_keys=True, indent=2), "```", ""]


def write_all(texts: Dict[str, str]) -> None:
    """Write several files all or nothing (envpin.portable.atomic.replace_all); devices and pipes ('-',
    /dev/null, a fifo) are written directly."""
    files: Dict[str, bytes] = {}
    direct_files: Dict[str, bytes] = {}
    for path, text in texts.items():
        # Bytes, not the locale's encoding: C-locale Python 3.6 would refuse non-ASCII (Markdown may hold some).
        data = text.encode("utf-8", "backslashreplace")
        if path == "-":
            sys.stdout.flush()
            out = getattr(sys.stdout, "buffer", None)
            if out is None:
                sys.stdout.write(data.decode("utf-8"))
            else:
                out.write(data)
                out.flush()
        else:
            # /dev/null, a FIFO someone reads and /dev/stdout (whatever it leads to) are written into; a link to
            # a file writes the file; a dangling link, folder or socket is refused (OSError)
            where, direct = write_target(path)
            (direct_files if direct else files)[where] = data
    replace_all(files)
    for where, data in direct_files.items():
        for stream in (sys.stdout, sys.stderr):  # /dev/stdout is written through descriptor 1: its buffer first
            if stream is not None:
                stream.flush()
        write_into(where, data)


def report_basename(report: Dict[str, Any]) -> str:
    """``<hostname>-<UTC time>-<pid>``: unique per host, second and process (where the folder already holds
    that name, `write_reports` adds -2, -3)."""
    host = report.get("host", {})
    name = str(host.get("hostname", {}).get("value", "host"))
    stamp = str(host.get("time_utc", {}).get("value", ""))
    if not stamp:
        stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    pid = str(host.get("pid", {}).get("value", os.getpid()))
    stamp = stamp.replace("-", "").replace(":", "")
    return "%s-%s-%s" % (re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "host", stamp, pid)


def one_file(json_path: Optional[str], markdown_path: Optional[str]) -> Optional[str]:
    """What both the JSON and the Markdown report are to be written to ('stdout', or the file), else None:
    asked for both, the caller refuses, since the second report would replace the first."""
    if not json_path or not markdown_path:
        return None
    if json_path == "-" or markdown_path == "-":
        return "stdout" if json_path == markdown_path else None
    if os.path.realpath(json_path) == os.path.realpath(markdown_path):
        return json_path
    try:
        return json_path if os.path.samefile(json_path, markdown_path) else None  # two links to one file
    except OSError:  # one of them does not exist yet: not the same file
        return None


def write_reports(
    report: Dict[str, Any],
    out_dir: Optional[str] = None,
    json_path: Optional[str] = None,
    markdown_path: Optional[str] = None,
) -> List[str]:
    """Write the requested outputs, all or nothing; with none requested, JSON goes to stdout. Returns the
    paths written. A report folder this call created is removed again when the writing fails."""
    texts: Dict[str, str] = {}
    created = None
    if out_dir:
        if not os.path.isdir(out_dir):
            os.mkdir(out_dir)  # its parent must exist: a mistyped path grows no tree of folders
            created = out_dir
        stem = report_basename(report)
        base, n = os.path.join(out_dir, stem), 1
        # Two probes of one host in one second as pid 1 (containers sharing the host's name) get one name:
        # the later report takes the next free -2, -3 instead of replacing the earlier one.
        while os.path.lexists(base + ".json") or os.path.lexists(base + ".md"):
            n += 1
            base = os.path.join(out_dir, "%s-%d" % (stem, n))
        texts[base + ".json"] = to_json(report)
        texts[base + ".md"] = to_markdown(report)
    if json_path:
        texts[json_path] = to_json(report)
    if markdown_path:
        texts[markdown_path] = to_markdown(report)
    if not texts:
        texts["-"] = to_json(report)
    try:
        write_all(texts)
    except BaseException:
        if created:
            with contextlib.suppress(OSError):
                os.rmdir(created)
        raise
    return [path for path in texts if path != "-"]


def load_schema() -> Dict[str, Any]:
    """The report's JSON Schema, shipped next to this module (also inside envpin.pyz)."""
    from envpin.probe._common import package_data

    schema: Dict[str, Any] = json.loads(package_data("envpin.probe", "report.schema.json").decode("utf-8"))
    return schema
