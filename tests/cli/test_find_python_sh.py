"""scripts/find_python.sh, the one find_python of scripts/pythons.sh and scripts/oldtf.sh: the newest pyenv
build of X.Y (versions sorted as versions, not as text), else python X.Y on PATH, never a pyenv shim."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _exe(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return path


def _find(minor: str, root: Path, path: str) -> str:
    out = subprocess.run(
        ["bash", "-c", f"set -euo pipefail; source scripts/find_python.sh; find_python {minor}"],
        cwd=REPO,
        env={"PYENV_ROOT": str(root), "PATH": path, "HOME": "/nonexistent"},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return out.stdout.strip()


def test_newest_pyenv_build_then_path_never_a_shim(tmp_path: Path) -> None:
    root = tmp_path / "pyenv"
    _exe(root / "versions" / "3.7.9" / "bin" / "python3.7")
    newest = _exe(root / "versions" / "3.7.12" / "bin" / "python3.7")
    assert _find("3.7", root, "/usr/bin:/bin") == str(newest)  # 3.7.12 > 3.7.9, though "1" < "9" as text
    on_path = _exe(tmp_path / "bin" / "python3.8")
    shim = _exe(tmp_path / "shims" / "python3.9")
    path = f"{on_path.parent}:{shim.parent}:/usr/bin:/bin"
    assert _find("3.8", root, path) == str(on_path)
    assert _find("3.9", root, path) == ""  # a shim needs pyenv's environment: not an interpreter
