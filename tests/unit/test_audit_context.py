"""The build context: requirement and constraint files a COPY/ADD brings in are found and audited line by line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DIGEST = "@sha256:" + "cd" * 32
HASH = "--hash=sha256:" + "a" * 64
HEAD = f"FROM python:3.11{DIGEST}\nENV PYTHONHASHSEED=0\nWORKDIR /app\n"


def _tree(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def _found(cli, root: Path, *args: str) -> set[tuple[str, int, str]]:  # type: ignore[no-untyped-def]
    res = cli("audit", "--json", *args, cwd=root)
    assert res.code in (0, 1), res.stderr
    return {
        (f["file"], f["line"], f["rule"]) for f in json.loads(res.stdout)["findings"] if f["rule"] != "d9m-unknown-tf"
    }


def test_a_copied_requirements_file_is_audited_line_by_line(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _tree(
        tmp_path,
        {
            "Dockerfile": HEAD + "COPY requirements.txt .\nRUN pip install -r requirements.txt\n",
            "requirements.txt": "# pinned but not hashed\nnumpy==1.26.4\nrequests>=2\n"
            "--extra-index-url https://idx.example\n--trusted-host idx.example\n"
            "git+https://github.com/a/b@main#egg=b\n./local-pkg\n",
        },
    )
    assert _found(cli, tmp_path, "Dockerfile") == {
        ("requirements.txt", 2, "pip-no-hashes"),
        ("requirements.txt", 3, "pip-unpinned"),
        ("requirements.txt", 4, "pip-extra-index"),
        ("requirements.txt", 5, "pip-trusted-host"),
        ("requirements.txt", 6, "pip-unpinned"),
    }


def test_a_fully_hashed_file_is_clean_and_a_half_hashed_one_names_the_lines(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _tree(
        tmp_path,
        {
            "Dockerfile": HEAD + "COPY req/ /opt/req/\nRUN pip install -r /opt/req/good.txt\n"
            "RUN pip install -r /opt/req/half.txt\n",
            "req/good.txt": f"numpy==1.26.4 \\\n    {HASH}\n",
            "req/half.txt": f"numpy==1.26.4 {HASH}\nclick==8.1.7\n",
        },
    )
    assert _found(cli, tmp_path, "Dockerfile") == {("req/half.txt", 2, "pip-no-hashes")}


def test_includes_are_followed_relative_to_the_including_file(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _tree(
        tmp_path,
        {
            "Dockerfile": HEAD + "COPY . /src\nRUN pip install -r /src/reqs/base.txt\n",
            "reqs/base.txt": f"-r extra.txt\n-c pins.txt\nflask==3.0.0 {HASH}\n-r gone.txt\n-r base.txt\n",
            "reqs/extra.txt": "click\n",
            "reqs/pins.txt": "itsdangerous>=2\n",  # constraints may be ranges: not reported
        },
    )
    assert _found(cli, tmp_path, "Dockerfile") == {
        ("reqs/extra.txt", 1, "pip-unpinned"),
        ("reqs/extra.txt", 1, "pip-no-hashes"),
        ("reqs/base.txt", 4, "pip-requirements-file"),
    }


def test_what_the_context_does_not_hold_stays_unchecked(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _tree(
        tmp_path,
        {
            "Dockerfile": HEAD + f"FROM python:3.11{DIGEST} AS build\nCOPY --from=0 /app/r.txt /r.txt\n"
            "RUN pip install -r /r.txt\nRUN pip install -r $REQS\n",
            "r.txt": "numpy\n",
        },
    )
    found = _found(cli, tmp_path, "Dockerfile")
    assert found == {
        ("Dockerfile", 6, "pip-requirements-file"),
        ("Dockerfile", 7, "pip-requirements-file"),
        ("Dockerfile", 4, "pythonhashseed-unset"),
    }


def test_context_option_and_no_context(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _tree(
        tmp_path,
        {
            "docker/Dockerfile": HEAD + "COPY app/requirements.txt .\nRUN pip install -r requirements.txt\n",
            "app/requirements.txt": "numpy\n",
        },
    )
    # the folder of the Dockerfile is not the context here: the file is not found there
    assert ("docker/Dockerfile", 5, "pip-requirements-file") in _found(cli, tmp_path, "docker/Dockerfile")
    assert ("app/requirements.txt", 1, "pip-unpinned") in _found(cli, tmp_path, "--context", ".", "docker/Dockerfile")
    off = _found(cli, tmp_path, "--no-context", "docker/Dockerfile")
    assert off == {("docker/Dockerfile", 5, "pip-requirements-file")}
    for args, message in (
        (["--context", "nope"], "--context nope is not a directory"),
        (["--context", ".", "--no-context"], "exclude each other"),
    ):
        res = cli("audit", *args, "docker/Dockerfile", cwd=tmp_path)
        assert res.code == 2 and message in res.stderr.splitlines()[0]


def test_suppressions_work_in_requirement_files(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _tree(
        tmp_path,
        {
            "Dockerfile": HEAD + "COPY requirements.txt .\nRUN pip install -r requirements.txt\n",
            "requirements.txt": f"# envpin: ignore=pip-unpinned\nrequests>=2 {HASH}\n",
        },
    )
    assert _found(cli, tmp_path, "Dockerfile") == set()


@pytest.mark.parametrize(
    "copy",
    ["COPY requirements*.txt ./", "ADD requirements.txt /app/requirements.txt", 'COPY ["requirements.txt", "/app/"]'],
)
def test_copy_forms(cli, tmp_path: Path, copy: str) -> None:  # type: ignore[no-untyped-def]
    _tree(
        tmp_path, {"Dockerfile": HEAD + f"{copy}\nRUN pip install -r requirements.txt\n", "requirements.txt": "numpy\n"}
    )
    assert ("requirements.txt", 1, "pip-unpinned") in _found(cli, tmp_path, "Dockerfile")
