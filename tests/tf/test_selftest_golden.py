"""The golden training hash with real TensorFlow: equal settings train bit-identically, intra-op threads and
oneDNN change the weights, and envpin diff / verify classify the golden difference as breaking."""

from __future__ import annotations

import os
from typing import Any

import pytest

from envpin.probe import golden


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TF_ENABLE_ONEDNN_OPTS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")
    }
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def runs() -> dict[str, dict[str, Any]]:
    out = {
        "default": golden.run_golden(environ=_env()),
        "default_again": golden.run_golden(environ=_env()),
        "intra1_args": golden.run_golden(intra_op=1, environ=_env()),
        "intra2_args": golden.run_golden(intra_op=2, environ=_env()),
        "onednn_off": golden.run_golden(environ=_env(TF_ENABLE_ONEDNN_OPTS="0")),
    }
    # Compare each default with its real opposite, whatever this machine's default is: TF >= 2.9 turns
    # oneDNN's custom ops on by default only where the CPU has AVX512_VNNI/BF16/AMX, and an unset thread
    # count is the number of usable CPUs (1 on a one-CPU machine, where "1 thread" would be the default).
    default = out["default"]["settings"]
    out["onednn_opposite"] = golden.run_golden(
        environ=_env(TF_ENABLE_ONEDNN_OPTS="0" if default["onednn"] == "on" else "1")
    )
    out["intra_other_env"] = golden.run_golden(environ=_env(TF_NUM_INTRAOP_THREADS=_other_threads(out)))
    for name, result in out.items():
        assert "hash" in result, (name, result)
    return out


def _other_threads(runs: dict[str, dict[str, Any]]) -> str:
    """An intra-op thread count that is not the default one of this machine."""
    return "2" if runs["default"]["settings"]["intra_op"] == "1" else "1"


def test_two_fresh_runs_with_the_same_settings_are_equal(runs: dict[str, dict[str, Any]]) -> None:
    for name, result in runs.items():
        assert result["runs_equal"] is True, name
        assert len(result["hashes"]) == 2 and result["hash"] == result["hashes"][0]
    assert runs["default"]["hash"] == runs["default_again"]["hash"]
    assert runs["default"]["device_class"] == runs["default_again"]["device_class"]
    assert runs["default"]["steps"] == golden.STEPS


def test_intra_op_threads_1_vs_2_change_the_weights(runs: dict[str, dict[str, Any]]) -> None:
    one, two = runs["intra1_args"], runs["intra2_args"]
    assert one["hash"] != two["hash"]
    assert "intra_op=1" in one["device_class"] and "intra_op=2" in two["device_class"]
    # The environment variable and the argument reach TensorFlow alike.
    other = _other_threads(runs)
    assert runs["intra_other_env"]["hash"] == runs[f"intra{other}_args"]["hash"]
    assert runs["intra_other_env"]["settings"]["intra_op_source"] == "TF_NUM_INTRAOP_THREADS"
    assert runs["intra_other_env"]["settings"]["intra_op"] == other


def test_onednn_default_vs_its_opposite_changes_the_weights(runs: dict[str, dict[str, Any]]) -> None:
    default, opposite = runs["default"], runs["onednn_opposite"]
    assert runs["onednn_off"]["settings"]["onednn"] == "off"
    assert {default["settings"]["onednn"], opposite["settings"]["onednn"]} == {"on", "off"}
    assert default["hash"] != opposite["hash"]
    assert default["device_class"] != opposite["device_class"]
    on, off = (default, opposite) if default["settings"]["onednn"] == "on" else (opposite, default)
    assert on["device_class"].endswith("onednn=on") and off["device_class"].endswith("onednn=off")


def _report(env: dict[str, str], gold: dict[str, Any]) -> dict[str, Any]:
    """A real probe report of this machine under `env`, carrying the golden result measured under `env`."""
    from envpin.probe import collect

    report = collect(environ=env)
    report["selftest"] = {"golden": gold}
    return report


def test_diff_and_verify_flag_golden_differences_as_breaking(runs: dict[str, dict[str, Any]]) -> None:
    from envpin.environment import lockfile
    from envpin.environment.plan import make_plan
    from envpin.environment.render import render
    from envpin.probe import fields
    from envpin.reports import diff as diffing

    default_onednn = runs["default"]["settings"]["onednn"]
    base = _report(_env(), runs["default"])
    same = _report(_env(), runs["default_again"])
    threads = _report(_env(TF_NUM_INTRAOP_THREADS=_other_threads(runs)), runs["intra_other_env"])
    onednn = _report(_env(TF_ENABLE_ONEDNN_OPTS="0" if default_onednn == "on" else "1"), runs["onednn_opposite"])

    identical = diffing.diff_reports(base, same)
    assert not [d for d in identical if d.key.startswith("golden.")]
    assert not [d for d in identical if d.severity == fields.BREAKING], identical
    assert diffing.exit_code(identical) == 0

    for other in (threads, onednn):
        diffs = diffing.diff_reports(base, other)
        gold = [d for d in diffs if d.key.startswith("golden.")]
        assert gold and all(d.severity == fields.BREAKING for d in gold), gold
        assert {d.a for d in gold} | {d.b for d in gold} >= {
            base["selftest"]["golden"]["hash"],
            other["selftest"]["golden"]["hash"],
        }
        assert diffing.exit_code(diffs) == 1

    # The lock: recorded from the reference run, the same settings verify clean; another thread count or
    # the opposite oneDNN setting is breaking (its env field), and its golden hash belongs to another
    # device class, which the lock reports as not recorded yet.
    plan = make_plan(ngc="23.03", tf="2.11")
    locked, done = lockfile.Lock.from_plan(plan, render(plan)).record(base)
    assert f"golden hash for {runs['default']['device_class']}" in done
    assert not [d for d in locked.verify(same).differences if d.severity != fields.INFO]
    for other in (threads, onednn):
        found = locked.verify(other).differences
        assert diffing.exit_code(found) == 1
        assert [d for d in found if d.key.startswith("golden.") and d.severity == fields.INFO and d.a is None]
