"""The configuration figure: suite score against queries (and dollars) per configuration, with the
95% bootstrap band of seed_stats.py around each curve. Inputs are the rows seed_stats computes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import altair as alt

from .figures import RUN_PALETTE, SPEEDUP_TITLE, _data, tooltips


def _panel(rows: Sequence[dict[str, Any]], x: str, title: str, x_title: str, labels: list[str],
           x_format: str = "") -> alt.LayerChart | alt.FacetChart:
    color = alt.Color("label:N", scale=alt.Scale(domain=labels, range=[RUN_PALETTE[i % len(RUN_PALETTE)]
                                                                       for i in range(len(labels))]),
                      legend=alt.Legend(title="configuration (band: 95% CI)", orient="bottom", labelLimit=400,
                                        titleLimit=400, columns=1))
    base = alt.Chart(_data(rows)).encode(x=alt.X(f"{x}:Q", title=x_title, axis=alt.Axis(tickCount=8)), color=color)
    band = base.mark_area(opacity=0.22).encode(
        y=alt.Y("ci_low:Q", title=SPEEDUP_TITLE, scale=alt.Scale(zero=False)), y2=alt.Y2("ci_high:Q"))
    line = base.mark_line(strokeWidth=2).encode(
        y=alt.Y("score:Q"),
        tooltip=tooltips("label:N", alt.Tooltip(f"{x}:Q", format=x_format), alt.Tooltip("score:Q", format=".3f"),
                 alt.Tooltip("ci_low:Q", format=".3f", title="95% CI low"),
                 alt.Tooltip("ci_high:Q", format=".3f", title="95% CI high")))
    return alt.layer(band, line).properties(width=380, height=280, title=title)


def bands(queries: Sequence[dict[str, Any]], money: Sequence[dict[str, Any]]) -> alt.TopLevelMixin:
    labels = sorted({r["label"] for r in queries} | {r["label"] for r in money})
    left = _panel(queries, "queries", "configurations vs queries", "LLM queries per task", labels)
    if not money:
        return left
    right = _panel(money, "usd", "configurations vs cost", "cost per task (USD)", labels, "$.2f")
    return alt.hconcat(left, right).resolve_scale(y="shared")
