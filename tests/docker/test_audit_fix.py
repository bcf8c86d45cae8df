"""`envpin audit --fix` pins FROM by digest through a real registry (the loopback one with the stand-ins)."""

from __future__ import annotations

from pathlib import Path

from envpin.audit import MECHANICAL, audit, read
from envpin.knowledge import catalog, recipes
from tests.engines import MANIFEST_ACCEPT, STAND_IN_REPO, registry_request


def _digest(registry: str, tag: str) -> str:
    """The digest the registry itself reports for the tag (independent of envpin's client)."""
    _, headers, _ = registry_request(f"/v2/{STAND_IN_REPO}/manifests/{tag}", method="HEAD", accept=MANIFEST_ACCEPT)
    digest = {k.lower(): v for k, v in headers.items()}["docker-content-digest"]
    assert digest.startswith("sha256:") and len(digest) == 71
    return digest


def test_fix_pins_from_by_digest_and_sets_the_recipe(
    cli, tmp_path: Path, stand_in_image: str, local_registry: str
) -> None:  # type: ignore[no-untyped-def]
    tag = stand_in_image.rsplit(":", 1)[1]
    (tmp_path / "Dockerfile").write_text(
        f"ARG TAG={tag}\n"
        f"FROM {local_registry}/{STAND_IN_REPO}:${{TAG}} AS train\n"
        "ENV TF_CUDNN_USE_AUTOTUNE=0\n"
        "RUN pip install numpy\n"
    )
    res = cli("audit", "--fix", "Dockerfile", cwd=tmp_path)
    assert res.code == 1, res.stderr  # the unpinned pip install is left (with its comment)
    fixed_path = tmp_path / "Dockerfile.envpin-fixed"
    lines = fixed_path.read_text().splitlines()
    digest = _digest(local_registry, tag)
    assert f"FROM {stand_in_image}@{digest} AS train" in lines
    assert f"pinned to {digest}" in res.stderr
    findings = audit(read(str(fixed_path)))
    assert not {f.rule for f in findings} & MECHANICAL
    assert {f.rule for f in findings} == {"pip-unpinned", "pip-no-hashes"}
    entry = next(e for e in catalog.load().entries() if e.tag == tag)
    block = lines[lines.index(f"FROM {stand_in_image}@{digest} AS train") + 2 :]
    for name, value in recipes.select(entry.tf_version, "ngc", entry.release).env_dict().items():
        assert any(line.strip().rstrip(" \\").endswith(f"{name}={value}") for line in block)
    assert "TF_CUDNN_USE_AUTOTUNE" not in fixed_path.read_text()


def test_fix_in_place_pins_every_stage(
    cli, tmp_path: Path, stand_in_image: str, stand_in_image_bullseye: str, local_registry: str
) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "Dockerfile").write_text(
        f"FROM {stand_in_image_bullseye} AS build\nRUN true\n"
        f"FROM {stand_in_image}\nENV TF_DETERMINISTIC_OPS=1 PYTHONHASHSEED=0\n"
    )
    res = cli("audit", "--fix", "--in-place", "Dockerfile", cwd=tmp_path)
    assert res.code == 0, res.stderr
    text = (tmp_path / "Dockerfile").read_text()
    for ref in (stand_in_image_bullseye, stand_in_image):
        assert f"{ref}@{_digest(local_registry, ref.rsplit(':', 1)[1])}" in text
    assert audit(read(str(tmp_path / "Dockerfile"))) == []


def test_unknown_tag_is_exit_2_and_nothing_written(cli, tmp_path: Path, local_registry: str) -> None:  # type: ignore[no-untyped-def]
    original = f"FROM {local_registry}/{STAND_IN_REPO}:99.99-tf2-py3\n"
    (tmp_path / "Dockerfile").write_text(original)
    res = cli("audit", "--fix", "--in-place", "Dockerfile", cwd=tmp_path)
    assert res.code == 2 and res.stdout == ""
    assert res.stderr.startswith(f"error: {local_registry}/{STAND_IN_REPO} has no tag or manifest '99.99-tf2-py3'")
    assert (tmp_path / "Dockerfile").read_text() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["Dockerfile"]
