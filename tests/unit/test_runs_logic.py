"""envpin bisect/study/cost without TensorFlow: the statistics, the metrics contract, the source frame, the
recipe table's notes, the verdict words, the figure, the hook's environment, and bad input (exit 2)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from envpin.runs import figure, launch, study
from envpin.runs.bisect import table_notes, user_frame
from envpin.runs.cost import overhead, overhead_ci
from envpin.views.runs import bisect_lines


def test_std_is_exactly_zero_for_equal_values_and_sample_std_otherwise() -> None:
    assert study.std([0.1 + 0.2] * 5) == 0.0  # a float that a mean/deviation round trip would not keep exact
    assert study.std([1.0, 2.0, 3.0]) == pytest.approx(1.0)
    assert study.ratio([1.0, 1.0], [1.0, 3.0]) == 0.0
    assert study.ratio([1.0, 2.0], [5.0, 5.0]) is None


def test_bootstrap_interval_is_seeded_and_brackets_the_ratio() -> None:
    fixed, varied = [0.50, 0.51, 0.49, 0.50, 0.52], [0.40, 0.55, 0.61, 0.47, 0.52]
    first, again = study.bootstrap_ci(fixed, varied), study.bootstrap_ci(fixed, varied)
    assert first == again and first is not None
    assert first[0] <= study.ratio(fixed, varied) <= first[1]  # type: ignore[operator]
    assert study.bootstrap_ci([1.0], varied) is None


def test_verdict_says_exactly_only_when_every_fixed_run_is_equal() -> None:
    same = study.verdict("loss", [0.3, 0.3, 0.3], [0.2, 0.4, 0.3])
    assert "exactly the same value" in same and "nothing" in same
    spread = study.verdict("loss", [0.3, 0.3000001, 0.3], [0.2, 0.4, 0.3])
    assert "exactly" not in spread and "identical" not in spread and "small part" in spread
    assert "%" in spread and "0%" not in spread.split("spreads ")[1][:3]  # never rounded down to 0 %
    assert "nondeterminism alone" in study.verdict("loss", [0.3, 0.4], [0.5, 0.5])


def test_metrics_line_is_the_last_json_line_with_the_key() -> None:
    out = "\n".join(
        [
            'epoch 1 {"envpin_metrics": not json',
            json.dumps({"envpin_metrics": {"acc": 0.5}}),
            "some log line",
            json.dumps({"envpin_metrics": {"acc": 0.75, "loss": 1, "flag": True, "name": "x"}}),
        ]
    )
    assert launch.metrics_line(out) == {"acc": 0.75, "loss": 1.0}
    assert launch.metrics_line("no metrics here\n") == {}


def test_user_frame_skips_python_tensorflow_keras_and_the_hook() -> None:
    stack = [
        {"file": "/home/u/train.py", "line": 40, "function": "<module>"},
        {"file": "/tmp/envpin-runs-x/hook/sitecustomize.py", "line": 150, "function": "fit"},
        {"file": "/venv/lib/python3.11/site-packages/keras/src/trainer.py", "line": 9, "function": "fit"},
        {"file": "/home/u/model.py", "line": 16, "function": "call"},
        {
            "file": "/venv/lib/python3.11/site-packages/tensorflow/python/ops/bincount_ops.py",
            "line": 183,
            "function": "bincount",
        },
    ]
    assert user_frame(stack) == {"file": "/home/u/model.py", "line": 16, "function": "call"}
    assert user_frame(stack[2:3]) is None


def test_the_recipe_table_speaks_of_weighted_bincount_per_device() -> None:
    cpu = table_notes("DenseBincount", "2.21.0", "/job:localhost/replica:0/task:0/device:CPU:0")
    assert [n["kind"] for n in cpu] == ["nondeterministic"] and "CPU" in cpu[0]["op"]
    gpu = table_notes("DenseBincount", "2.21.0", "/device:GPU:0")
    assert {n["kind"] for n in gpu} == {"raises"} and any("DenseBincount" in n["detail"] for n in gpu)
    assert table_notes("MatMul", "2.21.0", "/device:CPU:0") == []
    # The summary modes of the debugger raise under determinism on a GPU: bisect dumps FULL_TENSOR instead.
    summary = table_notes("DebugNumericSummaryV2", "2.21.0", "/device:GPU:0")
    assert summary and all(n["kind"] == "raises" for n in summary)


def _bisect(first: dict | None, unmatched: int = 0, compared: int = 10) -> dict:
    return {
        "command": ["python", "t.py"],
        "seed": 1,
        "steps": 3,
        "recipe": False,
        "tf_version": "2.21.0",
        "executions": [compared, compared],
        "compared": compared,
        "unmatched": unmatched,
        "identical": first is None and unmatched == 0 and compared > 0,
        "first_difference": first,
        "source": None,
        "recipe_table": [],
    }


def test_bisect_words_never_say_identical_when_not() -> None:
    assert any(line.startswith("bit-identical") for line in bisect_lines(_bisect(None)))
    lines = bisect_lines(_bisect(None, unmatched=3))
    assert not any("bit-identical" in line for line in lines) and any("not identical" in line for line in lines)
    first = {
        "kind": "graph",
        "graph": "g",
        "op_type": "MatMul",
        "op_name": "m",
        "output_slot": 0,
        "index": 4,
        "difference": {
            "kind": "values",
            "dtype": "float32",
            "shape": [2],
            "elements": 2,
            "bit_equal": 1,
            "max_abs": 1e-7,
            "max_rel": 1e-6,
        },
    }
    text = "\n".join(bisect_lines(_bisect(first)))
    assert "identical" not in text and "1 of 2 elements bit-equal" in text and "lists nothing for MatMul" in text


def _study_result() -> dict:
    metric = {
        "metric": "loss <b>",
        "recipe": False,
        "ratio": 0.5,
        "ratio_ci95": [0.2, 0.9],
        "verdict": "v & w",
        "fixed": {"values": [0.3, 0.31, 0.29], "std": 0.01},
        "varied": {"values": [0.2, 0.4, 0.3], "std": 0.1},
    }
    return {
        "command": ["python", "t.py"],
        "runs_per_arm": 3,
        "seed": 42,
        "tf_version": "2.21.0",
        "metrics": [
            metric,
            dict(metric, recipe=True, ratio=0.0, ratio_ci95=[0.0, 0.0], fixed={"values": [0.3] * 3, "std": 0.0}),
        ],
    }


def test_figure_is_self_contained_and_draws_every_run() -> None:
    page = figure.page(_study_result())
    assert page == figure.page(_study_result())  # same runs, same bytes
    assert page.count("<svg") == 2 and page.count('class="run"') == 12
    assert "<script" not in page and "src=" not in page and "href=" not in page and "@import" not in page
    assert "loss &lt;b&gt;" in page and "v &amp; w" in page  # metric names and verdicts are escaped
    import xml.dom.minidom

    for svg in page.split("<svg")[1:]:  # each panel is well-formed XML
        xml.dom.minidom.parseString("<svg" + svg.split("</svg>")[0] + "</svg>")


def test_cost_overhead_and_its_interval() -> None:
    assert overhead([1.0, 1.0], [1.5, 1.5]) == pytest.approx(0.5)
    ci = overhead_ci([1.0, 1.1, 0.9], [1.2, 1.3, 1.25])
    assert ci is not None and ci[0] <= overhead([1.0, 1.1, 0.9], [1.2, 1.3, 1.25]) <= ci[1]


def test_the_child_environment_carries_the_hook_and_the_seed(tmp_path: Path) -> None:
    base = {"PATH": "/bin", "PYTHONPATH": "/user/lib", "ENVPIN_RUNS_DUMP": "/stale", "ENVPIN_SEED": "9"}
    env = launch.environment(launch.RunSpec("a", seed=7, recipe=True), tmp_path / "hook", tmp_path / "out", base)
    assert env["PYTHONPATH"].split(os.pathsep) == [
        str(tmp_path / "hook"),
        str(tmp_path / "hook" / "envpin.pyz"),
        "/user/lib",
    ]
    assert env["ENVPIN_SEED"] == "7" and env["ENVPIN_RUNS_RECIPE"] == "1" and env["PYTHONHASHSEED"] == "0"
    assert "ENVPIN_RUNS_DUMP" not in env  # a stale variable of the caller never reaches the child
    plain = launch.environment(launch.RunSpec("b", seed=None), tmp_path / "hook", tmp_path / "out", base)
    assert "ENVPIN_SEED" not in plain and "ENVPIN_RUNS_RECIPE" not in plain


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


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("bisect",), "Missing argument"),
        (("study", "--", "no-such-program-xyz"), "not found"),
        (("cost", "-r", "1", "--", sys.executable, "-c", "pass"), "between 2 and 1000"),
        (("study", "-n", "1", "--", sys.executable, "-c", "pass"), "between 2 and 1000"),
        (("bisect", "--steps", "0", "--", sys.executable, "-c", "pass"), "--steps"),
    ],
)
def test_bad_input_is_one_error_and_one_hint(cli, args: tuple[str, ...], needle: str) -> None:  # type: ignore[no-untyped-def]
    result = cli(*args)
    lines = result.stderr.strip().splitlines()
    assert result.code == 2 and needle in lines[-2] and lines[-2].startswith("error:")
    assert lines[-1].startswith("hint:") and "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_command_without_tensorflow_or_metrics_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    bisect = cli("bisect", "--", sys.executable, "-c", "print(1)")
    assert bisect.code == 2 and "never imported TensorFlow" in bisect.stderr
    study_ = cli("study", "-n", "2", "-j", "2", "--", sys.executable, "-c", "print(1)")
    assert study_.code == 2 and "reported no metrics" in study_.stderr and "envpin_metrics" in study_.stderr
    cost = cli("cost", "-r", "2", "--", sys.executable, "-c", "print(1)")
    assert cost.code == 2 and "never imported TensorFlow" in cost.stderr
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
    data = json.loads(result.stdout)
    [metric] = data["metrics"]
    assert metric["fixed"]["std"] == 0.0 and metric["varied"]["std"] > 0 and metric["ratio"] == 0.0
    assert "exactly the same value" in metric["verdict"]
    assert [r["seed"] for r in data["runs"]] == [42, 42, 42, 43, 44, 45]
    assert html.read_text().count('class="run"') == 6


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
    page.write_text(figure.page(_study_result()))
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
    svg.write_text(figure.sheet(_study_result(), columns=2))
    subprocess.run([renderer, str(svg), "-o", str(tmp_path / "study.png")], check=True, timeout=60)
    width, height, rows = _png_pixels((tmp_path / "study.png").read_bytes())
    assert (width, height) == (2 * figure.WIDTH, figure.HEIGHT)
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


def test_node_records_come_back_whole_or_not_at_all() -> None:
    """The framing of envpin/runs/nodeboot.py as the host reads it: records split into lines, interleaved with
    the command's output; a damaged or incomplete record is left out, never half-read."""
    from envpin.runs import nodeboot

    big = {"pid": 1, "history": {"loss": [i / 7 for i in range(3000)]}, "tf_version": "2.9.1"}
    small = {"pid": 2, "tf_version": "2.9.1", "seed": 4}
    lines_big, lines_small = nodeboot.frame(big), nodeboot.frame(small)
    assert len(lines_big) > 3 and all(len(line) < 700 for line in lines_big)
    mixed = ["epoch 1", *lines_big[:2], '{"envpin_metrics": {"a": 1}}', *lines_small, *lines_big[2:], "done"]
    assert sorted(launch.node_records("\n".join(mixed)), key=lambda r: r["pid"]) == [big, small]
    assert launch.node_records("\n".join(lines_big[:-1] + lines_small)) == [small]  # incomplete: left out
    damaged = [*lines_big[:1], lines_big[1][:-3] + "AAA", *lines_big[2:]]
    assert launch.node_records("\n".join(damaged)) == []
    assert launch.metrics_line("\n".join(mixed)) == {"a": 1.0}


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


def test_bisect_words_for_runs_with_no_counterpart_at_all() -> None:
    lines = bisect_lines(_bisect(None, unmatched=2, compared=0))
    assert lines[-1].startswith("not identical: no op execution had a counterpart in the other run (2 without one)")
    assert not any("bit-identical" in line or "no compared value differed" in line for line in lines)
