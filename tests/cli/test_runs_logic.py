"""envpin bisect/study/cost without TensorFlow, with processes: the hook in a real Python (the sitecustomize it
shadows, a TensorFlow without debugger dumps), the Slurm node program, studies through the CLI that read the
metrics line and write the figure, and the figure drawn by a headless browser and librsvg (marker
`renderers`)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from envpin.runs import launch
from envpin.views import figures
from tests.unit.test_runs_logic import _study_result


def _png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and rows of RGB pixels (3 bytes each) of an 8-bit RGB or RGBA PNG, decoded with the
    standard library."""
    import struct
    import zlib

    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, bpp = 8, b"", 0, 0, 3
    while pos < len(data):
        (length,), kind = struct.unpack(">I", data[pos : pos + 4]), data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6)
            bpp = 4 if colour == 6 else 3
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw, stride, rows = zlib.decompress(idat), width * bpp, []
    prev = bytearray(stride)
    for r in range(height):
        ftype, line = raw[r * (stride + 1)], bytearray(raw[r * (stride + 1) + 1 : (r + 1) * (stride + 1)])
        for i in range(stride):
            a, b = line[i - bpp] if i >= bpp else 0, prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 255
            elif ftype == 2:
                line[i] = (line[i] + b) & 255
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(b"".join(bytes(line[i : i + 3]) for i in range(0, stride, bpp)))
        prev = line
    return width, height, rows


def _near(px: bytes, rgb: bytes, tolerance: int = 30) -> bool:
    return sum(abs(p - q) for p, q in zip(px, rgb, strict=True)) < tolerance


def test_the_hook_refuses_a_tensorflow_without_debugger_dumps(tmp_path: Path) -> None:
    """The hook's own branch for a TensorFlow whose tf.debugging has no experimental dumps (TensorFlow 2.0
    and older cannot be installed on this Python): a minimal `tensorflow` package that lacks them."""
    fake = tmp_path / "site" / "tensorflow"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("__version__ = '2.0.0'\nclass debugging:\n    pass\n")
    script = tmp_path / "train.py"
    script.write_text(f"import sys; sys.path.insert(0, {str(tmp_path / 'site')!r}); import tensorflow\n")
    spec = launch.RunSpec("a", seed=1, dump=True)
    with pytest.raises(launch.RunError) as err:
        launch.run_once([sys.executable, str(script)], spec, launch.hook_folder(tmp_path), tmp_path / "run")
    assert "TensorFlow 2.0.0 cannot dump tensor values" in err.value.message
    assert "envpin study" in (err.value.hint or "")


@pytest.mark.slow
def test_a_command_without_tensorflow_or_metrics_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bisect = cli("bisect", "--", sys.executable, "-c", "print(1)")
    assert bisect.code == 2 and "never imported TensorFlow" in bisect.stderr
    # of its 3 steps (the two runs, then the comparison of their dumps) the runs were made: no dump to compare
    assert [line.split(";")[0] for line in bisect.stderr.splitlines() if line.startswith("bisect: ")] == [
        f"bisect: {k}/3 steps" for k in range(3)
    ]
    study_ = cli("study", "-n", "2", "-j", "2", "--", sys.executable, "-c", "print(1)")
    assert study_.code == 2 and "reported no metrics" in study_.stderr and "envpin_metrics" in study_.stderr
    cost = cli("cost", "-r", "2", "--", sys.executable, "-c", "print(1)")
    assert cost.code == 2 and "never imported TensorFlow" in cost.stderr
    # stderr is not a terminal: progress as plain lines, one as each run ends (docs/cli.md "Progress")
    assert [line.split(";")[0] for line in cost.stderr.splitlines() if line.startswith("cost: ")] == [
        f"cost: {k}/4 runs" for k in range(5)
    ]
    slow = cli("study", "-n", "2", "--timeout", "0.5", "--", sys.executable, "-c", "import time; time.sleep(30)")
    assert slow.code == 2 and "did not finish within --timeout" in slow.stderr
    failing = cli("cost", "-r", "2", "--", sys.executable, "-c", "import sys; sys.exit('boom')")
    assert failing.code == 2 and "exited with status 1" in failing.stderr and "boom" in failing.stderr


@pytest.mark.slow
def test_study_reads_the_metrics_line_and_writes_the_figure(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """No TensorFlow needed: a script whose metric depends on the seed only (exactly reproducible)."""
    script = tmp_path / "seeded.py"
    script.write_text(
        "import json, os, random\nrandom.seed(int(os.environ['ENVPIN_SEED']))\n"
        "print(json.dumps({'envpin_metrics': {'score': random.random()}}))\n"
    )
    html = tmp_path / "study.html"
    result = cli(
        "study", "-n", "3", "-j", "2", "--html", str(html), "--format", "json", "--", sys.executable, str(script)
    )
    assert result.code == 0, result.stderr
    # Two runs at a time, each count once and in order (the estimate of the time left: tests/unit/test_progress)
    progress = [line for line in result.stderr.splitlines() if line.startswith("study: ")]
    assert [line.split(";")[0] for line in progress] == [f"study: {k}/6 runs" for k in range(7)], result.stderr
    assert "left" not in progress[0] + progress[-1] and progress[-1].endswith(" elapsed"), progress
    data = json.loads(result.stdout)
    [metric] = data["metrics"]
    assert metric["fixed"]["std"] == 0.0 and metric["varied"]["std"] > 0 and metric["ratio"] == 0.0
    assert "exactly the same value" in metric["verdict"]
    assert [r["seed"] for r in data["runs"]] == [42, 42, 42, 43, 44, 45]
    assert html.read_text().count('class="run"') == 6


@pytest.mark.renderers
def test_the_study_page_renders_in_a_headless_browser(tmp_path: Path) -> None:
    """Chromium draws the self-contained page offline: a screenshot of the window's size in which each of
    the two panels (left and right half) holds dots of both arms' colours (fill-opacity 0.8 on white)."""
    import shutil
    import subprocess

    browser = shutil.which("chromium")
    if browser is None:
        pytest.skip("chromium is not installed (scripts/services.sh install)")
    page = tmp_path / "study.html"
    page.write_text(figures.page(_study_result()))
    shot = tmp_path / "study.png"
    # --no-sandbox: Chromium's sandbox refuses to start as root (CI runs as root); the page has no script.
    subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=900,700",
            page.as_uri(),
        ],
        check=True,
        timeout=120,
        capture_output=True,
    )
    width, height, rows = _png_pixels(shot.read_bytes())
    assert (width, height) == (900, 700)
    for half in (range(0, 450), range(450, 900)):
        pixels = {row[3 * x : 3 * x + 3] for row in rows for x in half}
        for colour in ("1f77b4", "d62728"):  # the fixed and the varied arm's dots
            dot = bytes(round(0.8 * c + 0.2 * 255) for c in bytes.fromhex(colour))
            assert any(_near(px, dot) for px in pixels), (colour, half)


@pytest.mark.renderers
def test_the_figure_renders_in_a_real_svg_renderer(tmp_path: Path) -> None:
    """librsvg (rsvg-convert) draws the panels: the image has the sheet's size and both arms' colours."""
    import shutil
    import subprocess

    renderer = shutil.which("rsvg-convert")
    if renderer is None:
        pytest.skip("rsvg-convert (librsvg2-bin) is not installed (scripts/services.sh install)")
    svg = tmp_path / "study.svg"
    svg.write_text(figures.sheet(_study_result(), columns=2))
    subprocess.run([renderer, str(svg), "-o", str(tmp_path / "study.png")], check=True, timeout=60)
    width, height, rows = _png_pixels((tmp_path / "study.png").read_bytes())
    assert (width, height) == (2 * figures.WIDTH, figures.HEIGHT)
    pixels = {row[i : i + 3] for row in rows for i in range(0, len(row), 3)}
    for colour in ("1f77b4", "d62728"):  # the fixed and the varied arm's dots
        assert any(_near(px, bytes.fromhex(colour)) for px in pixels), colour


def test_the_hook_runs_the_sitecustomize_it_shadows(tmp_path: Path) -> None:
    """An environment's own sitecustomize (Debian's Python has one) still runs under the hook."""
    import subprocess

    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import os\nos.environ['THEIRS_RAN'] = 'yes'\n")
    env = launch.environment(
        launch.RunSpec("a", seed=3),
        launch.hook_folder(tmp_path),
        tmp_path / "out",
        {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(theirs)},
    )
    code = "import os, sys; print(sys.modules['sitecustomize'].__file__, os.environ.get('THEIRS_RAN'))"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    hook_file, ran = out.split()
    assert hook_file == str(tmp_path / "hook" / "sitecustomize.py") and ran == "yes"


def test_the_node_bootstrap_runs_the_command_with_the_hook(tmp_path: Path) -> None:
    """nodeboot.py as srun starts it, here: the bundle on stdin, the run's variables as arguments; the hook
    is unpacked into a temporary folder and found first on PYTHONPATH, the command's status is kept, and a
    damaged bundle stops before the command runs."""
    import hashlib
    import subprocess

    from envpin.runs import nodeboot

    data = launch.bundle(launch.hook_folder(tmp_path))
    assert data == launch.bundle(launch.hook_folder(tmp_path / "again"))  # the same bytes every time
    boot = Path(nodeboot.__file__).read_text()
    code = (
        "import os, sys; pyz = os.environ['PYTHONPATH'].split(os.pathsep)[1]; "
        "print(sys.modules['sitecustomize'].__file__, pyz, os.path.isfile(pyz), "
        "os.environ['ENVPIN_SEED'], os.environ['PYTHONHASHSEED']); sys.exit(5)"
    )
    args = [
        sys.executable,
        "-c",
        boot,
        hashlib.sha256(data).hexdigest(),
        "ENVPIN_SEED=7",
        "PYTHONHASHSEED=0",
        "--",
        sys.executable,
        "-c",
        code,
    ]
    env = {"PATH": os.environ.get("PATH", ""), "ENVPIN_SEED": "99"}
    proc = subprocess.run(args, input=data, capture_output=True, env=env, timeout=60)
    assert proc.returncode == 5, proc.stderr
    hook, pyz, pyz_there, seed, hashseed = proc.stdout.decode().split()
    assert hook.endswith("/hook/sitecustomize.py") and (pyz, pyz_there) == (
        hook.rpartition("/")[0] + "/envpin.pyz",
        "True",
    )
    assert (seed, hashseed) == ("7", "0") and not Path(hook).exists()  # the task's folder is removed
    proc = subprocess.run(args, input=data[:-1], capture_output=True, env=env, timeout=60)
    assert proc.returncode == nodeboot.BROKEN and b"arrived damaged" in proc.stderr and not proc.stdout


def test_bisect_refuses_a_run_that_failed_before_its_steps(tmp_path: Path) -> None:
    """A run that imported TensorFlow, dumped, then failed (a script error on an older Keras) is not compared:
    its dump covers part of a run. (A minimal `tensorflow` with the debugger call and its reader.)"""
    from envpin.runs.bisect import bisect

    site = tmp_path / "site"
    reader = site / "tensorflow" / "python" / "debug" / "lib"
    reader.mkdir(parents=True)
    for folder in (site / "tensorflow", site / "tensorflow" / "python", reader.parent, reader):
        (folder / "__init__.py").touch()
    (site / "tensorflow" / "__init__.py").write_text(
        "__version__ = '2.12.1'\nclass _NS(object):\n    pass\ndebugging = _NS()\ndebugging.experimental = _NS()\n"
        "debugging.experimental.enable_dump_debug_info = lambda root, **kw: None\n"
    )
    (reader / "debug_events_reader.py").write_text("class DebugDataReader(object):\n    pass\n")
    script = tmp_path / "train.py"
    script.write_text(
        f"import sys; sys.path.insert(0, {str(site)!r}); import tensorflow\n"
        "raise ValueError('The last dimension of the inputs to a Dense layer should be defined')\n"
    )
    with pytest.raises(launch.RunError) as err:
        bisect([sys.executable, str(script)], tmp_path / "work", steps=3)
    assert err.value.message.startswith("the command exited with status 1 (run 1)")
    assert "last dimension" in err.value.message
