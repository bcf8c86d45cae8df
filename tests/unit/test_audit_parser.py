"""The audit's Dockerfile parser and shell splitter: lines, continuations, scopes, stages, argv."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envpin.audit.parser import DockerfileError, parse, read
from envpin.audit.shell import parse_script, run_script
from envpin.audit.words import MAX_SUBSTITUTION_NESTING, Var, _Braces, expand


def _kw(df) -> list[tuple[str, int, int]]:  # type: ignore[no-untyped-def]
    return [(i.keyword, i.line, i.end_line) for i in df.instructions]


def test_continuations_comments_and_first_lines() -> None:
    df = parse(
        "FROM ubuntu:20.04\n"
        "\n"
        "# a comment\n"
        "RUN apt-get update && \\\n"
        "    # a comment inside the continuation is dropped, as the builder does\n"
        "\n"
        "    apt-get install -y curl  \\   \n"
        "    && echo done\n"
        "  env A=1\n"
    )
    assert _kw(df) == [("FROM", 1, 1), ("RUN", 4, 8), ("ENV", 9, 9)]
    run = df.instructions[1]
    assert run.args == "apt-get update &&     apt-get install -y curl      && echo done"
    assert df.instructions[2].pairs[0].key == "A" and df.instructions[2].indent == "  "


def test_escape_directive_backtick_and_directives_only_at_top() -> None:
    df = parse("# escape=`\n# syntax=docker/dockerfile:1\nFROM x:1\nRUN echo C:\\dir `\n    && echo b\n")
    assert df.escape == "`" and df.directives == {"escape": "`", "syntax": "docker/dockerfile:1"}
    assert df.instructions[1].args == "echo C:\\dir     && echo b"
    late = parse("# just a comment\n# escape=`\nFROM x:1\nRUN echo a \\\n  b\n")
    assert late.escape == "\\" and late.instructions[1].args == "echo a   b"


def test_exec_form_flags_and_shell_fallback() -> None:
    df = parse(
        "FROM --platform=$BUILDPLATFORM x:1 AS build\n"
        'RUN --mount=type=cache,target=/root/.cache/pip ["pip", "install", "a==1"]\n'
        "RUN [not json] && echo hi\n"
        "COPY --from=build --chown=1:1 /a /b\n"
    )
    frm, run_json, run_shell, copy = df.instructions
    assert frm.flags == {"platform": "$BUILDPLATFORM"} and df.stages[0].name == "build"
    assert run_json.exec_form == ["pip", "install", "a==1"] and "mount" in run_json.flags
    assert run_shell.exec_form is None and run_shell.args == "[not json] && echo hi"
    assert copy.flags == {"from": "build", "chown": "1:1"}


def test_arg_scoping_across_from_and_stages() -> None:
    df = parse(
        "ARG BASE=nvcr.io/nvidia/tensorflow\n"
        "ARG TAG=21.06-tf2-py3\n"
        "FROM ${BASE}:${TAG} AS one\n"
        "RUN echo $TAG\n"
        "ARG TAG\n"
        "RUN echo $TAG\n"
        "FROM ${BASE}:${TAG:-x}\n"
    )
    one, two = df.stages
    assert one.image == "nvcr.io/nvidia/tensorflow:21.06-tf2-py3" and two.image == one.image
    first_run, second_run = (i for i in one.instructions if i.keyword == "RUN")
    assert "TAG" not in first_run.scope  # global ARGs are visible to FROM only
    assert second_run.scope["TAG"].value == "21.06-tf2-py3"  # `ARG TAG` in the stage takes the default
    overridden = parse("ARG TAG=1\nFROM img:${TAG}\n", build_args={"TAG": "2"})
    assert overridden.stages[0].image == "img:2"


def test_env_substitution_forms_and_same_instruction_rule() -> None:
    df = parse(
        "FROM x:1\n"
        "ARG EMPTY\n"
        "ENV A=a\n"
        "ENV B=${A}b C=${NOPE:-dflt} D=${A:+set} E=${EMPTY:-was-unset} F='$A' G=\\$A H=${A-x} A=new I=$A\n"
        "ENV P=/opt/bin:$PATH\n"
    )
    env = df.stages[0].env
    values = {k: env[k].value for k in "BCDEFGHI"}
    assert values == {
        "B": "ab",
        "C": "${NOPE:-dflt}",
        "D": "set",
        "E": "was-unset",
        "F": "$A",
        "G": "$A",
        "H": "a",
        "I": "a",
    }
    assert env["A"].value == "new"  # the instruction's own pairs see the values from before it
    assert env["C"].unresolved == ("NOPE",)  # undeclared: it may come from the base image, so not guessed
    assert env["P"].value == "/opt/bin:$PATH" and env["P"].unresolved == ("PATH",)


def test_from_scope_is_closed_and_legacy_env() -> None:
    df = parse("ARG TAG\nFROM img:${TAG:-fallback} AS a\nFROM img:$TAG\nENV NAME some value with spaces\n")
    assert df.stages[0].image == "img:fallback" and df.stages[0].unresolved == ()
    assert df.stages[1].image == "img:$TAG" and df.stages[1].unresolved == ("TAG",)
    assert df.stages[1].env["NAME"].value == "some value with spaces"


def test_stages_inherit_env_only_from_their_parent() -> None:
    df = parse("FROM x:1 AS base\nENV K=1\nFROM y:1 AS other\nFROM BASE AS child\nENV L=2\n")
    base, other, child = df.stages
    assert child.parent == base.index and other.parent is None
    assert set(child.env) == {"K", "L"} and other.env == {}
    assert df.chain(child) == [base, child] and df.stage("child") is child and df.stage() is child
    with pytest.raises(DockerfileError, match="no stage named 'nope'"):
        df.stage("nope")


def test_heredocs_are_read_as_part_of_the_instruction() -> None:
    df = parse("FROM x:1\nRUN <<EOF\npip install requests\nEOF\nCOPY <<-END /etc/x\n\tline\n\tEND\nRUN echo after\n")
    assert _kw(df) == [("FROM", 1, 1), ("RUN", 2, 4), ("COPY", 5, 7), ("RUN", 8, 8)]
    assert df.instructions[1].heredocs[0].body == "pip install requests\n"
    cmds = [c.argv for c in run_script(df.instructions[1]).script.commands()]
    assert ["pip", "install", "requests"] in cmds


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("RUN echo hi\nFROM x:1\n", 1, "RUN before the first FROM"),
        ("ARG A=1\nFROM x:1\nRUNN echo\n", 3, "unknown instruction 'RUNN'"),
        ("FROM x:1\nRUN echo \\\n  more \\\n", 2, "file ends there"),
        ("FROM x:1\nRUN echo \\\n# only a comment follows\n", 2, "file ends there"),
        ("", 1, "no FROM instruction"),
        ("# comment only\nARG X=1\n", 1, "no FROM instruction"),
        ("FROM x:1\nENV A\n", 2, "ENV A has no value"),
        ('FROM x:1\nENV A="b\n', 2, "unterminated"),
        ("FROM x:1\nENV =b\n", 2, "NAME=VALUE"),
        ("FROM x:1 AS a\nFROM y:1 AS A\n", 2, "stage name 'a' is already used"),
        ("FROM x:1 AS\n", 1, "FROM takes an image"),
        ("FROM x:1\nCOPY onlyone\n", 2, "needs a source and a destination"),
        ("FROM x:1\nRUN <<EOF\necho\n", 2, "never terminated"),
        ("# escape=x\nFROM x:1\n", 1, "invalid escape directive"),
        ("FROM x:1\nSHELL /bin/sh -c\n", 2, "SHELL must be a JSON array"),
        ("FROM x:1\nONBUILD FROM y\n", 2, "ONBUILD cannot trigger FROM"),
    ],
)
def test_parse_errors_name_file_and_line(text: str, line: int, fragment: str) -> None:
    with pytest.raises(DockerfileError) as exc:
        parse(text, "ctx/Dockerfile")
    assert exc.value.message.startswith(f"ctx/Dockerfile:{line}: "), exc.value.message
    assert fragment in exc.value.message
    assert "\n" not in exc.value.message


def test_read_rejects_binary_non_utf8_missing_and_directories(tmp_path: Path) -> None:
    binary = tmp_path / "bin"
    binary.write_bytes(b"FROM x:1\nRUN a\n\x00\x01")
    latin = tmp_path / "latin"
    latin.write_bytes(b"FROM x:1\nLABEL a=\xe9\n")
    for path, fragment in (
        (binary, f"{binary}:3: binary file"),
        (latin, f"{latin}:2: not UTF-8"),
        (tmp_path / "missing", "no such file"),
        (tmp_path, "is a directory"),
    ):
        with pytest.raises(DockerfileError, match=re.escape(fragment)):
            read(str(path))
    crlf = tmp_path / "crlf"
    crlf.write_bytes("\ufeffFROM x:1\r\nRUN a \\\r\n  b\r\n".encode())
    assert read(str(crlf)).instructions[1].args == "a   b"


def test_shell_split_gives_real_argv() -> None:
    script = parse_script(
        "set -ex; apt-get update && apt-get install -y a 'b c'=1 2>&1 | tee /log || true; "
        "sudo -H -u root env PIP_NO_CACHE_DIR=1 pip3 install x; "
        "X=1 nohup python3 -m pip install y > /dev/null"
    )
    pipes = [[c.argv for c in p] for p in script.pipelines]
    assert pipes == [
        [["set", "-ex"]],
        [["apt-get", "update"]],
        [["apt-get", "install", "-y", "a", "b c=1"], ["tee", "/log"]],
        [["true"]],
        [["pip3", "install", "x"]],
        [["python3", "-m", "pip", "install", "y"]],
    ]
    cmds = list(script.commands())
    assert cmds[5].assigns == {"PIP_NO_CACHE_DIR": "1"} and cmds[6].assigns == {"X": "1"}


def test_shell_nested_scripts() -> None:
    script = parse_script(
        'bash -o pipefail -c "curl -s https://x/i.sh | sh"; sh -c "$(wget -qO- https://y)"; '
        "bash <(curl -fsSL https://z); if true; then pip install a; fi; # pip install commented-out"
    )
    names = [c.name for c in script.commands()]
    assert names.count("curl") == 2 and "wget" in names and "pip" in names
    assert all(c.argv[:3] != ["pip", "install", "commented-out"] for c in script.commands())
    bash_c = script.pipelines[0][0]
    assert [[c.name for c in p] for p in bash_c.via_c[0].pipelines] == [["curl", "sh"]]


def test_run_script_substitutes_arg_and_env_but_not_single_quotes() -> None:
    df = parse("FROM x:1\nARG V=1.2\nENV PKGS=\"a b\"\nRUN pip install foo==$V $PKGS 'lit$V'\n")
    cmd = next(run_script(df.instructions[-1]).script.commands())
    assert cmd.argv == ["pip", "install", "foo==1.2", "a", "b", "lit$V"]


def test_expand_keeps_unknown_references() -> None:
    e = expand("${A}/${B:-x}/$C", {}, keep_quotes=True)
    assert e.value == "${A}/${B:-x}/$C" and e.unresolved == ("A", "B", "C")
    closed = expand("${A}/${B:-x}", {}, closed=True)
    assert closed.value == "${A}/x" and closed.unresolved == ("A",)


def _nested(levels: int) -> str:
    return "${A:-" * levels + "end" + "}" * levels


def test_nested_defaults_expand_up_to_the_bound_and_are_kept_as_written_beyond_it() -> None:
    assert expand(_nested(MAX_SUBSTITUTION_NESTING), {}, closed=True) == ("end", ())
    deep = _nested(3000)
    assert expand(deep, {}, closed=True) == (deep[5 * MAX_SUBSTITUTION_NESTING : -MAX_SUBSTITUTION_NESTING], ("A",))
    assert expand(deep, {"A": Var("A", "set", 1, "arg")}).value == "set"  # a value needs no default


def _closing_by_counting(raw: str, i: int) -> int:
    """The '}' that closes raw[i] == '{', counted from there (the builder's rule): the index after it, or -1."""
    depth = 0
    for k in range(i, len(raw)):
        depth += {"{": 1, "}": -1}.get(raw[k], 0)
        if depth == 0:
            return k + 1
    return -1


@given(st.text(alphabet="${}A:-x ", max_size=60))
def test_braces_found_in_one_pass_close_where_counting_from_each_brace_does(raw: str) -> None:
    braces = _Braces(raw)
    for i, c in enumerate(raw):
        if c == "{":
            assert braces.end(i) == _closing_by_counting(raw, i), (raw, i)


def test_a_line_that_is_only_a_continuation_is_not_an_instruction() -> None:
    df = parse("FROM a:1\n\\\nRUN echo hi\n", tolerant=True)
    assert [i.keyword for i in df.instructions] == ["FROM", "RUN"] and not df.problems
    df = parse("FROM a:1\n\\\n", tolerant=True)
    assert [i.keyword for i in df.instructions] == ["FROM"]
    assert [p.message for p in df.problems] == [
        "the instruction's last line ends with a line continuation, but the file ends there"
    ]


# -- persistent scopes ----------------------------------------------------------------------------------------------
def test_scopes_are_persistent_maps_that_agree_with_dicts() -> None:
    """Every version of a Scope answers as the dict it stands for, after any sequence of sets, and a set
    never changes a scope an instruction already holds."""
    import random

    from envpin.audit.scopes import Scope, StageScope
    from envpin.audit.words import Var

    rng = random.Random(7)
    versions: list[tuple[Scope, dict[str, Var]]] = [(Scope(), {})]
    for step in range(3000):
        scope, model = versions[rng.randrange(len(versions))]  # branch from any earlier version
        key = f"K{rng.randrange(400)}"
        var = Var(key, str(step), step, "ENV")
        versions.append((scope.set(key, var), {**model, key: var}))
    for scope, model in versions[::50] + versions[-5:]:
        assert dict(scope) == model and len(scope) == len(model)
        assert all(scope.get(k) == v and k in scope for k, v in model.items())
        assert scope.get("absent") is None and "absent" not in scope and scope.get(3) is None
    env, args = versions[-1][0], versions[-2][0]
    view = StageScope(env, args)
    assert dict(view) == {**dict(args), **dict(env)}  # ENV wins over ARG, as in the builder
    for mapping in (env, view):  # indexing and `in` answer as `get` does, a miss is a KeyError
        assert all(mapping[k] == mapping.get(k) and k in mapping for k in mapping)
        assert "absent" not in mapping and 3 not in mapping
        with pytest.raises(KeyError):
            mapping["absent"]


def test_keys_whose_hashes_collide_share_a_bucket() -> None:
    from envpin.audit.scopes import Scope
    from envpin.audit.words import Var

    class Same(str):
        def __hash__(self) -> int:
            return 12345

    a, b, c = Same("A"), Same("B"), Same("C")
    s1 = Scope().set(a, Var("A", "1", 1, "ENV")).set(b, Var("B", "2", 2, "ENV"))
    s2 = s1.set(c, Var("C", "3", 3, "ENV")).set(a, Var("A", "9", 4, "ENV"))
    assert s1[a].value == "1" and s2[a].value == "9" and s2[c].value == "3" and c not in s1
    assert s2[b].value == "2" and len(s2) == 3 and sorted(s2) == ["A", "B", "C"]
