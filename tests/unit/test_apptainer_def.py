"""The Apptainer definition, section by section against Apptainer's definition-file documentation, and
against the Dockerfile rendered from the same plan (same base, environment, build steps and labels).

Apptainer is not installable here, so the rules it applies when it reads a definition are checked by a
parser written from its documentation (https://apptainer.org/docs/user/main/definition_files.html):

* header: ``Keyword: value`` lines; ``Bootstrap`` must be the first keyword, ``From`` names the base for
  the docker agent; ``#`` starts a comment;
* sections: a line whose first word starts with ``%`` opens a section (so no other line may start with
  one), sections of the same name are appended to one another, and a line starting with ``Bootstrap:``
  opens a new build stage;
* ``%files``: ``<source> [<destination>]`` per line, copied in before ``%post`` runs;
* ``%environment``: sourced at run time, not during the build, so ``%post`` exports what it needs itself;
* ``%labels``: ``NAME value``: the label's name is the text up to the first space, the rest its value;
* ``{{ name }}`` anywhere is a build-argument placeholder (templating) that Apptainer substitutes or
  refuses, so a generated file must not contain one.

The shell sections are checked by the shell itself (``sh -n``; ``%environment`` is sourced by ``sh`` and
the variables it exports are compared with what the Dockerfile's ENV gives): those checks start a shell, so
they are tests/cli/test_apptainer_def.py, which uses this module's parser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from envpin.audit import parser as dockerfile
from envpin.environment.plan import make_plan
from envpin.environment.render import DEF_NAME, render

#: Every section name Apptainer's definition files know (the SCIF %app* ones take an app name).
DOCUMENTED_SECTIONS = {
    "arguments",
    "setup",
    "files",
    "post",
    "test",
    "environment",
    "startscript",
    "runscript",
    "labels",
    "help",
    "pre",
}
APP_SECTIONS = {"appinstall", "applabels", "appfiles", "appenv", "apptest", "apphelp", "apprun", "appstart"}
#: Header keywords the docker bootstrap agent reads.
DOCKER_HEADER = {"bootstrap", "from", "stage", "registry", "namespace", "fingerprints"}
EXPECTED_SECTIONS = ["files", "post", "environment", "runscript", "test", "labels", "help"]
_PLACEHOLDER = re.compile(r"{{\s*\w+\s*}}")  # Apptainer's build-argument pattern
_LABEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")


@dataclass
class Section:
    name: str
    args: str
    line: int
    body: list[str] = field(default_factory=list)

    @property
    def lines(self) -> list[str]:
        """Non-blank lines without their indentation, comments dropped."""
        return [ln.strip() for ln in self.body if ln.strip() and not ln.strip().startswith("#")]

    @property
    def script(self) -> str:
        return "\n".join(self.body) + "\n"


@dataclass
class Definition:
    header: list[tuple[str, str]]
    sections: list[Section]

    def section(self, name: str) -> Section:
        (found,) = [s for s in self.sections if s.name == name]
        return found


def parse_definition(text: str) -> Definition:
    """Header keywords and sections as Apptainer splits them; AssertionError for what it would misread."""
    header: list[tuple[str, str]] = []
    sections: list[Section] = []
    for number, raw in enumerate(text.splitlines(), 1):
        words = raw.split()
        if words and words[0].startswith("%"):
            sections.append(Section(words[0][1:].lower(), " ".join(words[1:]), number))
            continue
        if sections:
            assert not re.match(r"(?i)\s*bootstrap:", raw), f"line {number} would open a new build stage"
            sections[-1].body.append(raw)
            continue
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, colon, value = line.partition(":")
        assert colon, f"header line {number} is not 'Keyword: value': {raw!r}"
        header.append((key.strip().lower(), value.strip()))
    return Definition(header, sections)


def _docker_facts(text: str) -> tuple[str, dict[str, str], list[tuple[str, str]], list[tuple[list[str], str]]]:
    """(FROM image, ENV as written, LABEL pairs, [(ENV names set before it, command)] per RUN) of a Dockerfile."""
    df = dockerfile.parse(text)
    stage = df.stage()
    env: dict[str, str] = {}
    labels: list[tuple[str, str]] = []
    runs: list[tuple[list[str], str]] = []
    for ins in stage.instructions:
        if ins.keyword in ("ENV", "ARG"):  # a RUN sees both
            env.update({p.key: p.raw or "" for p in ins.pairs})
        elif ins.keyword == "LABEL":
            labels.extend((p.key, p.value or "") for p in ins.pairs)
        elif ins.keyword == "RUN":
            runs.append((list(env), ins.args))
    return stage.image, env, labels, runs


def test_pinned_definition_names_the_digest_alone(tmp_path: Path) -> None:
    digest = "sha256:" + "d" * 64
    plan = make_plan(ngc="20.02-tf2-py3", base_digest=digest)
    text = render(plan, ("apptainer",))[DEF_NAME].decode()
    assert f"From: nvcr.io/nvidia/tensorflow@{digest}\n" in text
    assert "nvcr.io/nvidia/tensorflow:20.02-tf2-py3, pinned by its digest alone" in text
    unpinned = render(make_plan(ngc="20.02-tf2-py3"), ("apptainer",))[DEF_NAME].decode()
    assert "From: nvcr.io/nvidia/tensorflow:20.02-tf2-py3\n" in unpinned and "# Not pinned:" in unpinned


def test_parser_rejects_what_apptainer_would_misread() -> None:
    """The checks above have teeth: a stray section line, a second stage, a bad header."""
    good = "Bootstrap: docker\nFrom: ubuntu:22.04\n\n%post\n    echo hi\n"
    assert [s.name for s in parse_definition(good).sections] == ["post"]
    assert [s.name for s in parse_definition(good + "%labels extra\n").sections] == ["post", "labels"]
    with pytest.raises(AssertionError, match="new build stage"):
        parse_definition(good + "Bootstrap: docker\n")
    with pytest.raises(AssertionError, match="not 'Keyword: value'"):
        parse_definition("Bootstrap docker\n%post\n")
    assert _PLACEHOLDER.search("echo {{ VERSION }}")
