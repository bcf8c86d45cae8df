"""Compiled templates kept in envpin's cache folder (envpin.environment.render._bytecode_cache): the next process
loads them, a damaged or unwritable cache is no cache, and the cache lives only where XDG_CACHE_HOME says (the
tests' own folder, tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import jinja2
import pytest

from envpin.environment import payload, render
from envpin.files.read import sha256_bytes

#: What templates/dockerignore.j2 reads.
_CTX = {"inputs_hash": "sha256:0", "payload_name": payload.PAYLOAD_NAME}


def _env(cache: jinja2.BytecodeCache | None) -> jinja2.Environment:
    loader = jinja2.PackageLoader("envpin.environment", "templates")
    return jinja2.Environment(loader=loader, bytecode_cache=cache, keep_trailing_newline=True)


def test_compiled_templates_are_kept_and_loaded_from_the_cache_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    folder = tmp_path / "envpin" / "templates" / "test"
    first = _env(render._bytecode_cache("test")).get_template("dockerignore.j2")
    kept = list(folder.iterdir())
    assert len(kept) == 1 and kept[0].name.endswith(".cache")
    cache = render._bytecode_cache("test")
    assert cache is not None
    bucket = cache.get_bucket(_env(cache), "dockerignore.j2", first.filename, Path(first.filename or "").read_text())
    assert bucket.code is not None  # the next process loads the code instead of compiling the template
    again = _env(render._bytecode_cache("test")).get_template("dockerignore.j2")
    assert again.render() == first.render()


def test_a_damaged_or_unwritable_cache_is_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    want = _env(None).get_template("dockerignore.j2").render()
    _env(render._bytecode_cache("test")).get_template("dockerignore.j2")
    (kept,) = (tmp_path / "envpin" / "templates" / "test").iterdir()
    damaged = jinja2.bccache.bc_magic + b"not a pickle"  # jinja2's header, then what it cannot read
    kept.write_bytes(damaged)
    assert _env(render._bytecode_cache("test")).get_template("dockerignore.j2").render() == want
    assert kept.read_bytes() != damaged  # replaced by the code compiled again
    blocked = tmp_path / "file"
    blocked.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocked))  # a file where the folder would be
    assert render._bytecode_cache("test") is None
    assert render.template_env.__wrapped__().get_template("dockerignore.j2").render(**_CTX) is not None


def test_the_payload_is_built_and_hashed_once_per_process() -> None:
    assert payload.payload() is payload.payload()
    assert payload.payload_hash() == sha256_bytes(payload.payload())
