"""The distributed stack in the probe: NCCL's configuration files read as each NCCL release reads them, its
precedence, its plugin names, the GPUs CUDA_VISIBLE_DEVICES selects, TF_CONFIG's shape, Horovod's settings,
and how each is classified in diff and verify. In-process: the collectors over files in a temporary folder."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envpin.probe import collect, distributed, envvars, fields, nccl
from envpin.probe._common import Context
from envpin.reports import diff
from tests.props import examples

OLD = (2, 22, 3)  # getline, no comments, ~/.nccl.conf from the passwd entry, no NCCL_CONF_FILE
MID = (2, 28, 3)  # getline, comments, NCCL_CONF_FILE
NEW = (2, 30, 7)  # fgets, \r dropped, $HOME


# --- the line syntax ------------------------------------------------------------------------------------


def test_the_line_syntax_of_setenvfile() -> None:
    text = (
        b"NCCL_DEBUG=WARN\n"
        b"NCCL_SOCKET_IFNAME==ens1f0\n"  # the NCCL docs' own example: the value starts with '='
        b"no equals sign here\n"
        b"=no name\n"
        b" NCCL_ALGO = Ring \n"  # nothing is trimmed: the name has blanks, the value too
        b'NCCL_PROTO="Simple"\n'  # nor are quotes removed
        b"NCCL_X=a=b\n"
        b"NCCL_NUL=ab\x00cd\n"  # a C string ends at NUL
        b"NCCL_LAST=1"  # no newline at the end
    )
    assert nccl.parse_conf(text, NEW) == [
        ("NCCL_DEBUG", "WARN"),
        ("NCCL_SOCKET_IFNAME", "=ens1f0"),
        (" NCCL_ALGO ", " Ring "),
        ("NCCL_PROTO", '"Simple"'),
        ("NCCL_X", "a=b"),
        ("NCCL_NUL", "ab"),
        ("NCCL_LAST", "1"),
    ]


def test_comments_exist_from_2_26_2_and_carriage_returns_go_from_2_30_3() -> None:
    text = b"# NCCL_ALGO=Tree\nNCCL_PROTO=LL\r\n"
    assert nccl.parse_conf(text, NEW) == [("NCCL_PROTO", "LL")]
    assert nccl.parse_conf(text, MID) == [("NCCL_PROTO", "LL\r")]
    assert nccl.parse_conf(text, OLD) == [("# NCCL_ALGO", "Tree"), ("NCCL_PROTO", "LL\r")]
    assert nccl.parse_conf(text, None) == nccl.parse_conf(text, nccl.NEWEST)  # unknown: the newest rules


def test_fgets_reads_a_long_line_as_several_from_2_30_3() -> None:
    long_comment = b"#" + b"x" * 4094 + b"NCCL_ALGO=Tree\n"  # byte 4096 on begins a second 'line'
    assert nccl.parse_conf(long_comment, NEW) == [("NCCL_ALGO", "Tree")]
    assert nccl.parse_conf(long_comment, MID) == []


def test_names_and_values_are_cut_where_nccl_cuts_them() -> None:
    pairs = nccl.parse_conf(b"N" * 2000 + b"=" + b"v" * 2000 + b"\n", MID)
    assert [(len(n), len(v)) for n, v in pairs] == [(1023, 1023)]


def _fgets_model(data: bytes) -> list[bytes]:
    """setEnvFile's lines by another route: io's readline(limit) is fgets(buf, limit + 1)."""
    out, fh = [], io.BytesIO(data)
    while True:
        chunk = fh.readline(4095)
        if not chunk:
            return out
        chunk = chunk.split(b"\0", 1)[0]
        chunk = chunk[:-1] if chunk.endswith(b"\n") else chunk
        out.append(chunk[:-1] if chunk.endswith(b"\r") else chunk)


def _getline_model(data: bytes) -> list[bytes]:
    """getline's lines: a trailing newline dropped, then the C string up to its first NUL."""
    out = []
    for chunk in iter(io.BytesIO(data).readline, b""):
        body = chunk[:-1] if chunk.endswith(b"\n") else chunk
        out.append(body.split(b"\0", 1)[0])
    return out


LINES = st.lists(
    st.one_of(
        st.binary(max_size=60),
        st.binary(min_size=4000, max_size=9000),
        st.sampled_from([b"", b"#", b"=", b"\r", b"NCCL_ALGO=Ring", b"# NCCL_ALGO=Tree", b"A=\x00B"]),
    ),
    max_size=12,
)


@settings(max_examples=examples(200), deadline=None)
@given(LINES, st.booleans())
def test_lines_match_a_model_of_fgets_and_getline(parts: list[bytes], trailing: bool) -> None:
    data = b"\n".join(parts) + (b"\n" if trailing else b"")
    assert nccl._lines(data, NEW) == _fgets_model(data)
    assert nccl._lines(data, MID) == _getline_model(data)


NAMES = st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_]{0,40}\Z")
VALUES = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r\x00"), max_size=300)


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.tuples(NAMES, VALUES), max_size=20), st.sampled_from([OLD, MID, NEW]))
def test_what_is_written_as_name_value_lines_is_read_back(pairs: list[tuple[str, str]], version: Any) -> None:
    text = "".join(f"{n}={v}\n" for n, v in pairs).encode("utf-8")
    want = [(n, v.encode("utf-8")[:1023].decode("utf-8", "ignore")) for n, v in pairs]
    got = [
        (n, v.encode("utf-8", "surrogateescape").decode("utf-8", "ignore")) for n, v in nccl.parse_conf(text, version)
    ]
    assert got == want


@settings(max_examples=examples(300), deadline=None)
@given(st.binary(max_size=12000), st.sampled_from([OLD, MID, NEW]))
def test_any_bytes_parse_into_well_formed_settings(data: bytes, version: Any) -> None:
    for name, value in nccl.parse_conf(data, version):
        raw_name, raw_value = name.encode("utf-8", "surrogateescape"), value.encode("utf-8", "surrogateescape")
        assert raw_name and b"=" not in raw_name and b"\n" not in raw_name + raw_value and b"\0" not in raw_name
        assert len(raw_name) <= 1023 and len(raw_value) <= 1023
        if version >= nccl.COMMENTS_SINCE:
            assert not raw_name.startswith(b"#")


# --- which files, and precedence ------------------------------------------------------------------------


def test_which_files_each_release_reads() -> None:
    env = {"HOME": "/home/a", "NCCL_CONF_FILE": "/job/nccl.conf"}
    assert nccl.conf_files(env, NEW, "/pw") == [("conf_file", "/job/nccl.conf"), ("etc", "/etc/nccl.conf")]
    assert nccl.conf_files(env, OLD, "/pw") == [("home", "/pw/.nccl.conf"), ("etc", "/etc/nccl.conf")]
    assert nccl.conf_files({"HOME": "/home/a", "NCCL_CONF_FILE": ""}, NEW, None)[0] == ("home", "/home/a/.nccl.conf")
    assert nccl.conf_files({"HOME": "/home/a"}, MID, "/pw")[0] == ("home", "/pw/.nccl.conf")  # passwd until 2.30.2
    assert nccl.conf_files({}, NEW, "/pw") == [("etc", "/etc/nccl.conf")]  # no $HOME: no home file


@settings(max_examples=examples(200), deadline=None)
@given(
    st.dictionaries(st.sampled_from(["NCCL_A", "NCCL_B", "NCCL_C", "OTHER"]), st.sampled_from(["e1", "e2"])),
    st.lists(st.tuples(st.sampled_from(["NCCL_A", "NCCL_B", "NCCL_C", "OTHER"]), st.sampled_from(["f", "g"]))),
    st.lists(st.tuples(st.sampled_from(["NCCL_A", "NCCL_B", "NCCL_D"]), st.sampled_from(["h", "i"]))),
)
def test_the_environment_wins_then_the_first_file_then_the_first_line(
    environ: dict[str, str], first: list[tuple[str, str]], etc: list[tuple[str, str]]
) -> None:
    from_files, effective = nccl.resolve(environ, [("home", first), ("etc", etc)])
    for name in {n for n, _ in first + etc} | set(environ):
        if name in environ:
            assert name not in from_files
            if name.startswith("NCCL_"):
                assert effective[name] == (environ[name], "env")
        else:
            label, pairs = next((lb, p) for lb, p in (("home", first), ("etc", etc)) if any(n == name for n, _ in p))
            assert from_files[name] == (next(v for n, v in pairs if n == name), label) == effective[name]


# --- plugins --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "setting", "version", "loads"),
    [
        ("net", None, NEW, [["libnccl-net.so"]]),
        ("net", "aws-ofi", NEW, [["aws-ofi", "libnccl-net-aws-ofi.so"]]),
        ("net", "a,,libb.so,/opt/c.so", NEW, [["a", "libnccl-net-a.so"], ["libb.so"], ["/opt/c.so"]]),
        ("net", "NONE", NEW, []),
        ("net", "", NEW, []),  # set but empty: strtok finds no name, no external plugin
        ("net", "aws-ofi", (2, 25, 1), [["aws-ofi", "libnccl-net-aws-ofi.so"]]),
        ("net", "", (2, 25, 1), [["libnccl-net.so"]]),
        ("net", "aws-ofi", (2, 19, 3), [["libnccl-net-aws-ofi.so"]]),
        ("tuner", None, NEW, [["libnccl-tuner.so"]]),
        ("tuner", "", NEW, [["libnccl-tuner.so"]]),
        ("tuner", "none", NEW, []),
        ("tuner", "mine", (2, 21, 5), [["mine", "libnccl-tuner-mine.so"]]),
        ("tuner", "mine", (2, 19, 1), [["mine"]]),
        ("tuner", None, (2, 19, 1), []),
        ("tuner", "mine", (2, 18, 1), []),
        ("profiler", "p", (2, 25, 1), [["p"]]),
        ("profiler", None, (2, 23, 4), [["libnccl-profiler.so"]]),
        ("profiler", None, (2, 22, 3), []),
        ("env", None, (2, 28, 3), []),
        ("env", None, (2, 28, 7), [["libnccl-env.so"]]),
        ("env", None, None, [["libnccl-env.so"]]),  # an NCCL of unknown release: every plugin the newest loads
    ],
)
def test_plugin_names_nccl_asks_for(kind: str, setting: str | None, version: Any, loads: list[list[str]]) -> None:
    assert nccl.plugin_candidates(kind, setting, version) == loads


def test_a_prefix_of_static_plugin_is_the_program_itself() -> None:
    assert nccl.static_plugin("static", NEW) and nccl.static_plugin("STATIC_PLUGIN", NEW)
    assert not nccl.static_plugin("libnccl-net.so", NEW) and not nccl.static_plugin("static", (2, 21, 5))


# --- the collector over files ---------------------------------------------------------------------------


def _ctx(tmp_path: Path, environ: dict[str, str], nccl_version: str | None = None) -> Context:
    ctx = Context(root=str(tmp_path / "root"), environ=environ)
    ctx.cache["nccl_version"] = nccl_version
    return ctx


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_files_settings_and_precedence_in_the_section(tmp_path: Path) -> None:
    _write(tmp_path / "root/etc/nccl.conf", "NCCL_ALGO=Tree\nNCCL_PROTO=LL\nNCCL_BUFFSIZE=1048576\n")
    _write(tmp_path / "home/.nccl.conf", "NCCL_ALGO=Ring\nNCCL_ALGO=Tree\n")
    _write(tmp_path / "job.conf", "NCCL_PROTO=Simple\n")
    env = {"HOME": str(tmp_path / "home"), "NCCL_BUFFSIZE": "4194304"}
    out = distributed.collect_distributed(_ctx(tmp_path, env))
    assert out["nccl.conf.home"]["value"]["settings"] == {"NCCL_ALGO": "Ring"}  # a file's first line of a name
    assert out["nccl.from_files"]["value"] == {"NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"}
    assert out["nccl.effective"]["value"]["NCCL_BUFFSIZE"] == {"value": "4194304", "source": "env"}
    assert out["nccl.effective"]["value"]["NCCL_PROTO"] == {"value": "LL", "source": "/etc/nccl.conf"}
    assert out["nccl.rules"]["value"] == "NCCL 2.30.7 (none found: the newest read)"
    # NCCL_CONF_FILE replaces ~/.nccl.conf
    out = distributed.collect_distributed(_ctx(tmp_path, {**env, "NCCL_CONF_FILE": str(tmp_path / "job.conf")}))
    assert "nccl.conf.home" not in out and out["nccl.conf.conf_file"]["source"] == "file:$NCCL_CONF_FILE"
    assert out["nccl.from_files"]["value"] == {"NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple"}
    # ... from 2.23.4 on: an older NCCL reads the passwd entry's home, whatever NCCL_CONF_FILE says
    old = distributed.collect_distributed(
        _ctx(tmp_path, {**env, "NCCL_CONF_FILE": str(tmp_path / "job.conf")}, nccl_version="2.22.3")
    )
    assert (
        "nccl.conf.conf_file" not in old and old["nccl.rules"]["value"] == "NCCL 2.22.3 (the library cuda.nccl found)"
    )


def test_nothing_to_record_records_nothing(tmp_path: Path) -> None:
    """No file, no plugin, no TF_CONFIG, no Horovod, no GPUs: no field at all (a lock recorded before the
    section existed keeps verifying)."""
    (tmp_path / "root").mkdir()
    ctx = _ctx(tmp_path, {"HOME": "/home/u", "CUDA_VISIBLE_DEVICES": "0", "HOROVOD_FUSION_THRESHOLD": "0"})
    ctx.cache["dists"] = ([], {}, [])
    assert distributed.collect_distributed(ctx) == {}


def test_a_real_probe_of_this_machine_adds_no_fingerprint_field_without_a_distributed_stack(tmp_path: Path) -> None:
    report = collect(environ={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert [k for k in fields.fingerprint_fields(report) if k.startswith("distributed.")] == []


def test_conf_values_get_the_env_sections_treatment(tmp_path: Path) -> None:
    secret = "ghp_" + "Zx9Cv8Bn7Mm6Lk5Jh4Gf3Dd2Ss1Aa0Qq"
    _write(
        tmp_path / "root/etc/nccl.conf",
        f"NCCL_IB_HCA=mlx5_0:1\nNCCL_COMM_ID=10.1.2.3:4242\nNCCL_RAS_ADDR=[fe80::1]:28028\nNCCL_SOCKET_MAGIC=77\n"
        f"NCCL_NET_TOKEN=abc\nNCCL_SOCKET_IFNAME={secret}\n{secret}=1\nAKIAIOSFODNN7EXAMPLE=2\nnot a name=3\n",
    )
    out = distributed.collect_distributed(_ctx(tmp_path, {}))
    conf = out["nccl.conf.etc"]["value"]
    assert conf["settings"] == {
        "NCCL_IB_HCA": "mlx5_0:1",
        "NCCL_COMM_ID": "<address>:4242",
        "NCCL_RAS_ADDR": "<address>:28028",
        "NCCL_SOCKET_MAGIC": "<redacted>",
        "NCCL_NET_TOKEN": "<redacted>",
        "NCCL_SOCKET_IFNAME": "<redacted>",
    }
    assert conf["other_lines"] == 3
    assert secret not in json.dumps(out) and "10.1.2.3" not in json.dumps(out) and "fe80" not in json.dumps(out)
    assert envvars.env_field("NCCL_COMM_ID", "10.1.2.3:4242")["value"] == "<address>:4242"
    assert envvars.env_field("TF_CONFIG", '{"cluster": {"worker": ["h1:1"]}}')["redacted"] is True


def test_topology_and_graph_files_are_hashed_never_named(tmp_path: Path) -> None:
    topo = _write(tmp_path / "my-topo.xml", "<system/>\n")
    _write(tmp_path / "root/var/run/nvidia-topologyd/virtualTopology.xml", "<system version='2'/>\n")
    out = distributed.collect_distributed(_ctx(tmp_path, {"NCCL_TOPO_FILE": str(topo)}))
    assert out["nccl.topo_file"]["value"]["named_by"] == "NCCL_TOPO_FILE"
    assert str(topo) not in json.dumps(out["nccl.topo_file"])
    # Unset: NCCL reads topologyd's file; set to a file that cannot be opened: NCCL detects (no default)
    assert distributed.collect_distributed(_ctx(tmp_path, {}))["nccl.topo_file"]["value"]["named_by"] == "default path"
    assert "nccl.topo_file" not in distributed.collect_distributed(_ctx(tmp_path, {"NCCL_TOPO_FILE": "/missing.xml"}))
    # A graph file NCCL cannot open stops NCCL; one it can is hashed
    missing = distributed.collect_distributed(_ctx(tmp_path, {"NCCL_GRAPH_FILE": str(tmp_path / "no.xml")}))
    assert "NCCL stops" in missing["nccl.graph_file"]["unavailable"]
    graph = _write(tmp_path / "graph.xml", "<graphs/>\n")
    got = distributed.collect_distributed(_ctx(tmp_path, {"NCCL_GRAPH_FILE": str(graph)}))["nccl.graph_file"]
    assert got["value"]["sha256"].startswith("sha256:") and got["value"]["bytes"] == 10


def test_plugins_are_found_as_the_loader_would_and_hashed(tmp_path: Path) -> None:
    libdir = tmp_path / "lib"
    _write(libdir / "libnccl-net.so", "not really ELF, but a file the loader would open")
    _write(libdir / "libnccl-tuner-mine.so", "tuner")
    env = {"LD_LIBRARY_PATH": f"/nonexistent:{libdir}", "NCCL_TUNER_PLUGIN": "mine"}
    out = distributed.collect_distributed(_ctx(tmp_path, env))
    net = out["nccl.plugins.net"]["value"]
    assert list(net) == ["libnccl-net.so"] and net["libnccl-net.so"]["found_by"] == "LD_LIBRARY_PATH"
    assert list(out["nccl.plugins.tuner"]["value"]) == ["libnccl-tuner-mine.so"]
    assert "nccl.plugins.profiler" not in out
    assert "nccl.plugins.net" not in distributed.collect_distributed(_ctx(tmp_path, {**env, "NCCL_NET_PLUGIN": "none"}))
    # the ld.so cache: a path among its strings
    cache = b"glibc-ld.so.cache1.1\x00\x00" + f"{libdir}/libnccl-profiler.so".encode() + b"\x00"
    (tmp_path / "root/etc").mkdir(parents=True, exist_ok=True)
    (tmp_path / "root/etc/ld.so.cache").write_bytes(cache)
    (tmp_path / "root" / str(libdir).lstrip("/")).mkdir(parents=True)
    (tmp_path / "root" / str(libdir).lstrip("/") / "libnccl-profiler.so").write_text("profiler")
    out = distributed.collect_distributed(_ctx(tmp_path, {}))
    assert out["nccl.plugins.profiler"]["value"]["libnccl-profiler.so"]["found_by"] == "/etc/ld.so.cache"


# --- GPUs -----------------------------------------------------------------------------------------------

H100 = "NVIDIA H100 80GB HBM3"
DEVICES = [
    {"index": 0, "name": H100, "cc": "9.0", "uuid": "GPU-8932f937-d72c-4106-c12f-20bd9faed9f6"},
    {"index": 1, "name": H100, "cc": "9.0", "uuid": "GPU-8932aaaa-0000-0000-0000-000000000001"},
    {"index": 2, "name": "NVIDIA A100-SXM4-40GB", "cc": "8.0", "uuid": "GPU-11111111-0000-0000-0000-000000000002"},
]


@pytest.mark.parametrize(
    ("raw", "order"),
    [
        ("2,0", ["2:NVIDIA A100-SXM4-40GB;cc=8.0", f"0:{H100};cc=9.0"]),
        ("0,2,-1,1", [f"0:{H100};cc=9.0", "2:NVIDIA A100-SXM4-40GB;cc=8.0"]),  # the CUDA guide's own example
        ("GPU-8932f937", [f"0:{H100};cc=9.0"]),  # an abbreviated UUID
        ("GPU-8932,1", []),  # ambiguous: it and everything after it hidden
        ("1,7,0", [f"1:{H100};cc=9.0"]),
        ("MIG-GPU-8932f937/1/0", ["MIG"]),
        ("", []),
    ],
)
def test_visible_devices_by_index_and_class(raw: str, order: list[str]) -> None:
    assert distributed.visible_devices(raw, DEVICES) == order


def test_uuids_never_reach_the_report(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, {"CUDA_VISIBLE_DEVICES": "GPU-11111111-0000-0000-0000-000000000002,GPU-8932f937"})
    ctx.cache["gpu_devices"] = DEVICES
    out = distributed.collect_distributed(ctx)
    assert out["gpus.count"]["value"] == 2 and "GPU-" not in json.dumps(out)


# --- TF_CONFIG ------------------------------------------------------------------------------------------


def _tf_config(index: int, workers: int = 2, rpc: str = "grpc") -> str:
    return json.dumps(
        {
            "cluster": {"chief": ["c0.example:2222"], "worker": [f"w{i}.example:2222" for i in range(workers)]},
            "task": {"type": "worker", "index": index},
            "rpc_layer": rpc,
        }
    )


def test_tf_config_shape_without_hosts() -> None:
    assert distributed.tf_config_shape(_tf_config(1)) == {
        "cluster": {"chief": 1, "worker": 2},
        "task_type": "worker",
        "task_index": 1,
        "rpc_layer": "grpc",
    }
    sparse = json.dumps({"cluster": {"worker": {"1": "h:1", "3": "h:2"}}, "task": {"type": "worker", "index": 3}})
    assert distributed.tf_config_shape(sparse)["cluster"] == {"worker": 2}
    for bad in ("not json", "[1]", '{"cluster": ["h:1"]}', '{"cluster": {"worker": "h:1"}}'):
        with pytest.raises(ValueError):
            distributed.tf_config_shape(bad)


def _section_severities(a: dict[str, Any], b: dict[str, Any]) -> dict[str, str]:
    """Each differing key of two distributed sections with its class, as diff and verify give it."""
    flat_a, flat_b = fields.flatten({"distributed": a}), fields.flatten({"distributed": b})
    return {d.key: d.severity for d in diff.compare_flat(flat_a, flat_b, cpu_compute=True)}


def _dist(tmp_path: Path, env: dict[str, str]) -> dict[str, Any]:
    return distributed.collect_distributed(_ctx(tmp_path, env))


def test_workers_of_one_job_are_not_a_breaking_difference_but_a_new_shape_is(tmp_path: Path) -> None:
    one, two = _dist(tmp_path, {"TF_CONFIG": _tf_config(0)}), _dist(tmp_path, {"TF_CONFIG": _tf_config(1)})
    assert _section_severities(one, two) == {"distributed.tf_config.task_index": "info"}
    bigger = _dist(tmp_path, {"TF_CONFIG": _tf_config(0, workers=3)})
    assert _section_severities(one, bigger) == {"distributed.tf_config.cluster.worker": "breaking"}
    chief = _dist(tmp_path, {"TF_CONFIG": json.dumps({**json.loads(_tf_config(0)), "task": {"type": "chief"}})})
    assert _section_severities(one, chief)["distributed.tf_config.task_type"] == "risk"
    broken = _dist(tmp_path, {"TF_CONFIG": "{not json"})
    assert "JSONDecodeError" in broken["tf_config"]["error"]
    assert fields.severity("distributed.tf_config", True)[0] == fields.BREAKING


# --- Horovod --------------------------------------------------------------------------------------------


def test_horovod_settings_with_the_defaults_of_its_source() -> None:
    got = distributed.horovod_settings({"HOROVOD_FUSION_THRESHOLD": "0"}, (0, 28, 1))
    assert got["HOROVOD_FUSION_THRESHOLD"] == {"value": "0", "source": "env"}
    assert got["HOROVOD_CYCLE_TIME"]["value"] == "1" and got["HOROVOD_TORUS_ALLREDUCE"]["value"] == "0"
    assert (
        distributed.horovod_settings({"HOROVOD_ENABLE_XLA_OPS": "1"}, (0, 28, 1))["HOROVOD_CYCLE_TIME"]["value"] == "0"
    )
    assert distributed.horovod_settings({}, (0, 22, 0))["HOROVOD_TORUS_ALLREDUCE"]["value"] == "unset"  # 0.26.0 on
    assert {v["value"] for v in distributed.horovod_settings({}, (0, 19, 5)).values()} == {"unset"}


def test_horovod_comes_from_the_package_scan(tmp_path: Path) -> None:
    ctx = _ctx(tmp_path, {"HOROVOD_AUTOTUNE": "1"})
    ctx.cache["dists"] = ([{"name": "horovod", "version": "0.28.1", "location": "/x"}], {}, [])
    out = distributed.collect_distributed(ctx)
    assert out["horovod.version"]["value"] == "0.28.1"
    assert out["horovod.settings"]["value"]["HOROVOD_AUTOTUNE"] == {"value": "1", "source": "env"}
    assert all(fields.severity(k, False)[0] == fields.INFO for k in fields.flatten({"distributed": out}))


# --- classification -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "severity"),
    [
        ("distributed.nccl.from_files.NCCL_ALGO", "breaking"),
        ("distributed.nccl.from_files.NCCL_DEBUG", "info"),
        ("distributed.nccl.from_files.NCCL_COMM_ID", "info"),
        ("distributed.nccl.from_files.NCCL_TOPO_FILE", "info"),
        ("distributed.nccl.conf.etc.sha256", "risk"),
        ("distributed.nccl.conf.etc.settings.NCCL_ALGO", "info"),
        ("distributed.nccl.conf.etc", "risk"),
        ("distributed.nccl.effective.NCCL_ALGO.value", "info"),
        ("distributed.nccl.topo_file.sha256", "breaking"),
        ("distributed.nccl.topo_file.named_by", "info"),
        ("distributed.nccl.graph_file", "breaking"),
        ("distributed.nccl.plugins.net.libnccl-net.so.sha256", "breaking"),
        ("distributed.nccl.plugins.net.libnccl-net.so.found_by", "info"),
        ("distributed.gpus.order", "breaking"),
        ("distributed.tf_config.cluster.worker", "breaking"),
        ("env.NCCL_ALGO", "breaking"),
        ("env.NCCL_TOPO_FILE", "info"),
        ("env.NCCL_NET_PLUGIN", "info"),
        ("env.NCCL_COMM_ID", "info"),
        ("env.TF_CONFIG", "info"),
        ("env.CUDA_VISIBLE_DEVICES", "info"),
        ("env.NCCL_VERSION", "breaking"),
        ("gpu.devices.3.nvlink_active_links", "breaking"),
        ("gpu.devices.0.fabric.state", "breaking"),
        ("gpu.devices.0.fabric.clique_id", "info"),
        ("gpu.devices.0.mig_devices", "breaking"),
        ("gpu.devices.0.mig", "risk"),  # as before: the real H200 reports' fingerprints stay what they are
    ],
)
def test_classification(key: str, severity: str) -> None:
    assert fields.severity(key, cpu_compute=False)[0] == severity


def test_a_comment_is_a_risk_difference_and_a_setting_a_breaking_one(tmp_path: Path) -> None:
    _write(tmp_path / "root/etc/nccl.conf", "NCCL_ALGO=Ring\n")
    ring = _dist(tmp_path, {})
    _write(tmp_path / "root/etc/nccl.conf", "# pinned for determinism\nNCCL_ALGO=Ring\n")
    commented = _dist(tmp_path, {})
    _write(tmp_path / "root/etc/nccl.conf", "NCCL_ALGO=Tree\n")
    tree = _dist(tmp_path, {})
    assert {k: s for k, s in _section_severities(ring, commented).items() if s != "info"} == {
        "distributed.nccl.conf.etc.sha256": "risk"
    }
    assert [k for k, s in _section_severities(ring, tree).items() if s == "breaking"] == [
        "distributed.nccl.from_files.NCCL_ALGO"
    ]
    # The same setting moved from the file to the environment: the file's part goes, env's arrives
    moved = _dist(tmp_path, {"NCCL_ALGO": "Tree"})
    assert "distributed.nccl.from_files.NCCL_ALGO" in _section_severities(tree, moved)
