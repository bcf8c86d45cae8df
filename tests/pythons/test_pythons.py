"""The Python versions envpin says it supports, run rather than claimed.

The image side (the probe, envpin.pyz, ``envpin.enable_determinism``, the Slurm node task) runs under real
CPython 3.6 to 3.9 -- the interpreters NGC images ship -- with warnings as errors and nothing on stderr, and
its functions must give the host's results on every one of them (tests/pythons/pythons_calls.py). `vermin`
only reads the code; Python 3.6's re.split, for one, accepts the same pattern as 3.7 and splits differently.

The host side (3.10 to 3.13) is run by scripts/pythons.sh; tests/unit/test_pythons.py holds the metadata to
what it runs. Interpreters come from pyenv or PATH; a missing one skips, and with CI=true fails (the folder
gives the marker ``pythons``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from envpin.probe import fields, load_schema, secrets
from tests.conftest import REPO

#: What NGC images ship (19.xx-20.xx: 3.6; later ones 3.8 and newer); the probe's side must run on each.
IMAGE_PYTHONS = ("3.6", "3.7", "3.8", "3.9")
CALLS = Path(__file__).with_name("pythons_calls.py")
NODETASK = REPO / "envpin" / "fleet" / "nodetask.py"
# Only these reach the old interpreters: a fixed PATH, the C locale (3.6 then has an ASCII stdout), and
# warnings as errors also in the processes they start (the node task starts the probe).
BASE_ENV = {"PATH": "/usr/bin:/bin", "PYTHONWARNINGS": "error", "HOME": "/nonexistent"}


def find_python(minor: str) -> str | None:
    """The newest CPython `minor` here: pyenv's real binary (a shim needs pyenv's environment), else PATH."""
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    versions = sorted(
        root.glob(f"versions/{minor}.*/bin/python{minor}"),
        key=lambda p: [int(x) for x in re.findall(r"\d+", p.parts[-3])],
    )
    if versions:
        return str(versions[-1])
    exe = shutil.which(f"python{minor}")
    return exe if exe and "/shims/" not in exe else None


@pytest.fixture(params=IMAGE_PYTHONS)
def old_python(request: pytest.FixtureRequest) -> str:
    """Each image-side interpreter; a missing one skips with the reason (a failure with CI=true)."""
    exe = find_python(request.param)
    if exe is None:
        pytest.skip(
            f"no CPython {request.param} on this machine (pyenv install {request.param}, or put "
            f"python{request.param} on PATH)"
        )
    return exe


def run(
    cmd: list[str], *, env: dict[str, str] | None = None, stdin: bytes | None = None, timeout: int = 120
) -> subprocess.CompletedProcess[bytes]:
    """`cmd` with only BASE_ENV and `env`, in / (with -c or -m the working directory is on sys.path, and the
    checkout's envpin/ would shadow the archive's)."""
    return subprocess.run(
        cmd, env={**BASE_ENV, **(env or {})}, input=stdin, capture_output=True, timeout=timeout, check=False, cwd="/"
    )


def python_version(python: str) -> str:
    out = run([python, "-c", "import platform; print(platform.python_version())"])
    return out.stdout.decode().strip()


def valid_report(text: str | bytes, python: str) -> dict[str, Any]:
    """The report parsed and checked: schema, the interpreter it ran on, its fingerprint as the host
    computes it, and no field that failed (the boot id is not readable in every sandbox)."""
    report = json.loads(text)
    jsonschema.validate(report, load_schema())
    assert report["python"]["version"]["value"] == python_version(python)
    assert report["fingerprint"] == fields.fingerprint(report)
    assert [e for e in report["probe"]["errors"]["value"] if e != "host.boot_id"] == []
    return report


@pytest.fixture(scope="module")
def pyz(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """envpin.pyz as the host builds it for images."""
    from envpin.environment.payload import PAYLOAD_NAME, payload

    path = tmp_path_factory.mktemp("payload") / PAYLOAD_NAME
    path.write_bytes(payload())
    return path


# A recorded variable holding a credential, one with non-ASCII text (3.6 in the C locale has an ASCII stdout).
PLANTED_ENV = {
    "NCCL_SOCKET_IFNAME": "ghp_" + "Zx9Cv8Bn7Mm6Lk5Jh4Gf3Dd2Ss1Aa0Qq",
    "CUDA_DEVICE_ORDER": "PCI_BÜS_ID",
    "XLA_FLAGS": "--xla_dump_to=/tmp/x --some_token=flagtok3n7 --privateKey=k3yv4lue",
}


# --- the probe --------------------------------------------------------------------------------------------


def test_probe_from_the_source_tree(old_python: str, tmp_path: Path) -> None:
    """python -m envpin.probe with -I -S (standard library only): reports written, nothing on stderr, no
    planted secret anywhere, the same fingerprint rule as the host."""
    stub = (
        f"import sys; sys.path.insert(0, {str(REPO)!r}); import runpy; runpy.run_module('envpin.probe', "
        "run_name='__main__', alter_sys=True)"
    )
    out = tmp_path / "reports"
    res = run(
        [old_python, "-W", "error", "-I", "-S", "-c", stub, "--no-selftest", "--out", str(out), "--markdown", "-"],
        env=PLANTED_ENV,
    )
    assert (res.returncode, res.stderr.decode()) == (0, "")
    names = sorted(p.name for p in out.iterdir())
    assert [Path(n).suffix for n in names] == [".json", ".md"]
    report = valid_report((out / names[0]).read_bytes(), old_python)
    assert report["env"]["CUDA_DEVICE_ORDER"]["value"] == "PCI_BÜS_ID"
    assert report["env"]["XLA_FLAGS"]["value"] == "--xla_dump_to=/tmp/x --some_token=<redacted> --privateKey=<redacted>"
    assert report["env"]["NCCL_SOCKET_IFNAME"]["redacted"] is True
    for blob in ((out / names[0]).read_text(), (out / names[1]).read_text(), res.stdout.decode()):
        for secret in ("Zx9Cv8Bn7Mm6", "flagtok3n7", "k3yv4lue"):
            assert secret not in blob
    # The default run: the self-test would run where TensorFlow is; here the report says why it did not.
    res = run([old_python, "-W", "error", "-I", "-S", "-c", stub, "--json", "-", "--anonymize"])
    assert res.returncode == 0 and res.stderr.decode().startswith("self-test skipped: TensorFlow is not installed")
    assert len(res.stderr.decode().splitlines()) == 1
    assert valid_report(res.stdout, old_python)["host"]["hostname"]["value"] == secrets.HOST


def test_probe_with_a_distributed_stack(old_python: str, tmp_path: Path) -> None:
    """An ~/.nccl.conf, NCCL_CONF_FILE, a topology file and TF_CONFIG: the old interpreter's distributed
    section is the host's, with nothing on stderr and no address or host of the cluster in it."""
    stub = (
        f"import sys; sys.path.insert(0, {str(REPO)!r}); import runpy; runpy.run_module('envpin.probe', "
        "run_name='__main__', alter_sys=True)"
    )
    home = tmp_path / "home"
    home.mkdir()
    (home / ".nccl.conf").write_bytes(NCCL_CONF)
    (tmp_path / "job.conf").write_text("NCCL_PROTO=Simple\nNCCL_ALGO=Tree\n")
    (tmp_path / "topo.xml").write_text("<system/>\n")
    env = {"HOME": str(home), "NCCL_TOPO_FILE": str(tmp_path / "topo.xml"), "TF_CONFIG": TF_CONFIG}
    sections = {}
    for python in (old_python, sys.executable):
        for extra in ({}, {"NCCL_CONF_FILE": str(tmp_path / "job.conf")}):
            res = run(
                [python, "-W", "error", "-I", "-S", "-c", stub, "--no-selftest", "--json", "-"], env={**env, **extra}
            )
            assert (res.returncode, res.stderr.decode()) == (0, "")
            report = valid_report(res.stdout, python)
            sections[(python, bool(extra))] = report["distributed"]
            assert "10.0.0.7" not in res.stdout.decode() and "w0:1" not in res.stdout.decode()
    for extra in (False, True):
        assert sections[(old_python, extra)] == sections[(sys.executable, extra)]
    home_file, job_file = sections[(old_python, False)], sections[(old_python, True)]
    assert home_file["nccl.from_files"]["value"]["NCCL_ALGO"] == "Ring"  # \r dropped (NCCL 2.30.3 on)
    assert job_file["nccl.from_files"]["value"] == {"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"}
    assert home_file["tf_config.cluster"]["value"] == {"chief": 1, "worker": 2}


def test_probe_from_the_payload(old_python: str, pyz: Path, tmp_path: Path) -> None:
    """The archive images carry, both ways they use it: run directly and imported from PYTHONPATH."""
    res = run([old_python, "-W", "error", "-I", "-S", str(pyz), "--no-selftest", "--json", "-"], env=PLANTED_ENV)
    assert (res.returncode, res.stderr.decode()) == (0, "")
    assert "Zx9Cv8Bn7Mm6" not in res.stdout.decode()
    valid_report(res.stdout, old_python)
    md = tmp_path / "r.md"
    res = run(
        [
            old_python,
            "-W",
            "error",
            "-s",
            "-S",
            "-m",
            "envpin.probe",
            "--no-selftest",
            "--json",
            str(tmp_path / "r.json"),
            "--markdown",
            str(md),
        ],
        env={"PYTHONPATH": str(pyz)},
    )
    assert (res.returncode, res.stderr.decode()) == (0, "")
    valid_report((tmp_path / "r.json").read_bytes(), old_python)
    assert md.read_text().startswith("# envpin probe report")
    where = run(
        [old_python, "-W", "error", "-s", "-S", "-c", "import envpin.probe; print(envpin.probe.__file__)"],
        env={"PYTHONPATH": str(pyz)},
    )
    assert where.stdout.decode().strip() == str(pyz / "envpin" / "probe" / "__init__.py")
    res = run(
        [old_python, "-W", "error", "-s", "-S", "-m", "envpin.probe.runtime", "--check"], env={"PYTHONPATH": str(pyz)}
    )
    assert (res.returncode, res.stdout.decode(), res.stderr.decode()) == (
        0,
        "envpin: TensorFlow not found; nothing to check\n",
        "",
    )


# A TensorFlow stand-in: what enable_determinism reads (a *.dist-info name, __version__) and calls.
FAKE_TF = """
__version__ = "{version}"
calls = []
class _NS(object):
    def __init__(self, **fns):
        self.__dict__.update(fns)
random = _NS(set_seed=lambda s: calls.append(("tf.random.set_seed", s)))
config = _NS(experimental=_NS(enable_op_determinism=lambda: calls.append(("enable_op_determinism",))))
def _keras_seed(s):  # like Keras: Python's random module too
    import random as r
    r.seed(s)
    calls.append(("keras.utils.set_random_seed", s))
keras = _NS(utils=_NS(set_random_seed=_keras_seed))
"""
ENABLE = (
    "import json, sys, envpin\n"
    "report = envpin.enable_determinism(seed=7, strict=True)\n"
    "import tensorflow, random\n"
    "print(json.dumps({'report': report, 'calls': tensorflow.calls, 'random': random.random(),\n"
    "                  'from': envpin.__file__}, sort_keys=True))\n"
)


def _enable_determinism(python: str, pyz: Path, fake: Path | None, env: dict[str, str]) -> dict[str, Any]:
    path = str(pyz) if fake is None else f"{pyz}:{fake}"
    res = run([python, "-W", "error", "-s", "-S", "-c", ENABLE], env={"PYTHONPATH": path, **env})
    assert res.returncode == 0 and res.stderr == b"", res.stderr.decode()
    return json.loads(res.stdout)


@pytest.mark.parametrize(
    ("tf_version", "ngc", "seeding"),
    [("2.9.1", None, "keras.utils.set_random_seed"), ("2.4.0", "20.12-tf2", "tf.random.set_seed")],
)
def test_enable_determinism_from_the_payload(
    old_python: str, pyz: Path, tmp_path: Path, tf_version: str, ngc: str | None, seeding: str
) -> None:
    """``import envpin; envpin.enable_determinism(seed=..., strict=True)`` from envpin.pyz, against a
    TensorFlow stand-in: the same recipe, the same steps and the same seeded state as on the host."""
    fake = tmp_path / "site"
    (fake / "tensorflow").mkdir(parents=True)
    (fake / "tensorflow" / "__init__.py").write_text(FAKE_TF.format(version=tf_version))
    (fake / f"tensorflow-{tf_version}.dist-info").mkdir()
    env = {"PYTHONHASHSEED": "0", **({"NVIDIA_TENSORFLOW_VERSION": ngc} if ngc else {})}
    got = _enable_determinism(old_python, pyz, fake, env)
    assert got["from"] == str(pyz / "envpin" / "__init__.py")
    assert got["report"]["warnings"] == [] and got["report"]["recipe"]
    assert [seeding, 7] in got["calls"]
    assert got == _enable_determinism(sys.executable, pyz, fake, env)


def test_enable_determinism_without_tensorflow_says_so(old_python: str, pyz: Path) -> None:
    res = run(
        [old_python, "-W", "error", "-s", "-S", "-c", "import envpin; envpin.enable_determinism(strict=True)"],
        env={"PYTHONPATH": str(pyz)},
    )
    assert res.returncode == 1
    assert res.stderr.decode().strip().splitlines()[-1] == (
        "RuntimeError: envpin: TensorFlow is not installed: only Python's random module was seeded"
    )


# --- the Slurm node task ----------------------------------------------------------------------------------


def _node_task(python: str, payload: bytes, sha: str, *args: str) -> dict[str, Any]:
    """Run envpin/fleet/nodetask.py as srun does (python3 -c SOURCE, the archive on stdin); its result."""
    from envpin.fleet.slurm import parse_task_output

    res = run(
        [python, "-W", "error", "-S", "-c", NODETASK.read_text(), sha, "120", *args],
        stdin=payload,
        env={"SLURMD_NODENAME": "node-7"},
    )
    assert (res.returncode, res.stderr.decode()) == (0, "")
    results, broken = parse_task_output(res.stdout.decode())
    assert broken == {} and list(results) == ["node-7"]
    return results["node-7"]


def test_slurm_node_task(old_python: str, pyz: Path) -> None:
    """The node task runs the archive with the node's interpreter (warnings as errors there too); the host
    reassembles its framed result; a damaged archive is reported, not run."""
    payload = pyz.read_bytes()
    sha = hashlib.sha256(payload).hexdigest()
    result = _node_task(old_python, payload, sha, "--no-selftest", "--json", "-")
    assert (result["status"], result["exit_code"], result["stderr"]) == ("ok", 0, "")
    assert result["python"] == old_python
    valid_report(result["report"], old_python)
    damaged = _node_task(old_python, payload[:-1], sha, "--no-selftest")
    assert damaged["status"] == "failed" and "sha256 mismatch" in damaged["error"]


# --- the same results on every version --------------------------------------------------------------------


def _fake_root(root: Path) -> Path:
    files = {
        "proc/self/cgroup": "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n2:cpuset:/docker/abc\n",
        "proc/1/cgroup": "0::/kubepods/burstable/pod1\n",
        "proc/meminfo": "MemTotal:       16314348 kB\nMemFree:  1 kB\n",
        "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "150000\n",
        "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
        "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
        "sys/fs/cgroup/cpuset/cpuset.cpus": "0-1\n",
        "etc/os-release": 'NAME="Ubuntu"\nVERSION_ID="18.04"\nID=ubuntu\nPRETTY_NAME="Ubuntu 18.04.6 LTS"\n',
        ".dockerenv": "",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _calls(tmp_path: Path) -> list[dict[str, Any]]:
    """Every reader and rule of the image side on inputs of known content (the unit tests' own inputs)."""
    from envpin.probe import collect, nvml
    from envpin.probe.runtime import load_table
    from tests.cli.test_probe_run import PLANTED as PLANTED_RUN
    from tests.unit.test_probe_parsers import BUILD_INFO_TF1, BUILD_INFO_TF22, BUILD_INFO_TF23, CPUINFO_V3
    from tests.unit.test_secrets_planted import PLANTED

    calls: list[dict[str, Any]] = []

    def add(module: str, func: str, *args: Any, **kwargs: Any) -> None:
        calls.append(
            {
                "id": f"{len(calls):03d} {module.rsplit('.', 1)[-1]}.{func}",
                "module": module,
                "func": func,
                "args": list(args),
                "kwargs": kwargs,
            }
        )

    s = "envpin.probe.secrets"
    names = [
        *PLANTED,
        *PLANTED_RUN,
        "privateKey",
        "apiKey",
        "XMLHttpToken",
        "a_B",
        "aB",
        "fooBARBaz",
        "__x--yZ",
        "signingKey",
        "accessKeyId",
        "cache_key",
        "keyboardLayout",
        "PWD",
        "OLDPWD",
        "sessionTTL",
        "a1B",
    ]
    values = [
        *(v for v, _ in PLANTED.values()),
        *PLANTED_RUN.values(),
        *PLANTED_ENV.values(),
        "/opt/tokenizers:/usr/local/cuda/lib64",
        "sigmoid_threshold=0.5",
        "Basic training data",
        "x --fooToken=abc --barKey=1 --accessKey=zz9",
        '{"privateKey": "v4l", "keyName": "k"}',
        "sha256:" + "0123456789abcdef" * 4,
        "2.15.0+nv24.01",
        "\udcff\udcfe bytes",
        "",
    ]
    for name in names:
        add(s, "secret_name", name)
        add(s, "key_parts", name)
    for value in values:
        add(s, "secret_value", value)
        add(s, "high_entropy", value)
    add(s, "scrub", {"values": values, "pairs": {n: v for n, (v, _) in PLANTED.items()}})
    report = collect(selftest=False)
    who = {"user": "alice", "host": report["host"]["hostname"]["value"], "home": "/home/alice"}
    add(s, "anonymize", {"path": "/home/alice/x", "u": "alice", "srv": "/srv/alice/data", "w": "alice's"}, who)
    add(s, "anonymize", report, who)

    add("envpin.probe.cpu", "parse_cpuinfo", CPUINFO_V3)
    add("envpin.probe.cpu", "isa_level", {"$set": CPUINFO_V3.split("flags\t\t: ")[1].split("\n")[0].split()})
    add("envpin.probe.cpu", "isa_level", {"$set": ["fp", "asimd"]})
    for source in (
        BUILD_INFO_TF1,
        BUILD_INFO_TF22,
        BUILD_INFO_TF23,
        "build_info = {}\nbuild_info['x'] = 1\n",
        "not python (",
        "",
    ):
        add("envpin.probe.tf", "parse_build_info", source)
    for raw in (7605, 8907, 90100, 21903):
        add("envpin.probe.cudalibs", "_decode_mmp", raw)
    add("envpin.probe.cudalibs", "_decode_cuda", 11030)
    row = (
        "NVIDIA H100 80GB HBM3, GPU-0f2b2a8e-1c3d-4e5f-8a9b-0c1d2e3f4a5b, 9.0, 81559, 00000000:18:00.0, "
        "Enabled, [N/A], Enabled, Default, 1980, 1980, 2619, 700.00, 700.00, 96.00.89.00.01, 580.159.04\n"
    )
    query = [{"$tuple": list(item)} for item in nvml.SMI_QUERY]
    add("envpin.probe.nvml", "parse_smi", row + row.replace("18:00", "19:00"), query, "nvidia-smi")
    add("envpin.probe.nvml", "parse_smi", "garbage, row\n", query, "nvidia-smi")
    for name in ("Demo_Pkg", "zope.interface", "A--B__c", "tensorflow-gpu"):
        add("envpin.probe.pyenv", "normalize", name)
    _installed_calls(add, tmp_path)
    for name, raw in [
        ("CUDA_DEVICE_ORDER", "PCI_BÜS_ID"),
        ("XLA_FLAGS", PLANTED_ENV["XLA_FLAGS"]),
        ("TF_PASSWORD", "x"),
        ("OMP_NUM_THREADS", "4"),
    ]:
        add("envpin.probe.envvars", "relevant", name)
        add("envpin.probe.envvars", "env_field", name, raw)

    root = str(_fake_root(tmp_path / "root"))
    ctx = {
        "$context": {
            "root": root,
            "environ": {"TF_CPP_MIN_LOG_LEVEL": "3", **PLANTED_ENV, **{n: v for n, (v, _) in PLANTED.items()}},
        }
    }
    add("envpin.probe.system", "collect_limits", ctx)
    add("envpin.probe.system", "collect_container", ctx)
    add("envpin.probe.system", "collect_memory", ctx)
    add("envpin.probe.envvars", "collect_env", ctx)

    _distributed_calls(add, tmp_path)
    add("envpin.probe.fields", "flatten", report)
    add("envpin.probe.fields", "fingerprint_fields", report)
    add("envpin.probe.fields", "fingerprint", report)
    add("envpin.probe.fields", "device_class", report)
    add("envpin.probe.fields", "rules_table")
    add("envpin.probe.report", "to_json", report)
    add("envpin.probe.report", "to_markdown", report)
    add("envpin.probe.report", "report_basename", report)

    v = "envpin.portable.versions"
    for text in ("2.15.0+nv24.01", "1.15.5", "2", "2.x", "", "v2.1", "2.1.0rc1", "٢.١"):
        add(v, "parse_version", text)
        add(v, "parse_version", text, exact=True)
        add(v, "parse_tf_spec", text)
    for text in ("20.02", "20.02-tf2-py3", "19.10-py3", "21.13", "nvcr.io/nvidia/tensorflow:20.02-tf2-py3"):
        add(v, "parse_ngc_spec", text)
        add(v, "release_index", text)
    add(v, "components", "2.15.0+nv24.01")
    add(v, "matches", {"$tuple": [2, 1]}, "2.1.3")
    for ref in (
        "nvcr.io/nvidia/tensorflow:20.02-tf2-py3",
        "localhost:5000/a/b@sha256:" + "a" * 64,
        "UPPER/x",
        "a:b:c",
        "[::1]:5000/x:1",
        "docker.io/library/ubuntu",
    ):
        add("envpin.portable.imageref", "split", ref)
        add("envpin.portable.imageref", "parse", ref)
        add("envpin.portable.imageref", "validate", ref)
    add("envpin.portable.ngc", "nearest_releases", "20.06", ["19.10", "20.02", "20.10", "21.06", "20.06"], 3)
    d = "envpin.portable.device"
    add(d, "device_class", [{"$tuple": ["Tesla V100", "7.0"]}, {"$tuple": ["A100", None]}], "x", "1", "2", "on")
    add(d, "device_class", [], "x86-64-v3", "8", "2", "unknown")
    for setting in (None, "0", "4", " 8 ", "junk"):
        add(d, "thread_count", setting, "default")
        add(d, "onednn_switch", setting)
    for tf_version, flags, machine in [
        ("2.9.0", ["avx512_vnni"], "x86_64"),
        ("2.8", [], "x86_64"),
        ("2.15", [], "aarch64"),
        (None, [], "x86_64"),
    ]:
        add(d, "onednn_default", tf_version, flags, machine)

    table = load_table()
    for tf_version, dist, ngc in [
        ("2.9.1", "stock", None),
        ("2.1", "ngc", "20.02"),
        ("1.15", "ngc", "19.10"),
        ("2.4", "ngc", None),
        ("3.0", "stock", None),
        ("x", "stock", None),
    ]:
        add("envpin.probe.runtime", "resolve", table, tf_version, dist, ngc)
    add(
        "envpin.probe.runtime",
        "check_environment",
        {"env": [{"name": "A", "value": "1", "why": "w"}], "unset": [{"name": "B", "why": "w"}]},
        {"B": "x"},
    )
    for check in ("segment_sum", "bias_add_grad", "nonexistent"):
        add("envpin.probe.selftest.expect", "expected", check, "2.4.0", True, table)
    add(
        "envpin.probe.selftest.compare",
        "classify_exception",
        "UnimplementedError",
        "{{function_node __wrapped}} A deterministic GPU implementation of X is not available\nmore",
        True,
    )
    add("envpin.probe.selftest.compare", "clean_tf_message", "  {{function_node f}}  first line\nsecond")
    return calls


NCCL_CONF = (
    b"NCCL_ALGO=Ring\r\n# NCCL_PROTO=LL\nNCCL_SOCKET_IFNAME==ens1f0\nNCCL_COMM_ID=10.0.0.7:4242\nno equals\n"
    + b"#"
    + b"y" * 4100
    + b"NCCL_BUFFSIZE=1048576\nNCCL_NUL=a\x00b\n\xff\xfe=1\nNCCL_UTF8=\xc3\xbc\n"
)
TF_CONFIG = '{"cluster": {"worker": ["w0:1", "w1:1"], "chief": ["c:1"]}, "task": {"type": "worker", "index": 1}}'


def _distributed_calls(add: Any, tmp_path: Path) -> None:
    """The distributed section's parsers and rules, and its collector over files of known content."""
    n, d = "envpin.probe.nccl", "envpin.probe.distributed"
    versions = [{"$tuple": list(v)} for v in ((2, 22, 3), (2, 28, 3), (2, 30, 7))] + [None]
    for version in versions:
        add(n, "parse_conf", {"$bytes": NCCL_CONF.decode("latin-1")}, version)
        add(n, "conf_files", {"HOME": "/h", "NCCL_CONF_FILE": "/j.conf"}, version, "/pw")
        for kind, setting in (("net", None), ("net", "a,,libb.so,/c.so"), ("tuner", "none"), ("profiler", "p")):
            add(n, "plugin_candidates", kind, setting, version)
        add(n, "static_plugin", "stat", version)
    for text in ("2.28.3", "2.30.7-1", "x", None):
        add(n, "parse_version", text)
    files = [{"$tuple": ["home", [{"$tuple": ["NCCL_A", "1"]}, {"$tuple": ["NCCL_A", "2"]}]]}]
    add(n, "resolve", {"NCCL_B": "e"}, [*files, {"$tuple": ["etc", [{"$tuple": ["NCCL_B", "3"]}]]}])
    devices = [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "cc": "9.0", "uuid": "GPU-8932f937-d72c"},
        {"index": 1, "name": "NVIDIA A100", "cc": "8.0", "uuid": "GPU-11111111-0000"},
    ]
    for raw in ("1,0", "0,2,-1,1", "GPU-8932", "GPU-,0", "MIG-GPU-1/1/0", "", " 1"):
        add(d, "visible_devices", raw, devices)
    for raw in (TF_CONFIG, '{"cluster": {"worker": {"3": "h:1"}}}', "{not json", "[1]", '{"cluster": []}'):
        add(d, "tf_config_shape", raw)
    for env in ({}, {"HOROVOD_FUSION_THRESHOLD": "0", "HOROVOD_ENABLE_XLA_OPS": "1"}):
        for version in ({"$tuple": [0, 28, 1]}, {"$tuple": [0, 22, 0]}, None):
            add(d, "horovod_settings", env, version)
    for raw in ("10.0.0.1:1234", "[fe80::1]:5000", "fe80::1", "host", "h:x"):
        add("envpin.probe.envvars", "address_redacted", raw)
    for name, raw in (("NCCL_COMM_ID", "h:1"), ("TF_CONFIG", TF_CONFIG), ("NCCL_SOCKET_MAGIC", "77")):
        add("envpin.probe.envvars", "env_field", name, raw)
    root = tmp_path / "dist-root"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "nccl.conf").write_bytes(b"NCCL_ALGO=Tree\nNCCL_PROTO=Simple\n")
    home = tmp_path / "dist-home"
    home.mkdir()
    (home / ".nccl.conf").write_bytes(NCCL_CONF)
    (tmp_path / "topo.xml").write_text("<system/>\n")
    environ = {"HOME": str(home), "NCCL_TOPO_FILE": str(tmp_path / "topo.xml"), "TF_CONFIG": TF_CONFIG}
    add(d, "collect_distributed", {"$context": {"root": str(root), "environ": environ}})


def _installed_calls(add: Any, tmp_path: Path) -> None:
    """The RECORD check and the start-up hooks on a scratch site-packages: one distribution as installed,
    one with a file edited (same size), one removed, a sitecustomize.py and a .pth with an import line."""
    from envpin.probe import pyenv
    from tests.unit.test_probe_installed import make_site

    clean, bad = make_site(tmp_path / "clean"), make_site(tmp_path / "bad")
    (bad / "demo" / "core.py").write_bytes(b"def add(a, b):\n    return a - b\n")
    (bad / "demo" / "__init__.py").unlink()
    (bad / "sitecustomize.py").write_text("x = 1\n")
    (bad / "hook.pth").write_text("import os\n")
    for site in (clean, bad):
        add("envpin.probe.pyenv", "scan_distributions", [str(site)])
        add("envpin.probe.installed", "check_installed", pyenv.scan_distributions([str(site)])[0])
        add("envpin.probe.installed", "startup_hooks", [str(site)])


def _same_results(python: str, calls: list[dict[str, Any]]) -> dict[str, Any]:
    res = run([python, "-W", "error", "-I", "-S", str(CALLS), str(REPO)], stdin=json.dumps(calls).encode())
    assert (res.returncode, res.stderr.decode()) == (0, "")
    return json.loads(res.stdout)


def test_same_results_as_the_host(old_python: str, tmp_path: Path) -> None:
    """Secrets redaction, anonymizing, every parser, the fingerprint, the report's JSON and Markdown, the
    recipe and the version rules: the old interpreter's results equal the host's, and no call warns."""
    calls = _calls(tmp_path)
    host = _same_results(sys.executable, calls)
    old = _same_results(old_python, calls)
    assert sorted(old) == sorted(host)
    differ = [k for k in host if old[k] != host[k]]
    first = {k: {"old": old[k]["result"], "host": host[k]["result"]} for k in differ[:2]}
    assert differ == [], f"{python_version(old_python)} differs from the host in {differ}; first: {first}"
    warned = {k: r["warnings"] for k, r in {**host, **old}.items() if r["warnings"]}
    assert warned == {}
