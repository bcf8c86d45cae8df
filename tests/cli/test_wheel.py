"""The wheel ships templates and data: install it non-editable into a fresh venv and render from there."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_wheel_renders_from_a_fresh_venv(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(REPO)], check=True, timeout=600
    )
    wheel = next(dist.glob("envpin-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], check=True, timeout=600)
    work = tmp_path / "work"
    work.mkdir()
    proc = subprocess.run(
        [
            str(venv / "bin" / "envpin"),
            "render",
            "--tf",
            "2.1",
            "--ngc",
            "20.02",
            "--format",
            "docker",
            "--format",
            "apptainer",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    for name in ("Dockerfile", "envpin.def"):  # every template, the one both import included, is in the wheel
        rendered = (work / "images" / "20.02-tf2" / name).read_bytes()
        assert rendered == (REPO / "tests" / "golden" / "20.02-tf2-py3" / name).read_bytes()
    # The installed package, not the checkout, provided the templates.
    where = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import envpin.environment.render as r; "
            "print(r.template_env().get_template('Dockerfile.j2').filename); "
            "print(r.template_env('envpin.fleet').get_template('kubernetes-probe.yaml.j2').filename); "
            "print(r.template_env('envpin.views').get_template('fleet-report.html.j2').filename)",
        ],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert where[0].startswith(str(venv)) and where[0].endswith("envpin/environment/templates/Dockerfile.j2")
    assert where[1].startswith(str(venv)) and where[1].endswith("envpin/fleet/templates/kubernetes-probe.yaml.j2")
    assert where[2].startswith(str(venv)) and where[2].endswith("envpin/views/templates/fleet-report.html.j2")

    # Packaging metadata: license file, classifiers, URLs, the typing marker.
    import zipfile

    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        meta = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "envpin/py.typed" in names
    # The data tables' schemas and check records travel with the tables.
    assert all(
        f"envpin/data/{t}.{kind}" in names
        for t in ("catalog", "stock", "recipes")
        for kind in ("schema.json", "checked")
    )
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "License-Expression: Apache-2.0" in meta and "License-File: LICENSE" in meta
    assert "Classifier: Typing :: Typed" in meta
    # The versions scripts/pythons.sh runs, and no other (tests/unit/test_pythons.py holds pyproject to them).
    assert "Requires-Python: >=3.10" in meta
    assert re.findall(r"^Classifier: Programming Language :: Python :: (3\.\d+)$", meta, re.M) == [
        "3.10",
        "3.11",
        "3.12",
        "3.13",
    ]
    assert "Project-URL: Homepage, https://github.com/envpin/envpin" in meta
    assert "Provides-Extra: dev" in meta and "Provides-Extra: test" in meta


def test_sdist_includes_name_files_that_exist() -> None:
    """Every path the sdist includes is in the checkout (docs, compose files, CI and service scripts...)."""
    from envpin import HOMEPAGE
    from envpin._compat import tomllib  # 3.10: tomli

    data = tomllib.loads((REPO / "pyproject.toml").read_text())
    include = data["tool"]["hatch"]["build"]["targets"]["sdist"]["include"]
    missing = [p for p in include if not (REPO / p).exists()]
    assert missing == []
    assert {"docs", "compose.cpu.yaml", "LICENSE"} <= set(include)
    assert data["project"]["urls"]["Homepage"] == HOMEPAGE
