"""How `fleet report` reduces a report in one pass (envpin.fleet.aggregate.Reducer, envpin.files.read.Members):
each record is what flattening the whole report and comparing it with the first gives, whatever is equal
only by Python's `==` (1, 1.0 and true; 0.0 and -0.0) or shares a name prefix; a report too deep is refused
wherever it differs from the first; members read from text as json.loads reads them."""

from __future__ import annotations

import copy
import fnmatch
import json
from pathlib import Path
from typing import Any

import pytest

from envpin.environment import lockfile
from envpin.errors import ReportError
from envpin.files.read import MAX_JSON_DEPTH, Members, parse_json, read_regular
from envpin.fleet import inputs
from envpin.fleet.aggregate import Compact, Reducer
from envpin.probe import fields
from tests.fleetdata import HASH_2, node


def _expected(first: dict[str, Any], report: dict[str, Any]) -> dict[str, Any]:
    """The record the whole flattened report gives (what Reducer.add kept before it compared sections)."""
    base, flat = fields.flatten(first), fields.flatten(report)
    base_fp, fp = lockfile.fingerprint_fields(first, base), lockfile.fingerprint_fields(report, flat)
    return {
        "changed": dict(flat.items() - base.items()),
        "missing": base.keys() - flat.keys(),
        "key": (frozenset(fp.items() - base_fp.items()), frozenset(base_fp.keys() - fp.keys())),
        "device_class": fields.device_class(report, flat),
        "goldens": tuple(lockfile.report_goldens(report)),
        "gpu": fields.gpu_present(flat),
    }


def _got(record: Compact) -> dict[str, Any]:
    return {
        "changed": record.changed,
        "missing": set(record.missing),
        "key": record.key,
        "device_class": record.device_class,
        "goldens": record.goldens,
        "gpu": record.gpu,
    }


def _first() -> dict[str, Any]:
    r = node("n0")
    r["cpu"]["count"] = {"value": 8, "source": "test"}
    r["cpu"]["ratio"] = {"value": 0.0, "source": "test"}
    r["memory"]["limits"] = {"value": [1, 2.5, True], "source": "test"}
    r["limits"]["a"] = {"value": {"b": "x"}, "source": "test"}  # 'limits.a.b' two ways: names that overlap
    r["limits"]["a.b"] = {"value": "y", "source": "test"}
    return r


def _variants() -> list[dict[str, Any]]:
    def changed(**edits: Any) -> dict[str, Any]:
        r = _first()
        for path, value in edits.items():
            section, field = path.split("__", 1)
            if value is _DROP:
                del r[section][field]
            else:
                r[section][field] = value
        return r

    cpu_only = changed(gpu__count={"value": 0, "source": "test"})
    cpu_only["gpu"] = {"count": {"value": 0, "source": "test"}}
    no_class = _first()
    no_class["selftest"]["golden"].pop("device_class")
    no_section = _first()
    del no_section["cuda"]
    listed = _first()
    listed["os"] = ["not", "an", "object"]
    return [
        _first(),
        changed(cpu__count={"value": 8.0, "source": "test"}),  # == 8, flattens to 8.0
        changed(cpu__count={"value": True, "source": "other"}),  # == 1 would be; another value and source
        changed(cpu__ratio={"value": -0.0, "source": "test"}),  # == 0.0, flattens to -0.0
        changed(memory__limits={"value": [1.0, 2.5, 1], "source": "test"}),  # == [1, 2.5, True]
        changed(limits__a=_DROP),  # limits.a.b is then the other field's
        changed(limits__a={"value": {"b": "z"}, "source": "test"}),  # limits.a.b stays the other field's
        changed(limits__c={"value": "new", "source": "test"}),
        changed(host__hostname={"error": "no name"}, cpu__isa_level=_DROP),
        node("n1", golden=HASH_2, gpu__driver_version="550.90.07"),
        cpu_only,
        no_class,
        no_section,
        listed,
    ]


_DROP = object()


@pytest.mark.parametrize("via_text", [False, True])
def test_a_record_is_what_the_flattened_report_gives(via_text: bool) -> None:
    reducer, members = Reducer(), Members()
    first = _first()
    if via_text:  # fleet report's path: the first report's sections shared with the reports read next
        reducer.add(members.parse(json.dumps(first)) or {})
        members.keep(dict(reducer.reference or {}))
    else:
        reducer.add(first)
    for report in _variants():
        given = members.parse(json.dumps(report)) if via_text else copy.deepcopy(report)
        assert given == report
        assert _got(reducer.add(given or {})) == _expected(first, report), report


def test_members_read_text_as_json_loads_does() -> None:
    texts = [
        '{"a": 1, "b": [1, 2.0, true, null], "c": {"d": "\\u00e9"}}',
        ' \n{ "a" :1 ,"a": {"x": -0.0} }\r\n',  # a key twice: the last value, in the first place
        "{}",
        '{"a": "x", "b": 1e400}',
    ]
    for text in texts:
        assert Members().parse(text) == json.loads(text)
        assert list(Members().parse(text) or {}) == list(json.loads(text))
    refused = ['{"a": 1,}', '{"a" 1}', '{"a": 1} x', "\ufeff{}", "[1]"]
    for text in refused:
        assert Members().parse(text) is None
    # Nesting json's scanner cannot follow: refused where json.loads is (RecursionError up to 3.12; 3.13's
    # scanner reads 5,000 levels), read where it reads it.
    deep = '{"a": ' + "[" * 5000 + "]" * 5000 + "}"
    try:
        json.loads(deep)
    except RecursionError:
        assert Members().parse(deep) is None
    else:
        parsed = Members().parse(deep)
        assert parsed is not None and list(parsed) == ["a"]
    for text in refused[:4]:  # parse_json says what json.loads says
        with pytest.raises(ReportError, match="is not valid JSON"):
            parse_json(text, "x", ReportError, members=Members())


def test_members_share_what_is_the_same_text_and_read_the_rest() -> None:
    members = Members()
    members.parse('{"same": {"k": [1, 2]}, "other": {"k": 1}, "n": 5}')
    kept = {"same": {"k": [1, 2]}, "other": {"k": 1}, "n": 5}
    members.keep(kept)
    got = members.parse('{"n": 5, "other": {"k": 1.0}, "same": {"k": [1, 2]}}') or {}
    assert got["same"] is kept["same"] and got["other"] is not kept["other"]
    assert type(got["other"]["k"]) is float and got == {"n": 5, "other": {"k": 1.0}, "same": {"k": [1, 2]}}
    assert members.parse('{"same": {"k": [1, 2, 3]}}') == {"same": {"k": [1, 2, 3]}}


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.parametrize(
    "where",
    ["first", "field", "section-field", "top-level", "listed-section", "not-a-report"],
)
def test_a_report_too_deep_is_refused_where_it_differs(tmp_path: Path, where: str) -> None:
    deep = _deep(MAX_JSON_DEPTH)  # with the report, its section and field: past the limit
    first, second = node("n1"), node("n2")
    if where == "first":
        first["cpu"]["x"] = {"value": deep}
    elif where == "field":
        second["cpu"]["x"] = {"value": deep}
    elif where == "section-field":
        second["cpu"]["isa_level"]["note"] = deep  # beside the value: not flattened, still nesting
    elif where == "top-level":
        second["extra"] = deep
    elif where == "listed-section":
        second["os"] = deep
    else:
        second = {"nodes": deep}
    (tmp_path / "a.json").write_text(json.dumps(first))
    (tmp_path / "b.json").write_text(json.dumps(second))
    with pytest.raises(ReportError, match=f"nested more than {MAX_JSON_DEPTH} levels deep") as err:
        inputs.read([tmp_path], Reducer(), [])
    assert err.value.hint and "kubectl" in err.value.hint
    shallow = node("n2")
    shallow["cpu"]["x"] = {"value": _deep(MAX_JSON_DEPTH - 4)}  # at the limit
    (tmp_path / "a.json").write_text(json.dumps(node("n1")))
    (tmp_path / "b.json").write_text(json.dumps(shallow))
    assert len(inputs.read([tmp_path], Reducer(), [])) == 2


def test_rules_match_as_fnmatch_does() -> None:
    keys = [*fields.flatten(_first()), "host", "env.NCCL_DEBUG_SUBSYS", "env.NCCL_NET_PLUGIN", "gpu.x.uuid", ""]
    for rule in [*fields.RULES, fields.DEFAULT_RULE]:
        for key in keys:
            assert rule.matches(key) == fnmatch.fnmatchcase(key, rule.pattern), (rule.pattern, key)


def test_read_regular_reads_a_file_longer_than_its_size_says(tmp_path: Path) -> None:
    status = read_regular("/proc/self/status")  # its size is 0
    assert b"VmHWM" in status
    f = tmp_path / "f"
    f.write_bytes(b"x" * 10)
    assert read_regular(f, 10) == b"x" * 10
    with pytest.raises(OSError, match="larger than 9 bytes"):
        read_regular(f, 9)
