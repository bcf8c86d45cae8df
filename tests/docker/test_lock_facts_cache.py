"""`envpin lock` reads an image's Python, packages and wheel tags once per local image: the second lock of the
same image takes them from $XDG_CACHE_HOME/envpin/lock-facts/ (keyed by the image ID) without a container."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from envpin.environment import resolve


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
