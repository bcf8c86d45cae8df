"""The picture of `envpin study` (`--html`, `--svg`): one self-contained HTML page (inline SVG, no script, no
external file), one panel per metric and recipe setting, each arm drawn as its runs (dots) over a box of
quartiles with the mean marked; or the same panels as one SVG image.

Drawn from the study's result (StudyResult.to_dict()), as every view is: output is a pure function of it (no
clock, no randomness), so the same runs give the same bytes. The CLI writes the text where it is asked to.
"""

from __future__ import annotations

import html
import math
import statistics
from collections.abc import Sequence
from typing import Any

WIDTH, HEIGHT = 360, 260
_LEFT, _RIGHT, _TOP, _BOTTOM = 70, 20, 40, 50
_COLOURS = {"fixed": "#1f77b4", "varied": "#d62728"}


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def _quartiles(values: Sequence[float]) -> tuple[float, float, float]:
    ordered = sorted(values)
    if len(ordered) < 2:
        return ordered[0], ordered[0], ordered[0]
    q = statistics.quantiles(ordered, n=4, method="inclusive")
    return q[0], q[1], q[2]


def panel(metric: dict[str, Any], x: float = 0, y0: float = 0) -> str:
    """One metric's SVG: the fixed and the varied arm side by side on a shared vertical scale."""
    # nan and inf (reported as strings) have no place on the scale: only the finite values are drawn
    arms = [
        (name, [v for v in metric[name]["values"] if isinstance(v, (int, float)) and math.isfinite(v)])
        for name in ("fixed", "varied")
    ]
    every = [v for _, values in arms for v in values] or [0.0]
    lo, hi = min(every), max(every)
    if hi == lo:
        lo, hi = lo - 0.5 * (abs(lo) or 1.0) * 1e-3, hi + 0.5 * (abs(hi) or 1.0) * 1e-3
    pad = (hi - lo) * 0.06  # no dot sits on the frame
    lo, hi = lo - pad, hi + pad
    plot_h = HEIGHT - _TOP - _BOTTOM

    def y(v: float) -> float:
        return _TOP + (hi - v) / (hi - lo) * plot_h

    title = metric["metric"] + (" (envpin recipe)" if metric["recipe"] else "")
    ratio = metric["ratio"]
    sub = "fixed/varied std: " + ("undefined" if ratio is None else _fmt(ratio))
    if metric.get("ratio_ci95"):
        sub += " (95% CI " + " to ".join(_fmt(c) for c in metric["ratio_ci95"]) + ")"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" x="{x}" y="{y0}" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{html.escape(title)}">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/>',
        f'<text x="{WIDTH / 2}" y="16" text-anchor="middle" font-size="13" font-weight="bold">'
        f"{html.escape(title)}</text>",
        f'<text x="{WIDTH / 2}" y="31" text-anchor="middle" font-size="10">{html.escape(sub)}</text>',
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{HEIGHT - _BOTTOM}" stroke="#000"/>',
        f'<text x="{_LEFT - 4}" y="{y(hi) + 4:.1f}" text-anchor="end" font-size="10">{_fmt(hi)}</text>',
        f'<text x="{_LEFT - 4}" y="{y(lo) + 4:.1f}" text-anchor="end" font-size="10">{_fmt(lo)}</text>',
    ]
    slot = (WIDTH - _LEFT - _RIGHT) / len(arms)
    for i, (name, values) in enumerate(arms):
        cx = _LEFT + slot * (i + 0.5)
        colour = _COLOURS[name]
        if not values:
            parts.append(
                f'<text x="{cx:.1f}" y="{_TOP + plot_h / 2:.1f}" text-anchor="middle" font-size="10">'
                "no finite value</text>"
            )
            continue
        q1, med, q3 = _quartiles(values)
        mean = sum(values) / len(values)
        parts += [
            f'<g class="arm" data-arm="{name}" data-n="{len(values)}">',
            f'<rect x="{cx - 30:.1f}" y="{y(q3):.1f}" width="60" height="{max(y(q1) - y(q3), 1):.1f}" '
            f'fill="{colour}" fill-opacity="0.15" stroke="{colour}"/>',
            f'<line x1="{cx - 30:.1f}" y1="{y(med):.1f}" x2="{cx + 30:.1f}" y2="{y(med):.1f}" stroke="{colour}"/>',
            f'<line x1="{cx - 40:.1f}" y1="{y(mean):.1f}" x2="{cx + 40:.1f}" y2="{y(mean):.1f}" '
            f'stroke="#000" stroke-dasharray="4 3"/>',
        ]
        for k, v in enumerate(values):
            dx = ((k * 7) % 11 - 5) * 4  # a fixed spread, so equal values stay visible side by side
            parts.append(
                f'<circle class="run" cx="{cx + dx:.1f}" cy="{y(v):.1f}" r="4" fill="{colour}" '
                f'fill-opacity="0.8"><title>{html.escape(name)} run {k + 1}: {_fmt(v)}</title></circle>'
            )
        parts += [
            "</g>",
            f'<text x="{cx:.1f}" y="{HEIGHT - _BOTTOM + 16}" text-anchor="middle" font-size="11">{name} seeds</text>',
            f'<text x="{cx:.1f}" y="{HEIGHT - _BOTTOM + 30}" text-anchor="middle" font-size="10">'
            f"std {_fmt(metric[name]['std'])}</text>",
        ]
    parts.append("</svg>")
    return "\n".join(parts)


def sheet(result: dict[str, Any], columns: int = 4) -> str:
    """Every panel in one SVG image, `columns` to a row (for documents that show an image, not a page)."""
    metrics = result["metrics"]
    rows = (len(metrics) + columns - 1) // columns
    width, height = WIDTH * min(columns, len(metrics)), HEIGHT * rows
    body = "\n".join(panel(m, x=(i % columns) * WIDTH, y0=(i // columns) * HEIGHT) for i, m in enumerate(metrics))
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}">\n{body}\n</svg>\n'
    )


def page(result: dict[str, Any]) -> str:
    """The HTML page for a study result (StudyResult.to_dict())."""
    command = " ".join(result["command"])
    panels = "\n".join(
        f"<figure>{panel(m)}<figcaption>{html.escape(m['verdict'])}</figcaption></figure>" for m in result["metrics"]
    )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>envpin study: {html.escape(command)}</title>\n"
        "<style>body{font-family:sans-serif;margin:1.5em}figure{display:inline-block;margin:0 1em 1em 0;"
        "vertical-align:top;max-width:360px}figcaption{font-size:12px}</style>\n</head>\n<body>\n"
        f"<h1>envpin study</h1>\n<p><code>{html.escape(command)}</code>: {result['runs_per_arm']} runs with every "
        f"seed fixed ({result['seed']}) against {result['runs_per_arm']} with the seed varied; "
        f"TensorFlow {html.escape(str(result.get('tf_version')))}. Dots are runs, boxes quartiles, the dashed "
        "line the mean.</p>\n"
        f"{panels}\n</body>\n</html>\n"
    )
