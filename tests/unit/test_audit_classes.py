"""Hazard classes the audit used to miss, each from a minimal Dockerfile: floating tags, package sources
(find-links, nvidia-pyindex, pip config), trusted hosts, release-tag clones, checkouts in a later RUN,
backtick and arithmetic substitutions."""

from __future__ import annotations

import pytest

from envpin.audit import audit_text
from envpin.audit.rules.base_image import floating_tag
from envpin.audit.shell import parse_script

DIGEST = "@sha256:" + "cd" * 32
BASE = f"FROM python:3.11{DIGEST}\nENV PYTHONHASHSEED=0\n"


def rules(text: str) -> set[tuple[int, str]]:
    return {(f.line, f.rule) for f in audit_text(text, tolerant=True) if f.rule != "d9m-unknown-tf"}


@pytest.mark.parametrize(
    "tag, floating",
    [
        ("latest", True),
        ("latest-gpu", True),
        ("latest-gpu-py3", True),
        ("nightly", True),
        ("nightly-gpu", True),
        ("devel-gpu", True),
        ("2.4.0-gpu", False),
        ("20.02-tf2-py3", False),
        ("3.11-slim", False),
        ("gpu-latest", True),
        ("latency-1.0", False),
    ],
)
def test_floating_tags(tag: str, floating: bool) -> None:
    assert floating_tag(tag) is floating


def test_a_floating_tag_is_reported_like_latest() -> None:
    found = audit_text("FROM tensorflow/tensorflow:latest-gpu-py3\nENV PYTHONHASHSEED=0\n")
    f = next(f for f in found if f.rule == "from-latest")
    assert f.severity == "error" and "floating tag :latest-gpu-py3" in f.message
    assert "from-no-digest" not in {f.rule for f in found}


@pytest.mark.parametrize(
    "run, expected",
    [
        # -f with a pinned but unhashed version: either source may serve torch==1.8.0
        (
            "pip install torch==1.8.0 -f https://download.pytorch.org/whl/torch_stable.html",
            {"pip-extra-index", "pip-no-hashes"},
        ),
        ("pip install --find-links=/wheels torch==1.8.0", {"pip-extra-index", "pip-no-hashes"}),
        # one alternative index and a pinned version: no second source to confuse it with
        ("pip install -i https://idx numpy==1.0", {"pip-no-hashes"}),
        ("pip install --require-hashes -r req.txt -f https://x/links", set()),
        ("pip install --trusted-host pypi.internal numpy==1.0", {"pip-trusted-host", "pip-no-hashes"}),
        ("PIP_TRUSTED_HOST='a b' pip install numpy==1.0", {"pip-trusted-host", "pip-no-hashes"}),
    ],
)
def test_package_sources(run: str, expected: set[str]) -> None:
    assert {r for _, r in rules(BASE + f"RUN {run}\n")} == expected


def test_nvidia_pyindex_adds_a_source_for_the_rest_of_the_stage_and_its_children() -> None:
    text = (
        BASE + "RUN pip install nvidia-pyindex==1.0.9\n"
        "RUN pip install nvidia-tensorflow==1.15.5+nv22.12\n"
        f"FROM python:3.11{DIGEST} AS other\nENV PYTHONHASHSEED=0\nRUN pip install numpy==1.0\n"
    )
    found = rules(text)
    assert (4, "pip-extra-index") in found and (3, "pip-extra-index") not in found
    assert (7, "pip-extra-index") not in found  # another base: pip's configuration is not inherited
    child = BASE.replace("FROM python", "FROM python") + "RUN pip install nvidia-pyindex==1.0.9\n"
    child = child.replace(f"{DIGEST}\n", f"{DIGEST} AS base\n", 1) + "FROM base\nRUN pip install x==1.0\n"
    assert (5, "pip-extra-index") in rules(child)


def test_pip_config_set_is_a_source_and_a_trusted_host() -> None:
    text = (
        BASE + "RUN pip config set global.extra-index-url https://idx && "
        "pip config set global.trusted-host idx\nRUN pip install numpy==1.0\n"
    )
    found = rules(text)
    assert {(4, "pip-extra-index"), (4, "pip-trusted-host")} <= found


@pytest.mark.parametrize(
    "runs, expected",
    [
        (["git clone --branch v2.4.3 https://github.com/a/b"], {(3, "git-clone-tag")}),
        (["git clone -b r1.15 https://github.com/a/b"], {(3, "git-clone-tag")}),
        (["git clone -b main https://github.com/a/b"], {(3, "git-clone-unpinned")}),
        (["git clone https://github.com/a/b /src && git -C /src checkout 2.4.3"], {(3, "git-clone-tag")}),
        (["git clone https://github.com/a/b /src", "git -C /src checkout 0123abc"], set()),
        (["git clone $REPO /src", "cd /src && git checkout $SHA"], set()),  # SHA has no default: cannot be judged
    ],
)
def test_git_pins(runs: list[str], expected: set[tuple[int, str]]) -> None:
    text = BASE + "".join(f"RUN {r}\n" for r in runs)
    assert {x for x in rules(text) if x[1].startswith("git-")} == expected


def test_a_checkout_of_a_variable_is_judged_by_its_value() -> None:
    branch = BASE + "ARG REF=main\nRUN git clone https://github.com/a/b /src\nRUN git -C /src checkout $REF\n"
    assert (4, "git-clone-unpinned") in rules(branch)
    commit = branch.replace("REF=main", "REF=0123456789abcdef0123456789abcdef01234567")
    assert not {x for x in rules(commit) if x[1].startswith("git-")}


def test_backtick_substitution_is_a_command_substitution() -> None:
    assert (3, "curl-pipe-shell") in rules(BASE + "RUN echo `curl -s https://x/i.sh | sh`\n")
    assert (3, "curl-pipe-shell") in rules(BASE + 'RUN X="`curl -fsSL https://x/i.sh | bash`"\n')
    assert not rules(BASE + "RUN echo '`curl -s https://x/i.sh | sh`'\n")  # single quotes: literal text


def test_arithmetic_expansion_is_not_a_command() -> None:
    script = parse_script("echo $((1+2)) && n=$(( 3 * (4 + 1) )) && echo $(date)")
    assert [c.argv for c in script.commands() if c.argv] == [["echo", "0"], ["echo", "$(…)"], ["date"]]
