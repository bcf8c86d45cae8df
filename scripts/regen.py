"""Regenerate every file of the repository that is derived from the code or the data, then show what changed.

    .venv/bin/python scripts/regen.py           rewrite them all
    .venv/bin/python scripts/regen.py --check   exit 1 when one is stale, rewriting nothing

The derived files: the example environment folders under images/ (re-rendered from their own lock's inputs:
their Dockerfile, Apptainer definition, plan, lock and payload change with envpin's sources), the golden files
under tests/golden/ (`pytest tests/golden --update-golden`), and the generated blocks of the README and
docs/audit.md (scripts/gendocs.py). Run it after a change to envpin/probe, envpin/portable, the templates, the
recipe table or the rules, and review `git diff` before committing. Not part of the wheel.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _environments(check: bool) -> list[str]:
    """Each folder of images/, re-rendered from the inputs its lock records; the stale ones."""
    from envpin import api

    stale = []
    for lock in sorted((REPO / "images").glob("*/envpin.lock")):
        if not api.check_lock(lock):
            continue
        stale.append(str(lock.parent.relative_to(REPO)))
        if check:
            continue
        from envpin.environment import lockfile

        inputs = lockfile.read(lock).inputs
        if inputs.requirements_hash or inputs.ca_bundle_hash or inputs.build_from:
            raise SystemExit(f"{lock}: an example with requirements, a CA bundle or a mirror is re-rendered by hand")
        formats = tuple(
            f for f, name in (("docker", "Dockerfile"), ("apptainer", "envpin.def")) if (lock.parent / name).exists()
        )
        api.render_environment(
            ngc=inputs.tag, tf=inputs.tf_version, name=inputs.name, out=lock.parent, force=True, formats=formats
        )
    return stale


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale files (exit 1 when any is)")
    check = parser.parse_args().check
    stale = _environments(check)
    golden = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "--tb=line",
        "-p",
        "no:cacheprovider",
        str(REPO / "tests" / "golden"),
    ]
    if not check:
        golden.append("--update-golden")
    if subprocess.run(golden, cwd=REPO).returncode != 0:
        stale.append("tests/golden")
    docs = [sys.executable, str(REPO / "scripts" / "gendocs.py"), *(["--check"] if check else [])]
    if subprocess.run(docs, cwd=REPO).returncode != 0:
        stale.append("README.md / docs/audit.md")
    if check:
        for what in stale:
            print(f"stale: {what}")
        return 1 if stale else 0
    print("regenerated; review with: git diff --stat")
    return 0


if __name__ == "__main__":
    sys.exit(main())
