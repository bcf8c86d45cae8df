"""Audit rules, one hazard at a time, plus the determinism rule checked against the whole catalog."""

from __future__ import annotations

import pytest

from envpin.audit import RULES, audit_text
from envpin.audit.pipspec import spec_state
from envpin.audit.rules.determinism import COMMON_VARS, SWITCHES
from envpin.knowledge import catalog, recipes

DIGEST = "@sha256:" + "ab" * 32
#: A base that triggers nothing by itself (digest-pinned NGC 20.02, TF 2.1, recipe set, seed fixed).
CLEAN = f"FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3{DIGEST}\nENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n"


def found(text: str, **kwargs: object) -> set[tuple[int, str]]:
    return {(f.line, f.rule) for f in audit_text(text, **kwargs)}


def only(text: str, rule: str, **kwargs: object) -> list[int]:
    return sorted(f.line for f in audit_text(text, **kwargs) if f.rule == rule)


def test_clean_base_has_no_findings() -> None:
    assert found(CLEAN) == set()


def test_every_finding_carries_known_rule_and_severity() -> None:
    text = CLEAN + "RUN pip install a && curl https://x | sh\nENV TF_USE_CUDNN_AUTOTUNE=0\n"
    for f in audit_text(text, path="dir/Dockerfile"):
        assert f.rule in RULES and f.severity in ("error", "warning", "info")
        assert f.file == "dir/Dockerfile" and f.message and f.fix


# -- FROM --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("base", "rule"),
    [
        ("ubuntu", "from-latest"),
        ("ubuntu:latest", "from-latest"),
        ("nvcr.io/nvidia/tensorflow:22.03-tf2-py3", "from-no-digest"),
        ("127.0.0.1:5000/nvidia/tensorflow:20.02-tf2-py3", "from-no-digest"),
        (f"ubuntu:latest{DIGEST}", None),
        (f"nvcr.io/nvidia/tensorflow:22.03-tf2-py3{DIGEST}", None),
        ("scratch", None),
    ],
)
def test_from_pins(base: str, rule: str | None) -> None:
    rules = {r for _, r in found(f"FROM {base}\n")} & {"from-latest", "from-no-digest"}
    assert rules == ({rule} if rule else set())


def test_from_stage_reference_and_build_args() -> None:
    text = f"FROM x:1{DIGEST} AS builder\nFROM builder\n"
    assert not {r for _, r in found(text)} & {"from-latest", "from-no-digest"}
    unresolved = "ARG REL\nFROM nvcr.io/nvidia/tensorflow:${REL}-tf2-py3\n"
    assert (2, "from-unresolved") in found(unresolved)
    resolved = found(unresolved, build_args={"REL": "22.03"})
    assert (2, "from-no-digest") in resolved and (2, "from-unresolved") not in resolved
    assert (2, "d9m-env-missing") in resolved  # now the audit knows the base: TF 2.8


# -- determinism -------------------------------------------------------------------------------------
def _entries() -> list[catalog.Entry]:
    return [e for e in catalog.load().entries() if e.flavor != "py2"]


@pytest.mark.parametrize("entry", _entries(), ids=lambda e: e.tag)
def test_determinism_rule_follows_catalog_and_recipe(entry: catalog.Entry) -> None:
    head = f"FROM nvcr.io/nvidia/tensorflow:{entry.tag}{DIGEST}\nENV PYTHONHASHSEED=0\n"
    bare = audit_text(head)
    if entry.tf_version is None:
        unknown = [f for f in bare if f.rule == "d9m-unknown-tf"]
        assert len(unknown) == 1 and "does not know which TensorFlow" in unknown[0].message
        assert not [f for f in bare if f.rule.startswith("d9m-env")]
        return
    recipe = recipes.select(entry.tf_version, "ngc", entry.release)
    needed = {k: v for k, v in recipe.env_dict().items() if k not in COMMON_VARS}
    if not any(k in SWITCHES for k in needed):
        assert [f.rule for f in bare] == ["d9m-unavailable"]
        return
    missing = [f for f in bare if f.rule == "d9m-env-missing"]
    assert len(missing) == 1 and missing[0].line == 1
    assert all(f"{k}={v}" in missing[0].message for k, v in needed.items())
    assert entry.tf_version in missing[0].message and recipe.id in missing[0].message
    env = " ".join(f"{k}={v}" for k, v in needed.items())
    done = audit_text(head + f"ENV {env}\n")
    # From TF 2.16 keras3-auto-xla speaks of the training code (jit_compile), which no ENV settles.
    keras3 = any(s.step == "keras3_no_auto_xla" for s in recipe.records.steps)
    assert [f.rule for f in done] == (["keras3-auto-xla"] if keras3 else [])


def test_cudnn_deterministic_on_22x_is_wrong_and_nothing_on_20x_is_missing() -> None:
    text = f"FROM nvcr.io/nvidia/tensorflow:22.05-tf2-py3{DIGEST}\nENV PYTHONHASHSEED=0\nENV TF_CUDNN_DETERMINISTIC=1\n"
    wrong = [f for f in audit_text(text) if f.rule.startswith("d9m")]
    assert [(f.line, f.rule) for f in wrong] == [(3, "d9m-env-wrong")]
    assert "TF_DETERMINISTIC_OPS=1" in wrong[0].message and "TensorFlow 2.8" in wrong[0].message
    nothing = audit_text(f"FROM nvcr.io/nvidia/tensorflow:20.08-tf2-py3{DIGEST}\nENV PYTHONHASHSEED=0\n")
    assert [(f.rule, f.severity) for f in nothing] == [("d9m-env-missing", "error")]
    assert "TF_DETERMINISTIC_OPS=1" in nothing[0].message


def test_determinism_values_and_partial_recipes() -> None:
    base = f"FROM nvcr.io/nvidia/tensorflow:21.09-tf2-py3{DIGEST}\nENV PYTHONHASHSEED=0\n"
    assert found(base + "ENV TF_DETERMINISTIC_OPS=0 TF_CUDNN_USE_FRONTEND=true\n") == {(3, "d9m-env-wrong")}
    partial = [f for f in audit_text(base + "ENV TF_DETERMINISTIC_OPS=1\n") if f.rule == "d9m-env-missing"]
    assert partial[0].severity == "warning" and "TF_CUDNN_USE_FRONTEND=1" in partial[0].message
    # A stage built FROM another stage inherits its ENV.
    staged = (
        f"FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3{DIGEST} AS base\n"
        "ENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\nFROM base\nRUN true\n"
    )
    assert found(staged) == set()


def test_unknown_tensorflow_is_said_not_guessed() -> None:
    text = f"FROM nvcr.io/nvidia/tensorflow:25.01-tf2-py3{DIGEST}\nENV PYTHONHASHSEED=0\n"
    (finding,) = audit_text(text)
    assert finding.rule == "d9m-unknown-tf" and finding.severity == "info"
    assert "25.01-tf2-py3" in finding.message and "audit with `tf` MAJOR.MINOR" in finding.fix  # a Python caller's
    assert [f.rule for f in audit_text(text, tf="2.11")] == ["d9m-env-missing"]
    for base in (
        "nvcr.io/nvidia/tensorflow:18.11-py3",
        "nvcr.io/nvidia/tensorflow:20.04-tf2-py3",
        "nvcr.io/nvidia/pytorch:22.03-py3",
        "nvcr.io/nvidia/tensorflow:latest",
    ):
        assert "d9m-unknown-tf" in {f.rule for f in audit_text(f"FROM {base}\n")}


def test_stock_tensorflow_tags_use_the_stock_recipe() -> None:
    old = f"FROM tensorflow/tensorflow:1.15.5-gpu{DIGEST}\nENV PYTHONHASHSEED=0 TF_DETERMINISTIC_OPS=1\n"
    wrong = [f for f in audit_text(old) if f.rule == "d9m-env-wrong"]
    assert wrong and "TF_CUDNN_DETERMINISTIC=1" in wrong[0].message  # 1.15 does not read TF_DETERMINISTIC_OPS
    stock = f"FROM tensorflow/tensorflow:2.4.1-gpu{DIGEST}\nENV PYTHONHASHSEED=0 TF_DETERMINISTIC_OPS=1\n"
    assert found(stock) == set()


def test_autotune_harmful_values_and_xla_auto_jit() -> None:
    # only the values the recipe table lists as harmful (0, false) or a computed one: 1 is TensorFlow's default
    text = CLEAN + "ENV TF_CUDNN_USE_AUTOTUNE=0\nENV TF_CUDNN_USE_AUTOTUNE=1\nENV TF_CUDNN_USE_AUTOTUNE=False\n"
    assert only(text, "cudnn-autotune-set") == [3, 5]
    # The misspelt name from NVIDIA's status notes is not read by TensorFlow: its own finding, not the error.
    typo = CLEAN + "ENV TF_USE_CUDNN_AUTOTUNE=0\n"
    assert only(typo, "env-no-effect") == [3] and only(typo, "cudnn-autotune-set") == []
    for flags, hit in (
        ("--tf_xla_auto_jit=2", True),
        ("--tf_xla_auto_jit=fusible", True),
        ("--tf_xla_auto_jit=1 --xla_gpu_autotune_level=0", True),
        ("--tf_xla_cpu_global_jit", True),
        ("--tf_xla_auto_jit=-1", False),
        ("--tf_xla_auto_jit=0", False),
        ("--xla_dump_to=/x", False),
    ):
        assert bool(only(CLEAN + f'ENV TF_XLA_FLAGS="{flags}"\n', "xla-auto-jit")) is hit, flags
    no_d9m = f"FROM nvcr.io/nvidia/tensorflow:25.01-tf2-py3{DIGEST}\nENV TF_XLA_FLAGS=--tf_xla_auto_jit=2\n"
    assert not only(no_d9m, "xla-auto-jit")  # only judged in images that set determinism


def test_nvidia_disable_require_and_pythonhashseed() -> None:
    assert only(CLEAN + "ENV NVIDIA_DISABLE_REQUIRE=true\n", "nvidia-disable-require") == [3]
    assert not only(CLEAN + "ENV NVIDIA_DISABLE_REQUIRE=false\n", "nvidia-disable-require")
    base = f"FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3{DIGEST}\nENV TF_DETERMINISTIC_OPS=1\n"
    assert only(base, "pythonhashseed-unset") == [1]
    assert only(base + "ENV PYTHONHASHSEED=random\n", "pythonhashseed-unset") == [3]
    assert not only(base + "ENV PYTHONHASHSEED=31337\n", "pythonhashseed-unset")


def test_horovod_needs_fusion_threshold_zero() -> None:
    assert only(CLEAN + "RUN pip install horovod==0.28.1\n", "horovod-fusion-threshold") == [3]
    assert only(
        CLEAN + "ARG HOROVOD_GPU_OPERATIONS=NCCL\nRUN pip install horovod==0.28.1\n", "horovod-fusion-threshold"
    ) == [3]
    assert only(
        CLEAN + "RUN HOROVOD_WITH_TENSORFLOW=1 pip install horovod==0.28.1\nENV HOROVOD_FUSION_THRESHOLD=64\n",
        "horovod-fusion-threshold",
    ) == [4]
    assert not only(
        CLEAN + "RUN pip install horovod==0.28.1\nENV HOROVOD_FUSION_THRESHOLD=0\n", "horovod-fusion-threshold"
    )
    assert not only(CLEAN + "RUN pip install numpy==1.0\n", "horovod-fusion-threshold")


# -- pip -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "state"),
    [
        ("numpy==1.21.0", "pinned"),
        ("numpy===1.21.0", "pinned"),
        ("Numpy[extra]==1.21.0; python_version>'3'", "pinned"),
        ("numpy==1.*", "unpinned"),
        ("numpy>=1.21", "unpinned"),
        ("numpy~=1.21", "unpinned"),
        ("numpy", "unpinned"),
        ("numpy<=1.24.3, >=1.22.3", "unpinned"),
        ("git+https://github.com/NVIDIA/dllogger", "unpinned"),
        ("git+https://github.com/NVIDIA/dllogger@v1.0.0#egg=dllogger", "unpinned"),
        ("git+https://github.com/NVIDIA/dllogger@0123abcd#egg=dllogger", "pinned"),
        ("dllogger @ git+https://github.com/NVIDIA/dllogger@0123abcd", "pinned"),
        ("https://files.example.com/pkg-1.0-py3-none-any.whl", "pinned"),
        (".", "local"),
        ("/tmp/wheels/a-1.0-py3-none-any.whl", "local"),
        ("./pkg", "local"),
        ("tensorflow-addons==${TFA}", "pinned"),
        ("${PKG}", "unknown"),
    ],
)
def test_pip_spec_states(spec: str, state: str) -> None:
    assert spec_state(spec) == state


@pytest.mark.parametrize(
    ("run", "expected"),
    [
        ("pip install numpy", {"pip-unpinned", "pip-no-hashes"}),
        ("pip3 install numpy==1.21.0", {"pip-no-hashes"}),
        ("python3 -m pip --no-cache-dir install -U pip", {"pip-unpinned", "pip-no-hashes"}),
        ("pip install --require-hashes -r req.txt", set()),
        ("pip install -r req.txt", {"pip-requirements-file"}),
        ("pip install -c constraints.txt numpy", {"pip-requirements-file", "pip-no-hashes"}),
        ("pip install -e . && pip install --no-deps /wheels/*.whl", set()),
        ("pip install --extra-index-url https://idx numpy", {"pip-unpinned", "pip-no-hashes", "pip-extra-index"}),
        ("pip install -i https://idx numpy==1.0", {"pip-no-hashes"}),
        ("PIP_EXTRA_INDEX_URL=https://idx pip install numpy", {"pip-unpinned", "pip-no-hashes", "pip-extra-index"}),
        ("pip install https://x/a-1.0-py3-none-any.whl#sha256=" + "0" * 64, set()),
        ("pip uninstall -y numpy && pip list && pip freeze > /r.txt", set()),
        ("pip wheel --no-deps -w /w regex", {"pip-unpinned", "pip-no-hashes"}),
        ('bash -c "pip install numpy"', {"pip-unpinned", "pip-no-hashes"}),
    ],
)
def test_pip_rules(run: str, expected: set[str]) -> None:
    rules = {r for line, r in found(CLEAN + f"RUN {run}\n") if line == 3}
    assert rules == expected


def test_pip_findings_are_one_per_run_and_list_every_package() -> None:
    findings = [f for f in audit_text(CLEAN + "RUN pip install a && pip install b==1 c\n") if f.rule == "pip-unpinned"]
    assert len(findings) == 1 and findings[0].message.endswith("a, c")


def test_pip_env_from_dockerfile_indexes_and_hashes() -> None:
    indexed = found(CLEAN + "ENV PIP_EXTRA_INDEX_URL=https://idx\nRUN pip install a\n")
    assert "pip-extra-index" in {r for _, r in indexed}
    assert not {r for _, r in found(CLEAN + "ENV PIP_REQUIRE_HASHES=1\nRUN pip install -r r.txt\n")}


# -- apt, ADD, curl | sh, git -------------------------------------------------------------------------
def test_apt_versions_and_snapshots() -> None:
    assert only(
        CLEAN + "RUN apt-get update && apt-get install -y --no-install-recommends curl git=1:2.25\n", "apt-unpinned"
    ) == [3]
    assert not only(CLEAN + "RUN apt-get install -y curl=7.68.0-1ubuntu2.7 ./local.deb\n", "apt-unpinned")
    snap = "RUN echo 'deb http://snapshot.ubuntu.com/ubuntu/20240301T000000Z focal main' > /etc/apt/sources.list\n"
    assert not only(CLEAN + snap + "RUN apt-get update && apt install -y curl\n", "apt-unpinned")
    assert not only(
        CLEAN + "RUN apt-get update --snapshot 20240301T000000Z && apt-get install -y --snapshot "
        "20240301T000000Z curl\n",
        "apt-unpinned",
    )
    inherited = f"FROM x:1{DIGEST} AS a\n{snap}FROM a\nRUN apt-get install -y curl\n"
    assert not only(inherited, "apt-unpinned")
    assert only(CLEAN + "RUN apt-get install -y curl\n" + snap, "apt-unpinned") == [3]  # snapshot came too late


def test_add_url() -> None:
    assert only(CLEAN + "ADD https://x/model.tar.gz /m/\n", "add-url") == [3]
    assert not only(CLEAN + "ADD --checksum=sha256:" + "1" * 64 + " https://x/model.tar.gz /m/\n", "add-url")
    assert not only(CLEAN + "ADD model.tar.gz /m/\nADD https://github.com/a/b.git#0123abcd /src\n", "add-url")


@pytest.mark.parametrize(
    ("run", "hit"),
    [
        ("curl -fsSL https://x/i.sh | bash", True),
        ("curl -fsSL https://x/i.sh | sudo -E bash -", True),
        ("wget -qO- https://x/i.sh | sh -s -- --yes", True),
        ("curl https://bootstrap.pypa.io/get-pip.py | python3", True),
        ('sh -c "$(curl -fsSL https://x/i.sh)"', True),
        ("bash <(curl -s https://x/i.sh)", True),
        ("curl -fsSL https://x/a.tar.gz | tar xz -C /opt", False),
        ("curl -fsSLo /tmp/i.sh https://x/i.sh && sha256sum -c sums && bash /tmp/i.sh", False),
    ],
)
def test_curl_pipe_shell(run: str, hit: bool) -> None:
    assert bool(only(CLEAN + f"RUN {run}\n", "curl-pipe-shell")) is hit


@pytest.mark.parametrize(
    ("runs", "unpinned"),
    [
        (["git clone https://github.com/a/b"], [3]),
        (["git clone --depth 1 -b main https://github.com/a/b.git /opt/b"], [3]),
        (["git clone https://github.com/a/b.git && cd b && git checkout 0123abcd"], []),
        (["git clone https://github.com/a/b.git /opt/b && git -C /opt/b checkout -q 0123abcdef0123abcdef"], []),
        (["git clone --revision=0123abcd https://github.com/a/b.git"], []),
        (["git clone https://github.com/a/b.git /src/b", "cd /src/b && git checkout 0123abcd"], []),
        (["git clone https://github.com/a/b.git && cd b && git fetch origin 0123abcd && git checkout FETCH_HEAD"], []),
        (
            [
                "git clone https://github.com/a/b.git && git clone https://github.com/a/c.git && cd c && "
                "git checkout 0123abcd"
            ],
            [3],
        ),
    ],
)
def test_git_clone_pins(runs: list[str], unpinned: list[int]) -> None:
    text = CLEAN + "".join(f"RUN {r}\n" for r in runs)
    assert only(text, "git-clone-unpinned") == unpinned


def test_git_checkout_after_workdir() -> None:
    text = CLEAN + (
        "WORKDIR /opt\nRUN git clone https://github.com/a/models.git\nWORKDIR /opt/models\nRUN git checkout 0123abcd\n"
    )
    assert not only(text, "git-clone-unpinned")


def test_unparsable_shell_is_reported_not_guessed() -> None:
    assert found(CLEAN + "RUN echo 'unterminated && pip install numpy\n") == {(3, "shell-unparsed")}


def test_target_selects_the_audited_image() -> None:
    text = (
        f"FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3{DIGEST} AS train\n"
        "ENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n"
        f"FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3{DIGEST} AS bare\n"
    )
    assert found(text) == {(3, "d9m-env-missing"), (3, "pythonhashseed-unset")}
    assert found(text, target="train") == set()


def test_apt_snapshot_written_by_a_heredoc() -> None:
    text = CLEAN + (
        "RUN cat <<EOF > /etc/apt/sources.list && apt-get update && apt-get install -y curl\n"
        "deb http://snapshot.ubuntu.com/ubuntu/20240301T000000Z jammy main\n"
        "EOF\n"
    )
    assert not only(text, "apt-unpinned")
