"""Hostile inputs through the real CLI: malformed registry answers from a loopback server, FIFOs and devices
where files are read or written, dangling and looping links, long names, a read-only folder as a user without
root's permission override, a closed stdout, Dockerfiles whose variables grow exponentially or whose scopes
grow with every line, planted secrets in new shapes, and --fix on suppressions, a byte order mark and CR LF.

Each case ends as the product rules say: one `error:` and one `hint:` line and exit 2 (or the command's own
result), no traceback, no hang (every subprocess runs under a timeout and the elapsed time is asserted), no
memory beyond a bound (a child's peak RSS from resource.getrusage), no replaced device, no created parent."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import Result, make_unreadable, run_envpin
from tests.hostile_registry import (
    INDEX,
    Answer,
    HostileRegistry,
    image_routes,
    make_image,
    manifest_answer,
)

REPO, TAG = "nvidia/tensorflow", "20.02-tf2-py3"
BASE = f"/v2/{REPO}"
#: Seconds any single command here may take: each does kilobytes of work, so passing it means a hang.
BOUND_S = 30


def _one_error(res: Result, *needles: str) -> str:
    lines = [line for line in res.stderr.splitlines() if line.strip()]
    assert res.code == 2, (res.code, res.stderr)
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr
    assert len(lines) == 2 and lines[0].startswith("error: ") and lines[1].startswith("hint: "), res.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _timed(*args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> Result:
    started = time.monotonic()
    res = run_envpin(*args, cwd=cwd, env=env)
    assert time.monotonic() - started < BOUND_S, args
    return res


# -- a loopback registry with malformed answers ------------------------------------------------------------------


_IMAGE = make_image({"TENSORFLOW_VERSION": "2.1.0"})


@pytest.mark.parametrize(
    ("answer", "needle"),
    [
        (Answer(raw=b'HTTP/1.0 200 OK\r\nContent-Length: 900\r\n\r\n{"schemaVersion": 2}'), "cut the manifest"),
        (Answer(raw=b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n{"a"'), "cut the manifest"),
        (Answer(200, b"\x1f\x8b\x08\x00", {"Content-Encoding": "gzip"}), "encoded as 'gzip'"),
        (Answer(raw=b"SSH-2.0-OpenSSH_9.2\r\n"), "not HTTP"),
        (Answer(raw=b"HTTP/1.1 2x0 OK\r\n\r\n"), "not HTTP"),
        (manifest_answer(b"[" * 50_000 + b"]" * 50_000), "nested more than 64 levels"),
        (manifest_answer(b'{"a": ' + b"7" * 5000 + b"}"), "number too long"),
        (manifest_answer(b'["a", "list"]'), "not a JSON object"),
        (manifest_answer(b'"a string"'), "not a JSON object"),
        (
            manifest_answer(
                json.dumps({"manifests": [{"platform": {"os": "linux", "architecture": "amd64"}}]}).encode(), INDEX
            ),
            "is not a digest",
        ),
        (manifest_answer(json.dumps({"manifests": {"not": "a list"}}).encode(), INDEX), "no list of manifests"),
    ],
)
def test_malformed_registry_answers_through_the_cli(answer: Answer, needle: str, tmp_path: Path) -> None:
    """`catalog sync` against each answer: one error naming the problem, nothing written."""
    with HostileRegistry(
        {**image_routes(REPO, "20.02-tf1-py3", _IMAGE), f"{BASE}/manifests/20.02-tf1-py3": answer}
    ) as reg:
        res = _timed(
            "catalog",
            "sync",
            "--registry",
            f"http://{reg.host}",
            "--release",
            "20.02",
            "--write",
            str(tmp_path / "catalog.json"),
            env={"XDG_CACHE_HOME": str(tmp_path / "cache")},
        )
    _one_error(res, needle)
    assert not (tmp_path / "catalog.json").exists() and not any((tmp_path / "cache").rglob("*.json"))


@pytest.mark.parametrize("printed", ['"[" * 100000 + "]" * 100000', '"[1, 2]"', '"not json"'])
def test_a_credential_helper_answer_of_the_wrong_shape_is_one_registry_error(printed: str, tmp_path: Path) -> None:
    """docker-credential-NAME's answer is external input too: nested past the JSON limit, or not the object
    docker's helpers print, it is one error naming the helper."""
    bin_dir, config = tmp_path / "bin", tmp_path / "docker"
    bin_dir.mkdir()
    config.mkdir()
    helper = bin_dir / "docker-credential-odd"
    helper.write_text(f"#!{sys.executable}\nprint({printed})\n")
    helper.chmod(0o755)
    login = {"status": 401, "headers": {"WWW-Authenticate": 'Basic realm="registry"'}}
    with HostileRegistry({f"{BASE}/manifests/20.02-tf1-py3": Answer(**login)}) as reg:  # type: ignore[arg-type]
        (config / "config.json").write_text(json.dumps({"credHelpers": {reg.host: "odd"}}))
        res = _timed(
            "catalog",
            "sync",
            "--registry",
            f"http://{reg.host}",
            "--release",
            "20.02",
            "--write",
            str(tmp_path / "catalog.json"),
            env={
                "DOCKER_CONFIG": str(config),
                "PATH": f"{bin_dir}:{os.environ['PATH']}",
                "XDG_CACHE_HOME": str(tmp_path / "cache"),
            },
        )
    _one_error(res, "docker-credential-odd answered something that is not its JSON")
    assert not (tmp_path / "catalog.json").exists()


# -- files envpin reads: FIFOs and devices ------------------------------------------------------------------------
@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero"])
@pytest.mark.parametrize(
    ("args", "env_name", "needle"),
    [
        (("audit", "{}"), None, "not a regular file"),
        (("diff", "{}", "{}"), None, "not a regular file"),
        (("lock", "--check", "--lock", "{}"), None, "not a regular file"),
        (("catalog",), "ENVPIN_CATALOG", "not a regular file"),
    ],
)
def test_a_fifo_or_a_device_where_a_file_is_read_is_one_error(
    args: tuple[str, ...], env_name: str | None, needle: str, kind: str, fifo: Path
) -> None:
    path = str(fifo) if kind == "fifo" else kind
    env = {env_name: path} if env_name else None
    _one_error(_timed(*(a.format(path) for a in args), env=env), needle)


def test_build_context_files_that_are_fifos_or_devices_are_findings_not_hangs(tmp_path: Path) -> None:
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    os.mkfifo(ctx / "requirements.txt")
    names = ["requirements.txt"]
    if os.geteuid() == 0:  # a device node inside the build context (only root may make one)
        os.mknod(ctx / "zero.txt", 0o644 | stat.S_IFCHR, os.makedev(1, 5))
        names.append("zero.txt")
    (ctx / "Dockerfile").write_text(
        "FROM ubuntu:22.04\n"
        + "".join(f"COPY {n} /r{i}.txt\nRUN pip install -r /r{i}.txt\n" for i, n in enumerate(names))
    )
    res = _timed("audit", "--tf", "2.4", str(ctx / "Dockerfile"))
    assert res.code == 1 and "Traceback" not in res.stderr, res.stderr
    for name in names:
        assert f"cannot read requirements file {ctx / name}" in res.stdout and "not a regular file" in res.stdout


def test_a_pyproject_fifo_beside_the_dockerfile_does_not_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pyproject.toml")
    (tmp_path / "Dockerfile").write_text("FROM ubuntu:22.04\n")
    res = _timed("audit", "--tf", "2.4", "Dockerfile", cwd=tmp_path)
    assert res.code in (1, 2) and "Traceback" not in res.stderr


# -- files envpin writes: devices, FIFOs, folders, dangling and looping links, long names -------------------------
def _is_device(path: str) -> bool:
    return stat.S_ISCHR(os.stat(path).st_mode)


def test_an_output_that_is_a_character_device_is_written_into_never_replaced(tmp_path: Path) -> None:
    res = _timed("fleet", "manifest", "--kubernetes", "--image", "example.invalid/tf:1", "--out", "/dev/null")
    assert res.code == 0, res.stderr
    assert _is_device("/dev/null")
    (tmp_path / "Dockerfile").write_text("FROM ubuntu:22.04\nRUN pip install flask\n")
    res = _timed(
        "audit", "--tf", "2.4", "--fix", "--no-resolve", "--fix-out", "/dev/null", str(tmp_path / "Dockerfile")
    )
    assert res.code in (0, 1) and "Traceback" not in res.stderr, res.stderr
    assert _is_device("/dev/null")


@pytest.mark.parametrize(
    "args",
    [
        ("probe", "--no-selftest", "--output", "{}"),
        ("probe", "--no-selftest", "--markdown", "{}"),
        ("fleet", "manifest", "--kubernetes", "--image", "example.invalid/tf:1", "--out", "{}"),
        ("fleet", "report", "{reports}", "--html", "{}"),
    ],
)
def test_a_file_output_replaced_keeps_its_permissions(args: tuple[str, ...], tmp_path: Path) -> None:
    """A report made private (chmod 600) stays private when envpin writes it again; a new one is 0644."""
    reports = tmp_path / "reports"
    reports.mkdir()
    assert run_envpin("probe", "--no-selftest", "-o", str(reports / "a.json")).code == 0
    for name, before, after in (("private", 0o600, 0o600), ("group", 0o640, 0o640), ("new", None, 0o644)):
        out = tmp_path / name
        if before is not None:
            out.write_text("old\n")
            out.chmod(before)
        res = _timed(*(a.format(out, reports=reports) for a in args))
        assert res.code in (0, 1) and "error" not in res.stderr, res.stderr
        assert out.read_text() != "old\n" and stat.S_IMODE(out.stat().st_mode) == after, (name, oct(out.stat().st_mode))


@pytest.mark.parametrize("what", ["fifo", "folder", "dangling", "loop"])
def test_outputs_envpin_never_replaces(what: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    make_unreadable(out, what)
    res = _timed("fleet", "manifest", "--kubernetes", "--image", "example.invalid/tf:1", "--out", str(out))
    _one_error(res)
    assert not (tmp_path / "missing").exists()
    assert out.is_symlink() or out.is_dir() or stat.S_ISFIFO(out.lstat().st_mode)


@pytest.mark.parametrize("what", ["folder", "socket"])
@pytest.mark.parametrize(
    "args",
    [
        ("probe", "--no-selftest", "--output", "{}"),
        ("probe", "--no-selftest", "--markdown", "{}"),
        ("fleet", "manifest", "--kubernetes", "--image", "example.invalid/tf:1", "--out", "{}"),
        ("fleet", "report", "{reports}", "--html", "{}"),
    ],
)
def test_a_file_output_that_is_a_folder_or_socket_is_refused_before_any_work(
    what: str, args: tuple[str, ...], tmp_path: Path
) -> None:
    import socket

    out = tmp_path / "out"
    if what == "folder":
        out.mkdir()
    else:
        with socket.socket(socket.AF_UNIX) as sock:
            sock.bind(str(out))  # the socket file stays after the socket is closed
    reports = tmp_path / "reports"
    reports.mkdir()  # no report in it: refusing the output first is what makes this one error about --html
    option = args[args.index("{}") - 1]
    line = _one_error(_timed(*(a.format(out, reports=reports) for a in args)), f"{option}: {out}")
    assert ("folder" if what == "folder" else "socket") in line
    assert out.is_dir() if what == "folder" else stat.S_ISSOCK(out.lstat().st_mode)


def test_render_through_a_dangling_link_creates_no_parent(tmp_path: Path) -> None:
    link = tmp_path / "env"
    link.symlink_to(tmp_path / "nowhere" / "sub" / "env")
    _one_error(_timed("render", "--ngc", "20.02", "--tf", "2.1", "--out", str(link)), "does not exist")
    assert not (tmp_path / "nowhere").exists() and link.is_symlink()


def test_render_with_a_name_at_name_max_and_one_past_it(tmp_path: Path) -> None:
    longest = tmp_path / ("e" * 255)
    res = _timed("render", "--ngc", "20.02", "--tf", "2.1", "--out", str(longest))
    assert res.code == 0, res.stderr
    assert (longest / "envpin.lock").is_file() and sorted(p.name for p in tmp_path.iterdir()) == [longest.name]
    res = _timed("render", "--ngc", "20.02", "--tf", "2.1", "--out", str(longest), "--force")
    assert res.code == 0, res.stderr  # the staged swap of an existing folder too
    _one_error(
        _timed("render", "--ngc", "20.02", "--tf", "2.1", "--out", str(tmp_path / ("e" * 256))),
        "names are limited to 255",
    )


# -- as a user without root's permission override -----------------------------------------------------------------
_NO_OVERRIDE = [
    "setpriv",
    "--bounding-set=-dac_override,-dac_read_search,-fowner",
    "--inh-caps=-dac_override,-dac_read_search,-fowner",
    "--",
]


def _unprivileged(*args: str) -> Result:
    """envpin as root without CAP_DAC_OVERRIDE: file permissions apply as to any other user (the test venv's
    interpreter lives under /root, which user nobody cannot enter)."""
    script = Path(sys.executable).with_name("envpin")
    proc = subprocess.run([*_NO_OVERRIDE, str(script), *args], capture_output=True, text=True, timeout=BOUND_S)
    return Result(proc.returncode, proc.stdout, proc.stderr)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to drop the permission override (setpriv)"
)
def test_a_read_only_folder_is_one_error_for_every_writer(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "Dockerfile").write_text("FROM ubuntu:22.04\nRUN pip install flask\n")
    ro.chmod(0o555)
    try:
        for args in (
            ("render", "--ngc", "20.02", "--tf", "2.1", "--out", str(ro / "env")),
            ("fleet", "manifest", "--kubernetes", "--image", "x.invalid/tf:1", "--out", str(ro / "m.yaml")),
            ("probe", "--no-selftest", "--output", str(ro / "r.json")),
            ("audit", "--tf", "2.4", "--fix", "--no-resolve", str(ro / "Dockerfile")),
        ):
            _one_error(_unprivileged(*args), "Permission denied")
        assert sorted(p.name for p in ro.iterdir()) == ["Dockerfile"]
    finally:
        ro.chmod(0o755)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to drop the permission override (setpriv)"
)
def test_a_folder_of_reports_that_can_be_listed_but_not_entered_is_one_error(tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    reports.mkdir()
    assert run_envpin("probe", "--no-selftest", "-o", str(reports / "a.json")).code == 0
    reports.chmod(0o644)  # names readable, files not reachable
    try:
        _one_error(
            _unprivileged("fleet", "report", str(reports)), f"cannot read the folder {reports}", "Permission denied"
        )
    finally:
        reports.chmod(0o755)
    tmp_path.chmod(0o644)  # the folder itself not reachable
    try:
        _one_error(_unprivileged("fleet", "report", str(reports)), f"cannot read {reports}", "Permission denied")
    finally:
        tmp_path.chmod(0o755)


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None, reason="needs root to drop the permission override (setpriv)"
)
@pytest.mark.parametrize(
    "args",
    [
        ("probe", "--no-selftest", "--out", "{}"),
        ("probe", "--no-selftest", "--output", "{}"),
        ("fleet", "manifest", "--kubernetes", "--image", "x.invalid/tf:1", "--out", "{}"),
        ("fleet", "report", "{report}", "--html", "{}"),
        ("fleet", "probe", "--slurm", "--out", "{}"),
    ],
)
def test_an_output_on_a_path_that_cannot_be_entered_is_one_error(args: tuple[str, ...], tmp_path: Path) -> None:
    report = tmp_path / "a.json"
    assert run_envpin("probe", "--no-selftest", "-o", str(report)).code == 0
    closed = tmp_path / "closed"
    (closed / "sub").mkdir(parents=True)
    closed.chmod(0o644)  # its names can be listed, nothing under it reached
    target = closed / "sub" / "out"
    try:
        option = args[args.index("{}") - 1]
        _one_error(_unprivileged(*(a.format(target, report=report) for a in args)), f"{option}: ", "Permission denied")
    finally:
        closed.chmod(0o755)
    assert list((closed / "sub").iterdir()) == []


# -- a closed stdout -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [("catalog",), ("catalog", "show", "20.02-tf2-py3"), ("probe", "--no-selftest")])
def test_a_closed_stdout_ends_quietly_with_141(args: tuple[str, ...]) -> None:
    read_end, write_end = os.pipe()
    os.close(read_end)
    script = Path(sys.executable).with_name("envpin")
    try:
        proc = subprocess.run(
            [str(script), *args], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=BOUND_S
        )
    finally:
        os.close(write_end)
    assert proc.returncode == 141 and proc.stderr == "", (proc.returncode, proc.stderr)


def _with_closed(fd: int, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The console script run with file descriptor `fd` closed (the shell's `>&-` or `2>&-`): Python then has
    no sys.stdout (or sys.stderr) at all."""
    script = Path(sys.executable).with_name("envpin")
    other = subprocess.PIPE
    return subprocess.run(
        [str(script), *args],
        stdout=None if fd == 1 else other,
        stderr=None if fd == 2 else other,
        text=True,
        timeout=BOUND_S,
        cwd=cwd,
        pass_fds=(),
        close_fds=True,
        preexec_fn=lambda: os.close(fd),
    )


@pytest.mark.parametrize(
    "args", [("--version",), ("catalog",), ("--help",), ("audit", "Dockerfile"), ("recipe", "--ngc", "20.02-tf2-py3")]
)
def test_a_stdout_the_shell_closed_is_no_internal_error(args: tuple[str, ...], tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3\n")
    proc = _with_closed(1, *args, cwd=tmp_path)
    expected = 1 if args[0] == "audit" else 0  # the audit's findings still decide its exit status
    assert proc.returncode == expected and proc.stderr == "", (proc.returncode, proc.stderr)


@pytest.mark.parametrize("args", [("audit", "missing"), ("recipe", "--ngc", "99.99"), ("catalog", "--nope")])
def test_a_stderr_the_shell_closed_keeps_the_bad_input_exit_status(args: tuple[str, ...], tmp_path: Path) -> None:
    proc = _with_closed(2, *args, cwd=tmp_path)
    assert proc.returncode == 2, (proc.returncode, proc.stdout)


# -- Dockerfiles whose variables or scopes grow -------------------------------------------------------------------
# Peak memory is this process's own high-water mark (VmHWM), not getrusage's ru_maxrss: Linux carries
# ru_maxrss across exec, so a child of a large pytest process would report the parent's size.
_HWM = """
def hwm_mib():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")) // 1024
"""
_PEAK_RSS = (
    _HWM
    + """
import sys, time
from envpin.audit.parser import read
started = time.monotonic()
df = read(sys.argv[1], tolerant=True)
print(len(df.instructions), len(df.problems), time.monotonic() - started, hwm_mib())
"""
)


def _parse_in_child(path: Path) -> tuple[int, int, float, int]:
    """(instructions, problems, seconds, peak RSS in MiB) of parsing `path` in a fresh interpreter."""
    proc = subprocess.run([sys.executable, "-c", _PEAK_RSS, str(path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    n, problems, seconds, rss = proc.stdout.split()
    return int(n), int(problems), float(seconds), int(rss)


def _baseline_rss() -> int:
    proc = subprocess.run(
        [sys.executable, "-c", _HWM + "import envpin.audit.parser\nprint(hwm_mib())"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    return int(proc.stdout)


def test_arguments_that_double_each_other_forty_times_stay_bounded(tmp_path: Path) -> None:
    lines = ["ARG A0=xx"] + [f"ARG A{i}=${{A{i - 1}}}${{A{i - 1}}}" for i in range(1, 41)]
    lines += ["FROM ubuntu:$A40", "ARG B0=yy"] + [f"ARG B{i}=$B{i - 1}$B{i - 1}" for i in range(1, 41)]
    lines += ["ENV C=$B40", "RUN echo $B40 $B39 $B38"]
    (tmp_path / "Dockerfile").write_text("\n".join(lines) + "\n")
    assert len((tmp_path / "Dockerfile").read_bytes()) < 2000
    _, problems, seconds, rss = _parse_in_child(tmp_path / "Dockerfile")
    # each chain passes the bound at A20/B20; the references kept as written then double again from a few
    # characters and pass it once more before line 40
    assert 2 <= problems <= 4 and seconds < BOUND_S and rss < _baseline_rss() + 64
    res = _timed("audit", "--tf", "2.4", str(tmp_path / "Dockerfile"))
    assert "longer than 65,536 characters" in res.stdout and "Traceback" not in res.stderr


def test_substitution_in_all_of_a_file_is_bounded_with_one_finding(tmp_path: Path) -> None:
    """Every ENV one character longer than the last: the values together pass the file's bound once."""
    lines = ["FROM ubuntu:22.04"] + [f"ENV V{i}=${{V{max(i - 1, 0)}}}a" for i in range(20_000)]
    (tmp_path / "Dockerfile").write_text("\n".join(lines) + "\n")
    n, problems, seconds, rss = _parse_in_child(tmp_path / "Dockerfile")
    assert problems == 1 and n == 20_000 and seconds < BOUND_S and rss < _baseline_rss() + 100


def _scope_shapes(n: int) -> dict[str, str]:
    """Shapes in which each ARG/ENV adds to what every later instruction sees (quadratic with copied scopes)."""
    return {
        "env lines": "FROM ubuntu:22.04\n" + "".join(f"ENV V{i}=value{i}\n" for i in range(n)),
        "arg lines": "FROM ubuntu:22.04\n" + "".join(f"ARG A{i}=value{i}\n" for i in range(n)),
        "global args and stages": "".join(f"ARG G{i}=g{i}\n" for i in range(n))
        + "".join(f"FROM ubuntu:22.04 AS s{i}\nARG G{i}\n" for i in range(n // 10)),
        "a chain of stages": "FROM ubuntu:22.04 AS s0\n"
        + "".join(f"FROM s{i} AS s{i + 1}\nENV V{i}=v{i} W=$V{i}\nRUN echo $NOPE\n" for i in range(n // 4)),
    }


@pytest.mark.parametrize("shape", sorted(_scope_shapes(1)))
def test_scopes_grow_linearly(shape: str, tmp_path: Path) -> None:
    """Peak memory of 20,000 lines of each shape: under 100 MB in all (the issue's bound), and the growth from
    5,000 to 20,000 lines about four times the growth to 5,000 (linear), not sixteen (quadratic)."""
    base = _baseline_rss()
    grown = {}
    for n in (5_000, 20_000):
        (tmp_path / "Dockerfile").write_text(_scope_shapes(n)[shape])
        _, problems, seconds, rss = _parse_in_child(tmp_path / "Dockerfile")
        assert problems == 0 and seconds < BOUND_S
        grown[n] = max(rss - base, 1)
    assert base + grown[20_000] < 100, (base, grown)
    assert grown[20_000] < 8 * max(grown[5_000], 4), grown


def _audit_exit_peak_mb(dockerfile: Path) -> tuple[int, int, str]:
    """`envpin audit --tf 2.4 DOCKERFILE`: its exit code, its peak resident memory in MiB (its process alone,
    measured by a parent that holds nothing else) and the parent's stderr."""
    script = Path(sys.executable).with_name("envpin")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import resource, subprocess, sys\n"
            "rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode\n"
            "print(rc, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024)",
            str(script),
            "audit",
            "--tf",
            "2.4",
            str(dockerfile),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    rc, rss = (int(x) for x in proc.stdout.split())
    return rc, rss, proc.stderr


def test_a_20000_line_dockerfile_of_env_lines_is_audited_under_100_mb(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(_scope_shapes(20_000)["env lines"])
    rc, rss, err = _audit_exit_peak_mb(tmp_path / "Dockerfile")
    assert rc == 1 and rss < 100, (rc, rss, err)


# -- secrets in new shapes -----------------------------------------------------------------------------------------


def test_credentials_in_flag_lists_never_reach_a_report() -> None:
    """Through the real CLI: variables the probe records, holding credentials in shapes a flag list or a
    command line has (a quoted value, a header, a compound name, an '@' inside a URL's password)."""
    planted = {
        "TF_EXTRA_ARGS": '--password "hunter2xyz" -v',
        "TF_HDRS": "Authorization: token abcdef123456",
        "TF_OPTS": 'password="two words"',
        "TF_TRAIN_CMD": "env PGPASSWORD=pgsecret1 psql",
        "TF_MIRROR_ARGS": "--index-url https://user:p@ssw0rd@pypi.example.invalid/simple --no-deps",
    }
    res = run_envpin("probe", "--no-selftest", env=planted)
    assert res.code == 0, res.stderr
    env = json.loads(res.stdout)["env"]
    for secret in ("hunter2xyz", "abcdef123456", "words", "pgsecret1", "ssw0rd"):
        assert secret not in res.stdout, secret
    assert all(name in env for name in planted)  # recorded (redacted), not dropped
    assert env["TF_EXTRA_ARGS"]["value"] == "--password <redacted> -v"
    assert env["TF_TRAIN_CMD"]["value"] == "env PGPASSWORD=<redacted> psql"


# -- --fix on suppressions, a byte order mark and CR LF ------------------------------------------------------------
_DIGEST = "@sha256:" + "a" * 64


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_fix_keeps_suppressions_bom_and_line_ends_and_a_second_fix_changes_nothing(
    newline: str, tmp_path: Path
) -> None:
    lines = [
        "# syntax=docker/dockerfile:1",
        f"FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3{_DIGEST}",
        "# envpin: ignore=pip-unpinned",
        "RUN pip install flask && curl -fsSL https://x.invalid/i.sh | sh",
    ]
    original = "\ufeff" + newline.join(lines) + newline
    (tmp_path / "Dockerfile").write_bytes(original.encode("utf-8"))
    first = _timed(
        "audit",
        "--tf",
        "2.1",
        "--fix",
        "--no-resolve",
        "--no-context",
        "--fix-out",
        str(tmp_path / "once"),
        str(tmp_path / "Dockerfile"),
    )
    assert first.code == 1 and "Traceback" not in first.stderr, first.stderr
    once = (tmp_path / "once").read_bytes()
    assert once.startswith(b"\xef\xbb\xbf") and once.count(newline.encode()) == once.count(b"\n")
    text = once.decode("utf-8").lstrip("\ufeff").split(newline)
    mark = text.index("# envpin: ignore=pip-unpinned")
    assert text[mark + 1].startswith("RUN pip install flask")  # still attached to its instruction
    assert "pip-unpinned" not in first.stdout
    again = _timed(
        "audit",
        "--tf",
        "2.1",
        "--fix",
        "--no-resolve",
        "--no-context",
        "--fix-out",
        str(tmp_path / "twice"),
        str(tmp_path / "once"),
    )
    assert "pip-unpinned" not in again.stdout
    assert (tmp_path / "twice").read_bytes() == once


# -- configuration and catalog files with wrong types -------------------------------------------------------------
def test_an_audit_configuration_with_a_5000_digit_number_is_one_error(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text("FROM ubuntu:22.04\n")
    (tmp_path / "pyproject.toml").write_text("[tool.envpin.audit]\nfail-on = " + "9" * 5000 + "\n")
    _one_error(_timed("audit", "--tf", "2.4", "Dockerfile", cwd=tmp_path), "number too long")


@pytest.mark.parametrize(
    ("where", "value", "needle"),
    [
        (["sources"], [], "is invalid: sources: must be an object"),
        (["releases", "20.02", "flavors"], ["tf2"], "is invalid: releases['20.02'].flavors: must be an object"),
        (
            ["releases", "20.02", "flavors", "tf2", "tag"],
            2002,
            "is invalid: releases['20.02'].flavors.tf2.tag: must be a string",
        ),
        (
            ["releases", "20.02", "fields", "cuda", "source"],
            ["a"],
            "releases['20.02'].fields.cuda.source: must be a string or null",
        ),
        (["missing_months", "20.04"], "none", "is invalid: missing_months['20.04']: must be an object"),
    ],
)
@pytest.mark.parametrize(
    "args", [("catalog",), ("catalog", "show", "20.02-tf2-py3"), ("render", "--ngc", "20.02", "--tf", "2.1")]
)
def test_catalog_files_with_wrong_types_are_one_error(
    where: list[str], value: object, needle: str, args: tuple[str, ...], tmp_path: Path
) -> None:
    from importlib import resources

    data = json.loads((resources.files("envpin") / "data" / "catalog.json").read_text(encoding="utf-8"))
    node = data
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    (tmp_path / "catalog.json").write_text(json.dumps(data))
    out = ("--out", str(tmp_path / "env")) if args[0] == "render" else ()
    _one_error(_timed(*args, *out, env={"ENVPIN_CATALOG": str(tmp_path / "catalog.json")}), needle)
    assert not (tmp_path / "env").exists()


# -- paths the system cannot follow, wherever a command reads one ------------------------------------------------
@pytest.mark.parametrize("kind", ["long name", "loop", "long path"])
@pytest.mark.parametrize(
    "args",
    [
        ("audit", "{}"),
        ("diff", "{}", "{}"),
        ("lock", "--check", "--lock", "{}"),
        ("verify", "--lock", "{}"),
        ("fleet", "report", "{}"),
        ("doctor", "--lock", "{}"),
        ("render", "--ngc", "20.02", "--tf", "2.1", "--requirements", "{}"),
    ],
)
def test_paths_that_cannot_be_followed_are_one_error(kind: str, args: tuple[str, ...], tmp_path: Path) -> None:
    if kind == "long name":
        path = tmp_path / ("n" * 256)
    elif kind == "loop":
        path = tmp_path / "l1"
        path.symlink_to(tmp_path / "l2")
        (tmp_path / "l2").symlink_to(path)
    else:
        path = tmp_path / ("d/" * 2100 + "x")
    _one_error(_timed(*(a.format(path) for a in args), cwd=tmp_path))


def test_run_lines_that_expand_large_values_stay_linear(tmp_path: Path) -> None:
    """2,000 RUN lines each expanding three values of 8 to 32 KiB (56 KiB in all, under the bound): every rule
    reads the expanded line, and the whole audit stays a matter of seconds and a few dozen MB."""
    lines = ["FROM ubuntu:22.04", "ARG A0=xxxxxxxx"] + [f"ARG A{i}=$A{i - 1}$A{i - 1}" for i in range(1, 13)]
    lines += ["RUN echo $A12 $A11 $A10"] * 2000 + ["RUN echo $A12$A12$A12"]  # the last one passes the bound
    (tmp_path / "Dockerfile").write_text("\n".join(lines) + "\n")
    started = time.monotonic()
    rc, rss, err = _audit_exit_peak_mb(tmp_path / "Dockerfile")
    assert rc == 1 and rss < 100 and time.monotonic() - started < BOUND_S, (rc, rss, err)


# -- the probe: FIFOs under its root and huge files named by its variables -----------------------------
def test_the_probe_never_waits_on_a_fifo_or_reads_a_huge_file(tmp_path: Path) -> None:
    """FIFOs where /proc, /etc and the plan are read, and a 10 GiB lock: field errors, in well under a second."""
    root = tmp_path / "root"
    for name in ("proc/cpuinfo", "proc/meminfo", "etc/os-release", "etc/ld.so.cache", "opt/plan.json"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(root / name)
    with open(root / "opt" / "envpin.lock", "wb") as fh:  # paths the variables name are read under --root
        fh.truncate(10 << 30)  # sparse: 10 GiB that cost no disk
    started = time.monotonic()
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "envpin.probe",
            "--no-selftest",
            "--root",
            str(root),
            "--json",
            str(tmp_path / "r.json"),
        ],
        capture_output=True,
        text=True,
        timeout=BOUND_S,
        env={**os.environ, "ENVPIN_LOCK": "/opt/envpin.lock", "ENVPIN_PLAN": "/opt/plan.json"},
    )
    assert proc.returncode == 0 and time.monotonic() - started < BOUND_S, proc.stderr
    text = (tmp_path / "r.json").read_text()
    assert "not a regular file" in text and "larger than 67108864 bytes" in text


def test_a_fifo_with_a_reader_and_dev_stdout_are_written_into(tmp_path: Path) -> None:
    """As `probe -o` does: a FIFO someone reads gets the bytes; /dev/stdout reaches the file the shell
    redirected it to (appended, so `>>` keeps what was there) and is never replaced."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    script = str(Path(sys.executable).with_name("envpin"))
    with open(tmp_path / "read", "wb") as sink:  # a file, not a pipe: the reader never waits on the test
        reader = subprocess.Popen(["cat", str(fifo)], stdout=sink)
        try:
            res = _timed("fleet", "manifest", "--kubernetes", "--image", "x.invalid/tf:1", "--out", str(fifo))
            reader.wait(timeout=BOUND_S)
        finally:
            reader.kill()
    got = (tmp_path / "read").read_bytes()
    assert res.code == 0 and got.startswith(b"# envpin fleet") and stat.S_ISFIFO(fifo.lstat().st_mode)
    redirected = tmp_path / "manifest.yaml"
    redirected.write_text("kept\n")
    with open(redirected, "ab") as out:
        proc = subprocess.run(
            [
                "sh",
                "-c",
                'exec "$0" fleet manifest --kubernetes --image x.invalid/tf:1 --out /dev/stdout 2>/dev/null',
                script,
            ],
            stdout=out,
            timeout=BOUND_S,
        )
    assert proc.returncode == 0
    assert redirected.read_text().startswith("kept\n# envpin fleet") and _is_device("/dev/null")


@pytest.mark.parametrize(
    "args",
    [
        ("fleet", "manifest", "--kubernetes", "--image", "example.invalid/tf:1", "--out", "-"),
        ("fleet", "report", "{reports}", "--html", "-"),
        ("probe", "--no-selftest", "--out", "-"),
        ("fleet", "probe", "--slurm", "--out", "-"),
    ],
)
def test_a_dash_where_dash_is_not_stdout_writes_no_file_named_dash(args: tuple[str, ...], tmp_path: Path) -> None:
    """`-` means stdout to `probe -o`; an option that does not read it so refuses it instead of creating a
    file (or folder) named '-' in the working folder."""
    reports = tmp_path / "reports"
    reports.mkdir()
    assert run_envpin("probe", "--no-selftest", "-o", str(reports / "a.json")).code == 0
    work = tmp_path / "work"
    work.mkdir()
    res = run_envpin(*(a.format(reports=reports) for a in args), cwd=work)
    option = args[-2]
    line = _one_error(res, f"{option} -: ")
    hint = res.stderr.splitlines()[1]
    assert ("name a folder" if "probe" in args else f"{option} /dev/stdout") in hint, (line, hint)
    assert list(work.iterdir()) == []


@pytest.mark.parametrize("record", ["[" * 100_000 + "]" * 100_000, '["a list"]', "{broken"])
def test_a_damaged_build_record_is_no_build_not_an_internal_error(record: str, tmp_path: Path) -> None:
    """envpin's own build record (state folder) damaged: read as "never built here", as its docstring says."""
    from envpin.image import buildstate

    env_dir = tmp_path / "env"
    shutil.copytree(Path(__file__).resolve().parents[2] / "images" / "20.02-tf2", env_dir)
    lock = env_dir / "envpin.lock"
    inputs_hash = next(
        line.split('"')[1] for line in lock.read_text().splitlines() if line.startswith("inputs_hash = ")
    )
    state = tmp_path / "state"
    (state / "builds").mkdir(parents=True)
    (state / "builds" / f"{buildstate._key(inputs_hash)}.json").write_text(record)
    res = _timed("verify", "--lock", str(lock), "--record", env={"ENVPIN_STATE_DIR": str(state)})
    _one_error(res, "was built on this machine")


@pytest.mark.parametrize(
    "args",
    [
        ("fleet", "manifest", "--kubernetes", "--image", "example.invalid/tf:1", "--out", "/dev/fd/1"),
        ("fleet", "report", "{report}", "--html", "/dev/fd/1"),
    ],
)
def test_an_output_to_stdout_redirected_to_a_file_keeps_every_byte_in_order(
    args: tuple[str, ...], tmp_path: Path
) -> None:
    """`--out /dev/stdout > file`: the output is written through stdout's own descriptor, so the command's
    own lines after it ('wrote ...') follow it instead of overwriting its first bytes."""
    report = tmp_path / "a.json"
    assert run_envpin("probe", "--no-selftest", "-o", str(report)).code == 0
    redirected = tmp_path / "out.txt"
    script = Path(sys.executable).with_name("envpin")
    with redirected.open("w") as out:
        proc = subprocess.run(
            [str(script), *(a.format(report=report) for a in args)],
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
            timeout=BOUND_S,
        )
    assert proc.returncode == 0, proc.stderr
    text = redirected.read_text()
    if args[1] == "manifest":  # the manifest, then the result line
        assert text.startswith("# envpin fleet probe: runs the envpin probe once on every NVIDIA GPU node")
        assert text.endswith("\nwrote /dev/fd/1\n") and text.count("wrote") == 1, text[-200:]
    else:  # the page (written while the command works), then the verdict and tables; the note on stderr
        assert text.startswith("<!DOCTYPE html>\n") and "</html>\n1 node consistent\n" in text, text[:200]
        assert "wrote /dev/fd/1" in proc.stderr


@pytest.mark.parametrize(
    "args",
    [
        ("recipe", "--ngc", "20.02\x1b[31m\x07"),
        ("fleet", "manifest", "--kubernetes", "--image", "x\x1b]0;title\x07"),
        ("render", "--stock", "2.1\x1b[2J"),
    ],
)
def test_control_characters_in_a_value_are_escaped_in_its_error(args: tuple[str, ...]) -> None:
    """A value quoted in an error line never reaches the terminal raw: ESC and BEL are shown as \\x1b, \\x07."""
    res = run_envpin(*args)
    line = _one_error(res)
    assert "\x1b" not in res.stderr and "\x07" not in res.stderr, repr(res.stderr)
    assert "\\x1b" in line, line
