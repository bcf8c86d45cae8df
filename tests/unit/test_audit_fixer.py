"""`envpin audit --fix` without a registry: recipe ENV block, autotune removal, comments, outputs."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from envpin.audit import MECHANICAL, audit, audit_text, fix, parse
from envpin.audit.fix import MARKER

DIGEST = "@sha256:" + "ef" * 32


def _fix(text: str, **kwargs: object) -> tuple[str, list[str]]:
    df = parse(text, "Dockerfile")
    outcome = fix(df, audit(df), **kwargs)  # type: ignore[arg-type]
    left = [f.rule for f in audit(parse(outcome.text, "Dockerfile"))]
    return outcome.text, left


def test_recipe_block_replaces_wrong_settings_and_removes_autotune() -> None:
    text = (
        "FROM nvcr.io/nvidia/tensorflow:21.06-tf2-py3" + DIGEST + " AS train\n"
        "ENV TF_CUDNN_DETERMINISTIC=1 \\\n"
        "    TF_CUDNN_USE_AUTOTUNE=0 \\\n"
        "    TF_USE_CUDNN_AUTOTUNE=0 \\\n"
        "    MY_SETTING=keep\n"
        "ENV TF_DETERMINISTIC_OPS=0\n"
        "RUN python3 train.py\n"
    )
    fixed, left = _fix(text)
    assert fixed == (
        "FROM nvcr.io/nvidia/tensorflow:21.06-tf2-py3" + DIGEST + " AS train\n"
        f"{MARKER}ngc-tf2.5-2.7 for NGC 21.06-tf2-py3 (TensorFlow 2.5)\n"
        "ENV HOROVOD_FUSION_THRESHOLD=0 \\\n"
        "    PYTHONHASHSEED=0 \\\n"
        "    TF_CUDNN_USE_FRONTEND=1 \\\n"
        "    TF_DETERMINISTIC_OPS=1\n"
        "ENV TF_CUDNN_DETERMINISTIC=1 \\\n"
        "    MY_SETTING=keep\n"
        "RUN python3 train.py\n"
    )
    assert left == []


def test_user_values_that_are_right_are_kept() -> None:
    text = f"FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3{DIGEST}\nENV PYTHONHASHSEED=1234\n"
    fixed, left = _fix(text)
    assert "PYTHONHASHSEED=1234" in fixed and "PYTHONHASHSEED=0" not in fixed
    assert "TF_DETERMINISTIC_OPS=1" in fixed and left == []


def test_fix_is_idempotent_and_updates_its_own_block() -> None:
    text = f"FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3{DIGEST}\nRUN pip install numpy\n"
    once, _ = _fix(text)
    twice, left = _fix(once)
    assert twice == once and left == ["pip-no-hashes", "pip-unpinned"]
    # The same file moved to a release whose recipe needs more: the existing block is extended in place.
    moved, left = _fix(once.replace("20.02-tf2-py3", "21.06-tf2-py3"))
    assert moved.count(MARKER) == 1 and "TF_CUDNN_USE_FRONTEND=1" in moved
    assert not set(left) & MECHANICAL


def test_non_mechanical_findings_get_comments_above_their_instruction() -> None:
    text = (
        f"FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3{DIGEST}\n"
        "ENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n"
        "  RUN curl -s https://x/i.sh | sh && \\\n"
        "      pip install numpy\n"
    )
    fixed, left = _fix(text)
    lines = fixed.splitlines()
    i = lines.index("  RUN curl -s https://x/i.sh | sh && \\")
    assert lines[i - 3 : i] == [
        "  # envpin audit: curl-pipe-shell: download a pinned version, verify its sha256 (sha256sum -c), then run it",
        "  # envpin audit: pip-no-hashes: install from a requirements file with --hash entries and --require-hashes",
        "  # envpin audit: pip-unpinned: pin exact versions (NAME==X.Y.Z), ideally in a hashed requirements lock",
    ]
    assert sorted(left) == ["curl-pipe-shell", "pip-no-hashes", "pip-unpinned"]


def test_no_resolve_leaves_a_comment_on_from() -> None:
    fixed, left = _fix("FROM ubuntu:22.04\nENV PYTHONHASHSEED=0\n")
    comments = fixed.splitlines()[:2]
    assert comments[0].startswith("# envpin audit: d9m-unknown-tf: ")
    assert comments[1].startswith("# envpin audit: from-no-digest: pin the digest the tag points to now")
    assert sorted(left) == ["d9m-unknown-tf", "from-no-digest"]


def test_unknown_tensorflow_still_gets_the_common_settings() -> None:
    text = f"FROM nvcr.io/nvidia/tensorflow:25.01-tf2-py3{DIGEST}\nRUN pip install horovod==0.28.1 --require-hashes\n"
    fixed, left = _fix(text)
    assert "HOROVOD_FUSION_THRESHOLD=0" in fixed and "PYTHONHASHSEED=0" in fixed
    assert "TF_DETERMINISTIC_OPS" not in fixed  # not guessed for a TensorFlow the catalog does not know
    assert left == ["d9m-unknown-tf"]


def test_backtick_escape_is_used_for_the_block() -> None:
    fixed, left = _fix(f"# escape=`\nFROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3{DIGEST}\nRUN echo C:\\data\n")
    assert "ENV HOROVOD_FUSION_THRESHOLD=0 `\n    PYTHONHASHSEED=0 `\n" in fixed and left == []


def test_cli_outputs_and_input_untouched(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    original = f"FROM nvcr.io/nvidia/tensorflow:22.03-tf2-py3{DIGEST}\nENV TF_CUDNN_USE_AUTOTUNE=0\n"
    (tmp_path / "Dockerfile").write_text(original)
    res = cli("audit", "--fix", "Dockerfile", cwd=tmp_path)
    assert res.code == 0, res.stderr  # nothing left at or above warning in the fixed file
    assert "wrote Dockerfile.envpin-fixed" in res.stderr  # what --fix did: progress, on stderr
    assert res.stdout.startswith("left in the fixed files: no findings")  # the result: stdout
    assert (tmp_path / "Dockerfile").read_text() == original
    fixed = (tmp_path / "Dockerfile.envpin-fixed").read_text()
    assert "TF_CUDNN_USE_AUTOTUNE" not in fixed and audit_text(fixed) == []
    res = cli("audit", "--fix", "--fix-out", "out/Fixed", "Dockerfile", cwd=tmp_path)
    assert res.code == 2 and "the folder out does not exist" in res.stderr and not (tmp_path / "out").exists()
    (tmp_path / "out").mkdir()
    res = cli("audit", "--fix", "--fix-out", "out/Fixed", "Dockerfile", cwd=tmp_path)
    assert res.code == 0 and (tmp_path / "out" / "Fixed").read_text() == fixed
    res = cli("audit", "--fix", "--fix-out", "Dockerfile", "Dockerfile", cwd=tmp_path)
    assert res.code == 2 and "--in-place" in res.stderr
    res = cli("audit", "--fix", "--in-place", "Dockerfile", cwd=tmp_path)
    assert res.code == 0 and (tmp_path / "Dockerfile").read_text() == fixed


def test_registry_error_exits_2_and_writes_nothing(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (tmp_path / "Dockerfile").write_text(f"FROM 127.0.0.1:{port}/nvidia/tensorflow:20.02-tf2-py3\n")
    res = cli("audit", "--fix", "Dockerfile", cwd=tmp_path)
    assert res.code == 2 and res.stdout == ""
    assert res.stderr.startswith(f"error: registry 127.0.0.1:{port} is unreachable")
    # the hint names the option audit has to go on without the registry, not render's --base-image
    assert "hint: check the network or proxy, or add --no-resolve" in res.stderr and "--base-image" not in res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Dockerfile"]


def test_fix_never_replaces_a_link_a_read_only_file_or_writes_half(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import os

    original = f"FROM nvcr.io/nvidia/tensorflow:22.03-tf2-py3{DIGEST}\nENV TF_CUDNN_USE_AUTOTUNE=0\n"
    (tmp_path / "real").write_text(original)
    (tmp_path / "Dockerfile").symlink_to("real")
    res = cli("audit", "--fix", "--in-place", "Dockerfile", cwd=tmp_path)
    assert res.code == 2 and "is a symbolic link" in res.stderr and str(tmp_path / "real") in res.stderr
    assert (tmp_path / "Dockerfile").is_symlink() and (tmp_path / "real").read_text() == original

    (tmp_path / "ro").write_text(original)
    os.chmod(tmp_path / "ro", 0o444)
    res = cli("audit", "--fix", "--in-place", "ro", cwd=tmp_path)
    assert res.code == 2 and "ro is read-only" in res.stderr and (tmp_path / "ro").read_text() == original

    # Two inputs, the second one's output impossible: nothing is written, not even the first.
    (tmp_path / "a").write_text(original)
    (tmp_path / "b").write_text(original)
    (tmp_path / "b.envpin-fixed").mkdir()
    res = cli("audit", "--fix", "a", "b", cwd=tmp_path)
    assert res.code == 2 and "b.envpin-fixed is a directory" in res.stderr
    assert not (tmp_path / "a.envpin-fixed").exists()
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_findings_in_copied_requirements_files_stay_there(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A requirements file's findings point at its own lines: the fixer neither looks them up among the
    Dockerfile's instructions nor comments them into it; the re-audit still reports them."""
    dockerfile = "FROM ubuntu:22.04\n\nCOPY requirements.txt .\nRUN pip install -r requirements.txt\n"
    (tmp_path / "Dockerfile").write_text(dockerfile)
    (tmp_path / "requirements.txt").write_text("numpy==1.26.4\nflask\n")
    res = cli("audit", "--fix", "--no-resolve", "Dockerfile", cwd=tmp_path)
    assert res.code == 1, res.stderr
    fixed = (tmp_path / "Dockerfile.envpin-fixed").read_text()
    assert "pip-no-hashes" not in fixed and "pip-unpinned" not in fixed
    assert "requirements.txt:1 pip-no-hashes warning" in res.stdout
    assert "requirements.txt:2 pip-unpinned warning" in res.stdout
    assert (tmp_path / "Dockerfile").read_text() == dockerfile


def test_a_finding_on_a_comment_line_gets_its_note_above_that_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Regression: a misspelt `# envpin: ignore=` on its own line is a finding on a comment line, which no
    instruction starts at; --fix ended in `internal error: KeyError`."""
    text = (
        "FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3" + DIGEST + "\n"
        "# envpin: ignore=pip-unpined\n"
        "RUN pip install numpy==1.18.1\n"
    )
    (tmp_path / "Dockerfile").write_text(text)
    res = cli("audit", "--fix", "--no-resolve", str(tmp_path / "Dockerfile"))
    assert res.code == 1 and "internal error" not in res.stderr
    lines = (tmp_path / "Dockerfile.envpin-fixed").read_text().splitlines()
    at = lines.index("# envpin: ignore=pip-unpined")
    assert lines[at - 1].startswith("# envpin audit: suppression-unknown: ")
    assert "suppression-unknown" in res.stdout


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file another owner needs root (CI runs as root)")
def test_fix_in_place_as_root_keeps_the_owner_of_the_file(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """root fixing a user's script in place leaves the user's file (owner, group, mode), not a root-owned copy."""
    script = tmp_path / "train.py"
    script.write_text("import tensorflow as tf\nmodel = tf.keras.Sequential()\nmodel.fit(x, y)\n")
    os.chown(script, 1234, 1235)
    os.chmod(script, 0o640)
    res = cli("audit", "--fix", "--in-place", "--tf", "2.21", "train.py", cwd=tmp_path)
    assert res.code == 0, res.stderr
    st = script.stat()
    assert "enable_op_determinism" in script.read_text()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (1234, 1235, 0o640)
