"""`envpin lock` reads an image's Python, packages and wheel tags once per local image: the second lock of the
same image takes them from $XDG_CACHE_HOME/envpin/lock-facts/ (keyed by the image ID) without a container, and
the image ID comes from the engine's API without the Docker SDK."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from envpin.environment import resolve
from envpin.errors import EngineError
from envpin.image.docker import DockerEngine


def test_the_facts_of_one_image_are_read_once(
    docker_client: Any, docker_engine: Any, stand_in_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    docker_client.images.pull(stand_in_image)
    first = resolve.image_facts(docker_engine, stand_in_image)
    cached = resolve._facts_cache(docker_engine, stand_in_image)
    assert cached is not None and cached.is_file()
    assert cached.is_relative_to(Path(os.environ["XDG_CACHE_HOME"]) / "envpin" / "lock-facts")

    def no_container(*args: object) -> None:
        raise AssertionError("a container was started for facts that are kept")

    run = resolve._run
    monkeypatch.setattr(resolve, "_run", no_container)
    assert resolve.image_facts(docker_engine, stand_in_image) == first
    # A damaged copy is read again from the image, not trusted, and written anew.
    cached.write_text("{not json")
    monkeypatch.setattr(resolve, "_run", run)
    assert resolve.image_facts(docker_engine, stand_in_image) == first
    assert resolve._facts_from(json.loads(cached.read_text())) == first


def test_an_image_that_is_not_local_has_no_kept_facts(docker_engine: Any) -> None:
    assert resolve._facts_cache(docker_engine, "127.0.0.1:5000/envpin-test/not-there:none") is None


def test_a_fifo_or_an_oversized_copy_is_never_waited_on_nor_trusted(
    docker_client: Any, docker_engine: Any, stand_in_image: str
) -> None:
    docker_client.images.pull(stand_in_image)
    first = resolve.image_facts(docker_engine, stand_in_image)
    cached = resolve._facts_cache(docker_engine, stand_in_image)
    assert cached is not None
    # Oversized: a copy past the read bound is not read (nor trusted, whatever it says): the facts come from the
    # image again and replace it.
    other = json.dumps({"python": "0.0", "dists": {}, "tags": None})
    cached.write_text(other + " " * resolve._FACTS_LIMIT)
    assert resolve.image_facts(docker_engine, stand_in_image) == first
    assert resolve._facts_from(json.loads(cached.read_text())) == first
    # A FIFO nobody writes: opening it must not block; the facts come from the image and the FIFO stays.
    cached.unlink()
    os.mkfifo(cached)
    assert resolve.image_facts(docker_engine, stand_in_image) == first
    assert cached.is_fifo()


def test_the_engine_api_gives_the_image_id_and_layers_the_sdk_gives(docker_client: Any, stand_in_image: str) -> None:
    """DockerEngine's inspect and exists over the engine's API (DOCKER_HOST as the SDK reads it), on one
    kept-alive connection: the same ID and layers as the SDK; an absent image or a name that is no reference is
    not there; inspecting an absent image is an EngineError with a hint."""
    docker_client.images.pull(stand_in_image)
    attrs = docker_client.images.get(stand_in_image).attrs
    engine = DockerEngine.open()
    try:
        facts = engine.inspect(stand_in_image)
        assert (facts.id, facts.layers) == (attrs["Id"], tuple(attrs["RootFS"]["Layers"]))
        assert engine.inspect(attrs["Id"]).id == attrs["Id"]  # by ID too, as build's records name it
        connection = engine.api._conn
        assert engine.exists(stand_in_image) and engine.api._conn is connection
        assert not engine.exists("127.0.0.1:5000/envpin-test/not-there:none")
        assert not engine.exists("NOT/A:reference")
        with pytest.raises(EngineError, match="no such image") as absent:
            engine.inspect("127.0.0.1:5000/envpin-test/not-there:none")
        assert absent.value.hint
        assert engine._client is None  # nothing above opened the SDK
    finally:
        engine.close()


def test_kept_facts_need_neither_the_sdk_nor_a_container(docker_engine: Any, stand_in_image: str) -> None:
    """With the image's facts kept, what `envpin lock` learns about the image is one API request away: a fresh
    process reads them without importing the Docker SDK (which a container run would need)."""
    first = resolve.image_facts(docker_engine, stand_in_image)
    script = (
        "import sys; from envpin.environment import resolve; from envpin.image.docker import DockerEngine\n"
        f"e = DockerEngine(); f = resolve.image_facts(e, {stand_in_image!r}); e.close()\n"
        "print(f.python, sorted(m for m in sys.modules if m.split('.')[0] in ('docker', 'requests', 'urllib3')))"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == [first.python, "[]"], done.stderr
