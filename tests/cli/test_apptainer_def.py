"""The Apptainer definition's shell sections, checked by the shell itself: ``sh -n`` on %post, %runscript and
%test, and %environment sourced by ``sh`` against what the Dockerfile's ENV gives, for a set of plans and for
every recipe in the catalog. The definition-file rules (parser, header, sections) are
tests/unit/test_apptainer_def.py; these start a shell for each plan."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from envpin.environment.plan import BuildPlan, make_plan
from envpin.environment.render import DEF_NAME, render
from envpin.errors import EnvpinError
from envpin.knowledge import catalog
from envpin.portable import imageref
from tests.unit.test_apptainer_def import (
    _LABEL_NAME,
    _PLACEHOLDER,
    APP_SECTIONS,
    DOCKER_HEADER,
    DOCUMENTED_SECTIONS,
    EXPECTED_SECTIONS,
    Definition,
    _docker_facts,
    parse_definition,
)

SH = shutil.which("sh") or "/bin/sh"


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
