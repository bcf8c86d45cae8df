"""Self-test time limits: a child that runs out of time leaves the self-test inconclusive, never FAILED."""

from __future__ import annotations

import os

import pytest

from envpin.probe import tfchild
from envpin.probe.selftest import report
from envpin.probe.selftest.run import problems, timed_out, verdict


def _late(what: str = "golden training") -> dict:
    return tfchild.ChildTimeout("envpin.probe.golden", 600.0, 2400.4, 312.0).info(what)


def test_a_timeout_is_inconclusive_with_what_it_used() -> None:
    err = tfchild.ChildTimeout("envpin.probe.golden", 600.0, 2400.4, 312.0)
    assert str(err) == (
        "envpin.probe.golden ran out of time after 2400 s wall, 312 s CPU (limit 600 s CPU, 2400 s wall)"
    )
    assert tfchild.failure(err, "golden training") == {"timed_out": _late()}
    assert tfchild.failure("envpin.probe.golden exited with status 1", "golden") == {
        "error": "envpin.probe.golden exited with status 1"
    }


def test_verdict_of_an_unfinished_self_test() -> None:
    result = {"checks": [], "golden": {"timed_out": _late(), "steps": 40}, "hygiene": [], "timed_out": [_late()]}
    assert problems(result) == []  # not a failure
    assert timed_out(result) == [_late()["message"]]
    failed, line = verdict(result)
    assert failed is False
    assert line == "self-test timed out (inconclusive): " + _late()["message"]
    assert report.outcome(result, []).startswith("self-test inconclusive (1 child ran out of time)")
    assert report.summary(result)["golden"]["reason"] == _late()["message"]
    assert report.summary(result)["lines"][-1] == "timed out (inconclusive): " + _late()["message"]


def test_a_real_problem_still_fails_beside_a_timeout() -> None:
    finding = {"check": "PYTHONHASHSEED", "status": "finding", "message": "unset.", "fix": "set it"}
    result = {"checks": [], "golden": {}, "hygiene": [finding], "timed_out": [_late()]}
    assert verdict(result)[0] is True


def test_the_default_limit_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVPIN_SELFTEST_TIMEOUT", "90")
    assert tfchild.default_timeout() == 90.0
    for bad in ("", "soon", "0", "-5"):
        monkeypatch.setenv("ENVPIN_SELFTEST_TIMEOUT", bad)
        assert tfchild.default_timeout() == tfchild.DEFAULT_TIMEOUT


def test_cpu_seconds_of_this_process() -> None:
    before = tfchild.cpu_seconds(os.getpid())
    assert before is not None and before > 0
    sum(i * i for i in range(2_000_000))
    after = tfchild.cpu_seconds(os.getpid())
    assert after is not None and after > before
    assert tfchild.cpu_seconds(2**22 + 12345) is None  # no such process


def test_cli_refuses_a_limit_that_is_not_positive(cli) -> None:  # type: ignore[no-untyped-def]
    res = cli("selftest", "--timeout", "0")
    assert res.code == 2
    assert res.stderr.splitlines()[0] == "error: --timeout must be more than 0 seconds, not 0"
    assert res.stderr.splitlines()[1].startswith("hint: ")
    res = cli("probe", "--timeout", "30")
    assert res.code == 2 and "limits the self-test, which does not run here" in res.stderr


def test_the_schema_takes_an_unfinished_self_test() -> None:
    import json
    from pathlib import Path

    import jsonschema

    from envpin.probe import selftest

    schema = json.loads((Path(selftest.__file__).parent / "selftest.schema.json").read_text())
    result = {
        "schema": "envpin.selftest/1",
        "mode": "quick",
        "python": "3.11.7",
        "tf_version": None,
        "determinism": {"requested": "on"},
        "checks": [],
        "summary": "battery did not finish: " + _late("battery (determinism on)")["message"],
        "golden": {"timed_out": _late(), "steps": 40},
        "hygiene": [
            {"check": "hygiene", "status": "skipped", "message": "m", "fix": "", "timed_out": _late("seed hygiene")}
        ],
        "timed_out": [_late("battery (determinism on)"), _late()],
        "seconds": 12.5,
    }
    jsonschema.validate(result, schema)
