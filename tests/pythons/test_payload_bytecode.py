"""envpin.probe.bytecode: the payload unpacked and compiled by the interpreter that will run it (what the image
build does), reproducibly, and loaded from that bytecode afterwards. Run with the host's Python and with each
image-side CPython (3.6 to 3.9, marker ``pythons``), under warnings as errors."""

from __future__ import annotations

import hashlib
import shutil
import sys
from pathlib import Path

import pytest

from envpin.environment.payload import payload
from tests.pythons.test_pythons import IMAGE_PYTHONS, find_python, run

EPOCH = 1582848000  # a SOURCE_DATE_EPOCH as the templates give it


def _interpreters() -> list[object]:
    params: list[object] = [pytest.param(sys.executable, id="host")]
    for minor in IMAGE_PYTHONS:
        params.append(pytest.param(minor, id=minor))
    return params


@pytest.fixture(params=_interpreters())
def python(request: pytest.FixtureRequest) -> str:
    if request.param == sys.executable:
        return sys.executable
    exe = find_python(str(request.param))
    if exe is None:
        pytest.skip(f"no CPython {request.param} on this machine (pyenv install {request.param})")
    return exe


def _compile(python: str, pyz: Path, dest: Path, epoch: int | None = EPOCH) -> tuple[int, str]:
    env = {"PYTHONPATH": str(pyz)}
    if epoch is not None:
        env["SOURCE_DATE_EPOCH"] = str(epoch)
    proc = run([python, "-m", "envpin.probe.bytecode", str(pyz), str(dest)], env=env)
    return proc.returncode, proc.stderr.decode("utf-8", "replace")


def _tree(dest: Path) -> dict[str, str]:
    return {
        str(p.relative_to(dest)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(dest.rglob("*"))
        if p.is_file()
    }


def test_the_payload_is_unpacked_compiled_and_loaded_from_its_bytecode(python: str, tmp_path: Path) -> None:
    pyz = tmp_path / "envpin.pyz"
    pyz.write_bytes(payload())
    dest = tmp_path / "lib"
    code, err = _compile(python, pyz, dest)
    assert code == 0, err
    sources = sorted(p for p in dest.rglob("*.py"))
    assert dest / "envpin" / "probe" / "report.py" in sources and not (dest / "__main__.py").exists()
    for source in sources:  # each module has its .pyc, for this interpreter's tag
        assert list((source.parent / "__pycache__").glob(source.stem + ".*.pyc")), source
    # No build time anywhere: every file and folder, and every .pyc's recorded source mtime, is the epoch.
    for path in [dest, *dest.rglob("*")]:
        assert int(path.stat().st_mtime) == EPOCH, path
    stamp = EPOCH.to_bytes(4, "little")
    for pyc in dest.rglob("*.pyc"):
        head = pyc.read_bytes()[:16]
        # 3.7+: magic, flags 0 (timestamp-based), mtime, size; 3.6: magic, mtime, size.
        assert head[4:12] == b"\0\0\0\0" + stamp or head[4:8] == stamp, pyc
    # Reproducible: a second build at the same path (the image's is always /opt/envpin/lib; a code object
    # records its file's path) gives the same bytes.
    first = _tree(dest)
    shutil.rmtree(dest)
    assert _compile(python, pyz, dest)[0] == 0
    assert _tree(dest) == first
    # The probe's modules come from that bytecode (python -v names the .pyc it loads; none is stale).
    proc = run(
        [python, "-v", "-c", "import envpin.probe.report, envpin.probe.runtime"], env={"PYTHONPATH": f"{dest}:{pyz}"}
    )
    said = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 0, said[-2000:]
    assert f"code object from '{dest}/envpin/probe/__pycache__/report." in said, said[-2000:]
    assert "bytecode is stale" not in said


def test_without_source_date_epoch_nothing_is_compiled(tmp_path: Path) -> None:
    pyz = tmp_path / "envpin.pyz"
    pyz.write_bytes(payload())
    code, err = _compile(sys.executable, pyz, tmp_path / "lib", epoch=None)
    assert code == 2 and "SOURCE_DATE_EPOCH is not set" in err
    assert not (tmp_path / "lib").exists()
