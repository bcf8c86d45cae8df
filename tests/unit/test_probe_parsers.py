"""The probe's readers on inputs of known content: cpuinfo, build_info.py shapes, cgroups, secrets, versions."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from envpin.probe import cpu, cudalibs, envvars, fields, nvml, pyenv, secrets, system, tf
from envpin.probe._common import Context

FLAGS_V3 = (
    "fpu cx8 cmov mmx fxsr sse sse2 syscall lm cx16 lahf_lm popcnt sse4_1 sse4_2 ssse3 "
    "avx avx2 bmi1 bmi2 f16c fma abm movbe xsave hypervisor"
)
CPUINFO_V3 = f"""processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B12
physical id\t: 0
core id\t: 0
flags\t\t: {FLAGS_V3}

processor\t: 1
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 7B12
physical id\t: 0
core id\t: 0
flags\t\t: {FLAGS_V3}
"""


def test_cpuinfo_counts_and_isa_level() -> None:
    info = cpu.parse_cpuinfo(CPUINFO_V3)
    assert info["model"] == "AMD EPYC 7B12"
    assert (info["processors"], info["sockets"], info["physical_cores"]) == (2, 1, 1)
    assert cpu.isa_level(set(info["flags"])) == "x86-64-v3"


@pytest.mark.parametrize(
    ("drop", "level"),
    [("avx512f", "x86-64-v3"), ("avx2", "x86-64-v2"), ("popcnt", "x86-64-v1")],
)
def test_isa_level_stops_at_first_missing_flag(drop: str, level: str) -> None:
    every = {f for _, required in cpu.ISA_LEVELS for f in required}
    assert cpu.isa_level(every) == "x86-64-v4"
    assert cpu.isa_level(every - {drop}) == level


def test_isa_level_on_this_machine_matches_proc_cpuinfo() -> None:
    text = Path("/proc/cpuinfo").read_text()
    flags = set(next(line for line in text.splitlines() if line.startswith("flags")).split(":", 1)[1].split())
    section = cpu.collect_cpu(Context())
    assert section["isa_level"]["value"] == cpu.isa_level(flags)
    assert section["logical_cpus"]["value"] == os.cpu_count()
    assert section["affinity_cpus"]["value"] == len(os.sched_getaffinity(0))


def test_isa_level_refuses_non_x86_flags() -> None:
    with pytest.raises(ValueError):
        cpu.isa_level({"fp", "asimd", "evtstrm"})


BUILD_INFO_TF1 = """
is_rocm_build = False
is_cuda_build = True
cuda_version_number = '10.0'
cudnn_version_number = '7'
"""
BUILD_INFO_TF22 = "build_info = {'cuda_version': '10.1', 'cudnn_version': '7', 'is_cuda_build': True}\n"
BUILD_INFO_TF23 = (
    "import collections\n\nbuild_info = collections.OrderedDict([('cuda_version', '11.0'), "
    "('cudnn_version', '8'), ('cuda_compute_capabilities', ['sm_70', 'compute_80']), ('is_cuda_build', True)])\n"
)


@pytest.mark.parametrize(
    ("source", "cuda", "cudnn"),
    [(BUILD_INFO_TF1, "10.0", "7"), (BUILD_INFO_TF22, "10.1", "7"), (BUILD_INFO_TF23, "11.0", "8")],
)
def test_build_info_shapes_across_tf_releases(source: str, cuda: str, cudnn: str) -> None:
    info = tf.parse_build_info(source)
    assert info["cuda_version"] == cuda and info["cudnn_version"] == cudnn
    assert info["is_cuda_build"] is True


def test_build_info_subscript_assignments() -> None:
    src = "build_info = {}\nbuild_info['cuda_version'] = '9.0'\nbuild_info['is_cuda_build'] = True\n"
    assert tf.parse_build_info(src) == {"cuda_version": "9.0", "is_cuda_build": True}


def test_build_info_of_installed_tensorflow_is_read_without_import() -> None:
    ctx = Context()
    section = tf.collect_tensorflow(ctx)
    if "value" not in section["distribution"]:
        pytest.skip("TensorFlow is not installed in this interpreter")
    path = Path(section["location"]["value"]) / "python" / "platform" / "build_info.py"
    assert section["build_info"]["value"] == tf.parse_build_info(path.read_text())


@pytest.mark.parametrize(
    ("raw", "text"),
    [(7605, "7.6.5"), (8907, "8.9.7"), (90100, "9.1.0"), (2708, "2.7.8"), (21903, "2.19.3")],
)
def test_cudnn_and_nccl_version_codes(raw: int, text: str) -> None:
    assert cudalibs._decode_mmp(raw) == text


def test_cuda_version_codes() -> None:
    assert cudalibs._decode_cuda(11030) == "11.3"
    assert cudalibs._decode_cuda(12040) == "12.4"


def _tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_cgroup_v2_limits(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "proc/self/cgroup": "0::/\n",
            "sys/fs/cgroup/cgroup.controllers": "cpuset cpu memory\n",
            "sys/fs/cgroup/cpu.max": "150000 100000\n",
            "sys/fs/cgroup/memory.max": "4294967296\n",
            "sys/fs/cgroup/cpuset.cpus.effective": "0-3\n",
        },
    )
    limits = system.collect_limits(Context(root=str(tmp_path)))
    assert limits["cpu"]["value"]["cpus"] == 1.5 and limits["cpu"]["value"]["cgroup"] == "v2"
    assert limits["memory"]["value"]["bytes"] == 4294967296
    assert limits["cpuset"]["value"] == "0-3"


def test_cgroup_v1_limits_with_host_path_in_namespace(tmp_path: Path) -> None:
    _tree(
        tmp_path,
        {
            "proc/self/cgroup": "4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n2:cpuset:/docker/abc\n",
            "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
            "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n",
            "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
            "sys/fs/cgroup/cpuset/cpuset.cpus": "0-1\n",
        },
    )
    limits = system.collect_limits(Context(root=str(tmp_path)))
    assert limits["cpu"]["value"]["cpus"] == "max"
    assert limits["memory"]["value"]["bytes"] == "max"
    assert limits["cpuset"]["value"] == "0-1"


def test_container_detection_from_cgroup_and_dockerenv(tmp_path: Path) -> None:
    _tree(tmp_path, {".dockerenv": "", "proc/1/cgroup": "0::/kubepods/burstable/pod1\n"})
    section = system.collect_container(Context(root=str(tmp_path), environ={}))
    assert section["runtime"]["value"] == "docker" and section["in_container"]["value"] is True
    assert "/.dockerenv" in section["evidence"]["value"]


def test_os_release_of_this_machine() -> None:
    text = Path("/etc/os-release").read_text()
    section = system.collect_os(Context())
    assert f'VERSION_ID="{section["release"]["value"]["version_id"]}"' in text
    assert section["glibc"]["value"] == os.confstr("CS_GNU_LIBC_VERSION").split()[-1]
    assert section["kernel"]["value"] == os.uname().release


@pytest.mark.parametrize(
    "name",
    [
        "HF_TOKEN",
        "AWS_SECRET_ACCESS_KEY",
        "DB_PASSWORD",
        "MY_PASSWD",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "NCCL_AUTH",
        "TF_API_KEY",
        "WANDB_API_KEY",
    ],
)
def test_credential_names(name: str) -> None:
    assert secrets.secret_name(name)


@pytest.mark.parametrize(
    "name", ["OMP_NUM_THREADS", "TF_ENABLE_ONEDNN_OPTS", "XLA_FLAGS", "PWD", "CUDA_VISIBLE_DEVICES"]
)
def test_ordinary_names(name: str) -> None:
    assert not secrets.secret_name(name)


@pytest.mark.parametrize(
    "text",
    [
        "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2,
        "AKIA" + "ABCDEFGHIJKLMNOP",
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.c2lnbmF0dXJlc2lnbmF0dXJl",
        "https://alice:s3cr3tpass@example.invalid/simple",
        "--token=Xk9fQ2mZp7Lr4Tw8Yb3Nc6Vd1Hs5Jg0E",
    ],
)
def test_credential_values(text: str) -> None:
    assert secrets.secret_value(text)


@pytest.mark.parametrize(
    "text",
    [
        "/usr/local/cuda/lib64:/usr/local/nvidia/lib64:/usr/lib/x86_64-linux-gnu",
        "--xla_gpu_deterministic_ops=true --xla_gpu_autotune_level=0",
        "sha256:" + "0123456789abcdef" * 4,
        "GPU-5f2b2a8e-1c3d-4e5f-8a9b-0c1d2e3f4a5b",
        "2.15.0+nv24.01",
    ],
)
def test_ordinary_values(text: str) -> None:
    assert secrets.secret_value(text) is None


def test_scrub_replaces_tokens_inside_strings() -> None:
    out = secrets.scrub({"a": ["x https://bob:hunter2@host/y"], "ghp_abcdefghijklmnop1234": 1})
    assert "hunter2" not in str(out) and "ghp_abcdefghijklmnop1234" not in str(out)


def test_nvidia_smi_rows_parse_like_nvml_fields() -> None:
    fields_ = list(nvml.SMI_QUERY)
    row = (
        "NVIDIA H100 80GB HBM3, GPU-0f2b2a8e-1c3d-4e5f-8a9b-0c1d2e3f4a5b, 9.0, 81559, 00000000:18:00.0, "
        "Enabled, [N/A], Enabled, Default, 1980, 1980, 2619, 700.00, 700.00, 96.00.89.00.01, 580.159.04"
    )
    out = nvml.parse_smi(row + "\n", fields_, "nvidia-smi")
    assert out["count"]["value"] == 1
    assert out["devices.0.name"]["value"] == "NVIDIA H100 80GB HBM3"
    assert out["devices.0.compute_capability"]["value"] == "9.0"
    assert out["devices.0.memory_total_bytes"]["value"] == 81559 * 1024 * 1024
    assert out["devices.0.ecc"]["value"] == "enabled"
    assert "unavailable" in out["devices.0.mig"]
    assert out["devices.0.clocks_max_mhz"]["value"] == {"graphics": 1980, "sm": 1980, "memory": 2619}
    assert out["driver_version"]["value"] == "580.159.04"


def test_distribution_scan_reads_metadata_and_shadowing(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for root, version in ((a, "1.0"), (b, "2.0")):
        d = root / f"Demo_Pkg-{version}.dist-info"
        d.mkdir(parents=True)
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: Demo_Pkg\nVersion: {version}\n\nbody\n")
        (d / "RECORD").write_text(f"demo/__init__.py,sha256=x{version},1\n")
    egg = a / "old.egg-info"
    egg.write_text("Metadata-Version: 1.0\nName: old\nVersion: 0.1\n")
    dists, shadowed = pyenv.scan_distributions([str(a), str(b)])
    assert {d["name"]: d["version"] for d in dists} == {"demo-pkg": "1.0", "old": "0.1"}
    assert shadowed == {"demo-pkg": [f"2.0@{b}"]}
    before = pyenv.site_hash(dists)
    (a / "Demo_Pkg-1.0.dist-info" / "RECORD").write_text("demo/__init__.py,sha256=changed,1\n")
    assert pyenv.site_hash(pyenv.scan_distributions([str(a), str(b)])[0]) != before


def test_flatten_and_fingerprint_ignore_volatile_fields() -> None:
    from envpin.probe import collect

    report = collect()
    fp = fields.fingerprint_fields(report)
    assert fp and not any(k.startswith(("host.", "probe.")) for k in fp)
    assert not any(k.endswith((".uuid", ".pci_bus_id")) for k in fp)
    report["host"]["hostname"]["value"] = "elsewhere"
    report["host"]["pid"]["value"] = 1
    assert fields.fingerprint(report) == report["fingerprint"]
    report["env"]["OMP_NUM_THREADS"] = {"value": "3", "source": "environ:OMP_NUM_THREADS"}
    assert fields.fingerprint(report) != report["fingerprint"]


def test_golden_hash_enters_fingerprint_under_device_class() -> None:
    from envpin.probe import collect

    report = collect()
    report["selftest"] = {"golden": {"hash": "sha256:" + "1" * 64}}
    keys = [k for k in fields.fingerprint_fields(report) if k.startswith("golden.")]
    isa = report["cpu"]["isa_level"].get("value", "")
    # Without the self-test's own class, the one device-class rule is applied to the report.
    assert len(keys) == 1 and keys[0].startswith(f"golden.cpu:{isa};intra_op=")
    report["selftest"]["golden"]["device_class"] = "gpu-a100-sm80"
    assert "golden.gpu-a100-sm80" in fields.fingerprint_fields(report)


def test_image_identity_from_plan_and_environment(tmp_path: Path) -> None:
    golden_plan = Path(__file__).resolve().parents[1] / "golden" / "21.06-tf2-py3" / "plan.json"
    plan = json.loads(golden_plan.read_text())
    target = tmp_path / "opt" / "envpin" / "plan.json"
    target.parent.mkdir(parents=True)
    target.write_bytes(golden_plan.read_bytes())
    env = {
        "NVIDIA_TENSORFLOW_VERSION": "21.06-tf2",
        "NVIDIA_BUILD_ID": "24152431",
        "ENVPIN_RECIPE": plan["recipe"]["id"],
        "ENVPIN_PROBE_ROOT": str(tmp_path),
    }
    image = envvars.collect_image(Context(root=str(tmp_path), environ=env))
    assert image["ngc_version"]["value"] == "21.06-tf2" and image["build_id"]["value"] == "24152431"
    assert image["envpin_labels"]["value"] == {"ENVPIN_RECIPE": plan["recipe"]["id"]}
    got = image["envpin_plan"]["value"]
    assert got["tag"] == plan["tag"] and got["recipe"].startswith(plan["recipe"]["id"] + " sha256:")
    assert got["sha256"] == "sha256:" + hashlib.sha256(golden_plan.read_bytes()).hexdigest()
    assert "unavailable" in image["envpin_lock"]


def test_memory_total_matches_sysconf() -> None:
    section = system.collect_memory(Context())
    assert section["total_bytes"]["value"] == os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def test_simd_flags_keep_arithmetic_extensions_only() -> None:
    text = CPUINFO_V3.replace("hypervisor", "hypervisor smep smap avx512f amx_tile")
    section = cpu.collect_cpu(Context(root="/"))  # this machine, for the field shape
    assert set(section["simd_flags"]["value"].split()) <= set(section["flags"]["value"].split())
    flags = cpu.parse_cpuinfo(text)["flags"]
    simd = [f for f in flags if cpu._SIMD.match(f)]
    assert "smep" not in simd and "hypervisor" not in simd and "fpu" not in simd
    assert {"avx2", "fma", "avx512f", "amx_tile", "sse4_2"} <= set(simd)


@pytest.mark.parametrize(
    "cache",
    [
        # glibc's current format: each soname is only the tail of its path in the string table
        b"glibc-ld.so.cache1.1\x00\x00/usr/lib/x86_64-linux-gnu/libcudnn.so.8\x00/lib/libnccl.so.2\x00",
        # the old format: the soname as a string of its own, then its path
        b"ld.so-1.7.0\x00libcudnn.so.8\x00/usr/lib/x86_64-linux-gnu/libcudnn.so.8\x00libnccl.so.2\x00/lib/libnccl.so.2\x00",
    ],
)
def test_the_ld_cache_names_its_libraries_in_either_format(tmp_path: Path, cache: bytes) -> None:
    """The dynamic loader's cache is read for the sonames it offers (an earlier reader found none in glibc's
    current format, so no library was ever tried by its soname)."""
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / "ld.so.cache").write_bytes(cache)
    ctx = Context(root=str(tmp_path), environ={})
    assert cudalibs._ld_cache_names(ctx) == ["libcudnn.so.8", "libnccl.so.2"]
