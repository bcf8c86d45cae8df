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
the variables it exports are compared with what the Dockerfile's ENV gives).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from envpin.audit import parser as dockerfile
from envpin.environment.plan import BuildPlan, make_plan
from envpin.environment.render import DEF_NAME, render
from envpin.errors import EnvpinError
from envpin.knowledge import catalog
from envpin.portable import imageref

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
SH = shutil.which("sh") or "/bin/sh"


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


def _sourced(script: str, environ: dict[str, str]) -> dict[str, str]:
    """The variables a POSIX shell exports after sourcing `script` from `environ` (nothing else inherited)."""
    code = script + "\nenv -0\n"
    out = subprocess.run([SH, "-c", code], env=environ, capture_output=True, check=True, timeout=30).stdout
    pairs = (item.decode().split("=", 1) for item in out.split(b"\0") if item)
    return {k: v for k, v in pairs if k not in ("PWD", "SHLVL", "_")}


def _docker_values(env: dict[str, str], environ: dict[str, str]) -> dict[str, str]:
    """ENV values as the builder expands them against the base image's environment (${VAR:+word} as in sh)."""
    code = "".join(f'printf "%s\\0" "{raw}"\n' for raw in env.values())
    out = subprocess.run([SH, "-c", code], env=environ, capture_output=True, check=True, timeout=30).stdout
    return dict(zip(env, (v.decode() for v in out.split(b"\0")[:-1]), strict=True))


def _plans(tmp_path: Path) -> list[BuildPlan]:
    req = tmp_path / "requirements.lock"
    req.write_text("six==1.16.0 \\\n    --hash=sha256:" + "a" * 64 + "\n")
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    digest = "sha256:" + "c" * 64
    return [
        make_plan(ngc="20.02-tf2-py3"),
        make_plan(ngc="19.10-py3", requirements=req),  # Python 3.6: pip without .pyc
        make_plan(ngc="25.02-tf2-py3", tf="2.17", ca_bundle=ca, requirements=req),
        make_plan(
            ngc="20.02-tf2-py3",
            requirements=req,
            ca_bundle=ca,
            base_digest=digest,
            base_image="registry.example.com/mirror/tensorflow:20.02-tf2-py3",
        ),
        make_plan(ngc="21.06-tf2-py3", base_image="127.0.0.1:5000/nvidia/tensorflow:21.06-tf2-py3@" + digest),
    ]


def check_definition(plan: BuildPlan) -> Definition:
    """Every documented rule the definition must follow, and its agreement with the Dockerfile."""
    files = render(plan, ("docker", "apptainer"))
    text = files[DEF_NAME].decode()
    assert not _PLACEHOLDER.search(text), "Apptainer would read a build-argument placeholder"
    d = parse_definition(text)

    # Header: Bootstrap first, docker agent, From = the Dockerfile's base, a reference Apptainer accepts.
    assert d.header[0] == ("bootstrap", "docker")
    assert [k for k, _ in d.header] == ["bootstrap", "from"] and {k for k, _ in d.header} <= DOCKER_HEADER
    source = dict(d.header)["from"]
    ref = imageref.parse(source)  # raises for anything that is not an image reference
    docker_from, env, labels, runs = _docker_facts(files["Dockerfile"].decode())
    want = imageref.parse(docker_from)
    assert (ref.name, ref.digest) == (want.name, want.digest)
    assert ref.tag is None if want.digest else ref.tag == want.tag, "a tag and a digest together are refused"

    # Sections: documented names, each once, in the order they run.
    names = [s.name for s in d.sections]
    assert set(names) <= DOCUMENTED_SECTIONS | APP_SECTIONS
    assert names == EXPECTED_SECTIONS, names
    assert len(names) == len(set(names)), "sections of one name would be appended to one another"

    # %files: source and absolute destination; the sources are exactly the payload files the folder holds.
    pairs = [ln.split() for ln in d.section("files").lines]
    assert all(len(p) == 2 and p[1].startswith("/") for p in pairs), pairs
    shared = {"plan.json", "envpin.pyz", "requirements.lock", "ca-bundle.crt"}
    assert {p[0] for p in pairs} == shared & set(files)
    copies = {p[1] for p in pairs}
    docker_copies = {line.split()[2] for line in files["Dockerfile"].decode().splitlines() if line.startswith("COPY ")}
    assert copies == docker_copies, "the same files land in the same places"

    # %environment: sourced by sh at run time, it gives what Docker's ENV gives, whatever the base had.
    environment = d.section("environment")
    assert all(ln.startswith("export ") for ln in environment.lines)
    for base in ({}, {"PYTHONPATH": "/usr/local/lib/base"}):
        got = _sourced(environment.script, {"PATH": "/usr/bin:/bin", **base})
        docker = _docker_values({k: v for k, v in env.items() if k != "SOURCE_DATE_EPOCH"}, base)
        assert {k: got.get(k) for k in docker} == docker
    assert set(plan.recipe.env_dict()) <= set(got)

    # %post: valid sh; the Dockerfile's RUN commands, each after the variables Docker sets before it.
    post = d.section("post")
    assert "\n".join(post.body).strip(), "%post is empty"
    for name in ("post", "runscript", "test"):
        subprocess.run([SH, "-n", "-c", d.section(name).script], check=True, timeout=30)
        first = d.section(name).body[0].strip() if d.section(name).body else ""
        assert not first.startswith("#!"), f"%{name} would be run by {first}"
    flat_post = " ".join(post.script.replace("\\\n", " ").split())  # continuations joined, as sh joins them
    for before, command in runs:
        at = flat_post.find(" ".join(command.split()))
        assert at >= 0, f"%post lacks the Dockerfile's RUN {command[:60]}"
        for name in before:
            assert f"export {name}=" in flat_post[:at], f"{name} is not exported before: {command[:60]}"
    assert set(plan.recipe.env_dict()) <= {m for m in re.findall(r"export (\w+)=", flat_post)}

    # %runscript removes what the recipe forbids and runs the command; %test runs the self-test.
    runscript = d.section("runscript").script
    for forbidden in plan.recipe.unset:
        assert f"unset {forbidden['name']}" in runscript
    assert 'exec "$@"' in runscript
    assert "python3 -m envpin.probe.selftest" in d.section("test").script

    # %labels: NAME value, the Docker labels exactly.
    label_lines = d.section("labels").lines
    parsed = [tuple(ln.split(" ", 1)) for ln in label_lines]
    assert all(len(p) == 2 and _LABEL_NAME.match(p[0]) and p[1].strip() for p in parsed), label_lines
    assert len({p[0] for p in parsed}) == len(parsed), "a label name appears twice"
    assert parsed == labels

    assert d.section("help").lines, "%help is empty"
    return d


def test_definition_follows_the_documentation_and_mirrors_the_dockerfile(tmp_path: Path) -> None:
    for plan in _plans(tmp_path):
        check_definition(plan)


def test_every_recipe_in_the_catalog_renders_a_sound_definition() -> None:
    """One release per recipe, flavor and pip mode the catalog holds, so every recipe's text (summary, reasons)
    and both install variants pass through the rules."""
    seen = set()
    for entry in catalog.load().select(None):
        try:
            plan = make_plan(ngc=entry.tag)
        except EnvpinError:
            continue  # Python 2 images, Python < 3.6, or a TensorFlow version no source gives
        key = (plan.recipe.id, plan.pip_compiles_reproducibly, entry.flavor)
        if key not in seen:
            seen.add(key)
            check_definition(plan)
    assert len({recipe for recipe, _, _ in seen}) >= 4, seen


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
