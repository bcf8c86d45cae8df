"""The streamed JSON and SARIF writers (envpin.audit.report.json_chunks / sarif_chunks) write exactly the text
print_json writes for to_json / to_sarif: the same bytes, only without building the whole document first."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from envpin.audit import report, run

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text())
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(), inner, max_size=4)),
    max_leaves=20,
)


def canonical(value: object) -> str:
    """What envpin.views.console.print_json writes."""
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


@given(_VALUES)
def test_text_is_canonical_json(value: object) -> None:
    assert report._text(value, "") + "\n" == canonical(value)


@given(st.dictionaries(st.text(), _VALUES, max_size=5), st.lists(_VALUES, max_size=5))
def test_streamed_list_is_canonical_json(doc: dict[str, object], items: list[object]) -> None:
    streamed = {**doc, "items": report._Stream(iter(items))}
    assert "".join(report._chunks(streamed, "")) + "\n" == canonical({**doc, "items": items})


def test_json_and_sarif_chunks_match_the_documents(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "Dockerfile").write_text(
        "FROM nvcr.io/nvidia/tensorflow:20.02-tf2-py3\nRUN pip install numpy \\\n  requests\n"
        'RUN curl -sSL https://example.com/x.sh | sh\nENV K="\\u00e9 \\x1b[31m"\nRUN echo "é ☃"\n'
    )
    res = run(["Dockerfile"], fail_on="warning")
    assert len(res.findings) >= 3
    for fixed in (None, [{"source": "Dockerfile", "output": "x", "fixed": [], "commented": [], "actions": ["a"]}]):
        streamed = "".join(report.json_chunks(res.findings, res.files, res.fail_on, res.exit_code, fixed))
        assert streamed == canonical(report.to_json(res.findings, res.files, res.fail_on, res.exit_code, fixed))
    assert "".join(report.sarif_chunks(res.findings)) == canonical(report.to_sarif(res.findings))
    assert "".join(report.json_chunks([], [], "error", 0)) == canonical(report.to_json([], [], "error", 0))
    assert "".join(report.sarif_chunks([])) == canonical(report.to_sarif([]))
