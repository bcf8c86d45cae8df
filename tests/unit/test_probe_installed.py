"""Installed files against RECORD, and start-up hooks, on a scratch site-packages this test writes.

Real files: a distribution as pip installs it (METADATA, RECORD with urlsafe-base64 sha256 and sizes), then
edited in place, a file removed, a sitecustomize.py and a .pth with an import line added.
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
from pathlib import Path

from envpin.probe import fields, installed, pyenv
from envpin.reports import diff

SOURCES = {
    "demo/__init__.py": b"VALUE = 1\n",
    "demo/core.py": b"def add(a, b):\n    return a + b\n",
}


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_site(root: Path) -> Path:
    """A site-packages folder holding one distribution, installed the way pip leaves it."""
    site = root / "site-packages"
    info = site / "demo-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n\n")
    rows = []
    for rel, data in SOURCES.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
        rows.append(f"{rel},{_record_hash(data)},{len(data)}")
    (site / "demo" / "__pycache__").mkdir()
    (site / "demo" / "__pycache__" / "core.cpython.pyc").write_bytes(b"\0compiled")
    rows += ["demo/__pycache__/core.cpython.pyc,,", "demo-1.0.dist-info/METADATA,,", "demo-1.0.dist-info/RECORD,,"]
    (info / "RECORD").write_text("\n".join(rows) + "\n")
    return site


def _check(site: Path) -> dict[str, object]:
    dists, _ = pyenv.scan_distributions([str(site)])
    return installed.check_installed(dists)


def test_an_untouched_install_matches_its_record(tmp_path: Path) -> None:
    found = _check(make_site(tmp_path))
    assert (found["changed"], found["missing"]) == ([], [])
    # Rows without a hash (the .pyc, METADATA listed bare, RECORD itself) are skipped, as pip skips them.
    assert found["totals"] == {
        "distributions": 1,
        "distributions_without_record": 0,
        "files": 2,
        "bytes": sum(len(d) for d in SOURCES.values()),
        "rows_without_hash": 3,
    }


def test_a_file_edited_after_install_is_named(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    core = site / "demo" / "core.py"
    core.write_bytes(b"def add(a, b):\n    return a - b\n")  # the same size: only the hash can tell
    assert _check(site)["changed"] == ["demo: demo/core.py"]
    core.write_bytes(b"def add(a, b):\n    return a + b + 0\n")  # another size: found without reading it
    (site / "demo" / "__init__.py").unlink()
    found = _check(site)
    assert (found["changed"], found["missing"]) == (["demo: demo/core.py"], ["demo: demo/__init__.py"])


def test_startup_hooks_in_site_folders(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    assert installed.startup_hooks([str(site)]) == []
    (site / "paths-only.pth").write_text("/opt/extra\n# import os: a comment\n")
    assert installed.startup_hooks([str(site)]) == []  # site.py only appends such lines to sys.path
    (site / "sitecustomize.py").write_text("import os\nos.environ['TF_DETERMINISTIC_OPS'] = '0'\n")
    (site / "zz-hook.pth").write_text("import os; os.environ.setdefault('OMP_NUM_THREADS', '1')\n")
    hooks = installed.startup_hooks([str(site)])
    assert [h.rsplit(" ", 1)[0] for h in hooks] == [str(site / "sitecustomize.py"), str(site / "zz-hook.pth")]
    assert all(h.rsplit(" ", 1)[1].startswith("sha256:") for h in hooks)


def test_paths_under_the_prefix_are_named_relative_to_it() -> None:
    inside = os.path.join(sys.prefix, "lib", "x.pth")
    assert installed.shown_path(inside) == "sys.prefix/lib/x.pth"


def _packages(site: Path) -> dict[str, str]:
    """The packages section of a probe of `site` alone, flattened as every comparison reads it."""
    import envpin.probe.pyenv as p
    from envpin.probe._common import Context

    ctx = Context(check_files=True)
    ctx.cache["dists"] = (*p.scan_distributions([str(site)]), [str(site)])
    flat: dict[str, str] = {}
    fields.flatten_value("packages", {k: v["value"] for k, v in p.collect_packages(ctx).items()}, flat)
    return flat


def test_tampering_is_a_breaking_difference(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    before = _packages(site)
    assert "packages.changed" not in before  # an environment as installed keeps the fields it had
    (site / "demo" / "core.py").write_bytes(b"def add(a, b):\n    return a - b\n")
    (site / "sitecustomize.py").write_text("print('hi')\n")
    after = _packages(site)
    found = {d.key: d for d in diff.compare_flat(before, after, cpu_compute=True)}
    assert found["packages.changed"].severity == fields.BREAKING
    assert found["packages.changed"].b == '["demo: demo/core.py"]'
    assert found["packages.startup_hooks"].severity == fields.BREAKING
    assert "sitecustomize.py" in (found["packages.startup_hooks"].b or "")
    assert fields.severity("packages.record_check.files", True)[0] == fields.INFO
    # Both are fingerprint fields: the fingerprint of a tampered environment is another one.
    assert all(fields.rule_for(k).fingerprint for k in ("packages.changed", "packages.startup_hooks"))


def test_a_reference_without_the_hooks_field_is_not_failed_by_it() -> None:
    """A lock recorded by an earlier probe has no packages.startup_hooks: its absence there is informational
    (the verdict says it was not compared), while a changed file is breaking however it appears."""
    assert fields.severity("packages.startup_hooks", True, absent=True)[0] == fields.INFO
    assert fields.severity("packages.changed", True, absent=True)[0] == fields.BREAKING


def test_a_probe_that_leaves_the_files_out_says_so(tmp_path: Path) -> None:
    """A host probe does not hash unless asked; its report says the check did not run, never 'clean'."""
    import envpin.probe.pyenv as p
    from envpin.probe._common import Context

    site = make_site(tmp_path)
    (site / "demo" / "core.py").write_bytes(b"def add(a, b):\n    return a - b\n")
    ctx = Context()
    ctx.cache["dists"] = (*p.scan_distributions([str(site)]), [str(site)])
    packages = p.collect_packages(ctx)
    assert "changed" not in packages
    assert packages["record_check"]["unavailable"].startswith("not checked:")
