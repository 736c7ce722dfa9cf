"""The report's figures as altair charts, saved as PNG and SVG with vl-convert (offline, no browser).

The same Vega-Lite specs are embedded in the HTML report, so the pictures in a paper and the charts a
reader explores are one thing. Inputs are the rows of the metric views (lists of dicts); no figure
computes a metric itself.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import altair as alt

from .metrics import OUTCOME_CATEGORIES

CATEGORY_COLORS = {
    "correct": "#59a14f", "incorrect": "#edc948", "compile_error": "#e15759", "runtime_error": "#f28e2b",
    "timeout": "#b07aa1", "rejected": "#9c755f", "llm_error": "#bab0ac",
}
RUN_PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#eeca3b", "#ff9da6",
               "#9d755d", "#bab0ac"]
REFERENCE_COLOR = "#555555"
SPEEDUP_TITLE = "suite score (geomean speedup over eager)"


def _runs_scale(runs: Sequence[str]) -> alt.Scale:
    """One colour per run, the same in every figure."""
    colors = [RUN_PALETTE[i % len(RUN_PALETTE)] for i in range(len(runs))]
    return alt.Scale(domain=list(runs), range=colors)


def _legend() -> alt.Legend:
    return alt.Legend(title="run", orient="bottom", labelLimit=400, columns=1)


def tooltips(*fields: str | alt.Tooltip) -> list[alt.Tooltip]:
    """A tooltip list, shorthand strings (``"run:N"``) made ``alt.Tooltip`` here.

    Why: altair turns every shorthand string or plain dict of an ``encode`` into its channel class by
    hashing the whole Vega-Lite schema again (about 30 ms each), which was most of the time spent
    drawing a report's figures. Channel objects (``alt.Y("score:Q")``, ``alt.SizeValue(1)``) skip that,
    and give the same spec.
    """
    return [alt.Tooltip(f) if isinstance(f, str) else f for f in fields]


def _data(rows: Sequence[dict[str, Any]]) -> alt.Data:
    return alt.Data(values=[_plain(r) for r in rows])


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    """JSON-friendly values (DuckDB returns Decimals and lists)."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        if isinstance(value, bool | int | float | str) or value is None:
            out[key] = value
        elif isinstance(value, list | tuple):
            out[key] = [str(v) for v in value]
        else:
            try:
                out[key] = float(value)
            except (TypeError, ValueError):
                out[key] = str(value)
    return out


def _reference_layers(refs: Sequence[dict[str, Any]]) -> list[alt.Chart]:
    """Dashed horizontal lines for torch.compile and other baselines, and a thin one at eager (1.0)."""
    rows = [{"label": "eager (1.0x)", "score": 1.0, "dash": "eager"}]
    rows += [{"label": f"{r['label']} ({r['score']:.2f}x)", "score": r["score"], "dash": "reference"} for r in refs]
    base = alt.Chart(_data(rows))
    rule = base.mark_rule(color=REFERENCE_COLOR).encode(
        y=alt.Y("score:Q"),
        strokeDash=alt.StrokeDash("dash:N", scale=alt.Scale(domain=["eager", "reference"], range=[[1, 0], [6, 4]]),
                                  legend=None),
        size=alt.SizeValue(1), opacity=alt.OpacityValue(0.8),
        tooltip=[alt.Tooltip("label:N", title="reference")])
    text = base.mark_text(align="left", dx=4, dy=-6, fontSize=10, color=REFERENCE_COLOR).encode(
        y=alt.Y("score:Q"), x=alt.XValue(4), text=alt.Text("label:N"))
    return [rule, text]


def score_vs_budget(queries: Sequence[dict[str, Any]], money: Sequence[dict[str, Any]],
                    refs: Sequence[dict[str, Any]], runs: Sequence[str]) -> alt.TopLevelMixin:
    """PIKE's figure 1: suite score vs LLM queries per task, beside suite score vs dollars per task."""
    color = alt.Color("run:N", scale=_runs_scale(runs), legend=_legend())
    left = alt.Chart(_data(queries)).mark_line(strokeWidth=2).encode(
        x=alt.X("queries:Q", title="LLM queries per task", axis=alt.Axis(tickCount=8)),
        y=alt.Y("score:Q", title=SPEEDUP_TITLE, scale=alt.Scale(zero=False)),
        color=color,
        tooltip=tooltips("run:N", "queries:Q", alt.Tooltip("score:Q", format=".3f"),
                 alt.Tooltip("score_raw:Q", format=".3f"), "n_solved:Q", "n_tasks:Q"))
    left_panel = alt.layer(left, *_reference_layers(refs)).properties(
        width=380, height=280, title="suite score vs queries")
    known = [r for r in money if r.get("cost_known")]
    if not known:
        return left_panel
    right = alt.Chart(_data(known)).mark_line(strokeWidth=2).encode(
        x=alt.X("usd:Q", title="cost per task (USD)", axis=alt.Axis(tickCount=8)),
        y=alt.Y("score:Q", title=SPEEDUP_TITLE, scale=alt.Scale(zero=False)),
        color=color,
        tooltip=tooltips("run:N", alt.Tooltip("usd:Q", format="$.2f"), alt.Tooltip("score:Q", format=".3f"),
                 "n_solved:Q"))
    right_panel = alt.layer(right, *_reference_layers(refs)).properties(
        width=380, height=280, title="suite score vs cost")
    return alt.hconcat(left_panel, right_panel).resolve_scale(y="shared")


def final_scores(summary: Sequence[dict[str, Any]], refs: Sequence[dict[str, Any]],
                 runs: Sequence[str]) -> alt.TopLevelMixin:
    """PIKE's figure 2: final suite score per run and per baseline; a dotted tick at the money budget."""
    rows = []
    for r in summary:
        if r.get("score") is None:
            continue
        # No money marker for a run that cost nothing (offline stand-ins) or whose cost is unknown.
        paid = (r.get("unknown_cost_calls") or 0) == 0 and (r.get("usd_per_task") or 0) > 0
        marker = r.get("money_score") if paid else None
        rows.append({"label": r["run"], "run": r["run"], "kind": "run", "score": r["score"],
                     "money_score": marker, "money_budget": r.get("money_marker")})
    for ref in refs:
        rows.append({"label": ref["label"], "run": None, "kind": "reference", "score": ref["score"],
                     "money_score": None, "money_budget": None})
    order = [r["label"] for r in sorted(rows, key=lambda r: -r["score"])]
    domain = list(runs) + [r["label"] for r in rows if r["kind"] == "reference"]
    colors = [RUN_PALETTE[i % len(RUN_PALETTE)] for i in range(len(runs))] + \
        ["#9e9e9e"] * (len(domain) - len(runs))
    base = alt.Chart(_data(rows)).encode(x=alt.X("label:N", sort=order, title=None,
                                                 axis=alt.Axis(labelAngle=-30, labelLimit=260)))
    bars = base.mark_bar().encode(
        y=alt.Y("score:Q", title=SPEEDUP_TITLE),
        color=alt.Color("label:N", scale=alt.Scale(domain=domain, range=colors), legend=None),
        tooltip=tooltips("label:N", "kind:N", alt.Tooltip("score:Q", format=".3f"),
                 alt.Tooltip("money_score:Q", format=".3f", title="score at money budget"),
                 alt.Tooltip("money_budget:Q", format="$.2f", title="money budget per task")))
    labels = base.mark_text(dy=-6, fontSize=11).encode(y=alt.Y("score:Q"), text=alt.Text("score:Q", format=".2f"))
    ticks = base.transform_filter("datum.money_score != null").mark_tick(
        thickness=2, size=40, strokeDash=[2, 2], color="black").encode(y=alt.Y("money_score:Q"))
    eager = alt.Chart(_data([{"score": 1.0}])).mark_rule(color=REFERENCE_COLOR).encode(y=alt.Y("score:Q"))
    # The subtitle explains only what is drawn: no dotted tick when no run has a money score.
    subtitle = "bars: full query budget" + ("; dotted tick: money budget" if any(
        r["money_score"] is not None for r in rows) else "")
    return alt.layer(bars, labels, ticks, eager).properties(
        width=max(240, 60 * len(rows)), height=280, title=alt.Title("final suite score", subtitle=subtitle))


SYMLOG_TICKS = (0, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)


def fast_p(rows: Sequence[dict[str, Any]], runs: Sequence[str]) -> alt.TopLevelMixin:
    """KernelBench's fast_p: the fraction of tasks solved faster than p times eager, over p."""
    top = max((r["p"] for r in rows), default=0)
    wide = top > 20  # a few huge speedups: stretch the interesting part
    scale = alt.Scale(type="symlog") if wide else alt.Scale()
    # A symlog axis left to itself labels only 0 and 20, 40, ...: label 1-2-5 steps instead.
    axis = alt.Axis(values=[v for v in SYMLOG_TICKS if v <= top]) if wide else alt.Axis()
    return alt.Chart(_data(rows)).mark_line(interpolate="step-after", strokeWidth=2).encode(
        x=alt.X("p:Q", title="speedup threshold p" + (" (symlog scale)" if wide else ""), scale=scale, axis=axis),
        y=alt.Y("fast_p:Q", title="fast_p (fraction of tasks)", axis=alt.Axis(format="%"),
                scale=alt.Scale(domain=[0, 1])),
        color=alt.Color("run:N", scale=_runs_scale(runs), legend=_legend()),
        tooltip=tooltips("run:N", alt.Tooltip("p:Q", format=".2f"), alt.Tooltip("fast_p:Q", format=".1%")),
    ).properties(width=420, height=260, title="fast_p: correct and faster than p x eager")


def outcomes(outcome_rows: Sequence[dict[str, Any]], efa_rows: Sequence[dict[str, Any]]) -> alt.TopLevelMixin:
    """Attempt outcomes per run (share of attempts), and failed lineages the error-fixing agent repaired."""
    merged: dict[tuple[str, str], int] = {}
    for r in outcome_rows:
        merged[(r["run"], r["category"])] = merged.get((r["run"], r["category"]), 0) + int(r["n"])
    rows: list[dict[str, Any]] = [{"run": run, "category": cat, "n": n} for (run, cat), n in merged.items()]
    categories = [c for c in OUTCOME_CATEGORIES if any(r["category"] == c for r in rows)] or ["correct"]
    categories += sorted({r["category"] for r in rows} - set(categories))
    bar = alt.Chart(_data(rows)).mark_bar().encode(
        y=alt.Y("run:N", title=None, axis=alt.Axis(labelLimit=320)),
        x=alt.X("n:Q", stack="normalize", title="share of attempts", axis=alt.Axis(format="%")),
        color=alt.Color("category:N", scale=alt.Scale(domain=categories,
                                                      range=[CATEGORY_COLORS.get(c, "#888888") for c in categories]),
                        sort=categories, legend=alt.Legend(orient="right")),
        order=alt.Order("order:Q"),
        tooltip=tooltips("run:N", "category:N", "n:Q"),
    ).transform_calculate(order=f"indexof({json.dumps(categories)}, datum.category)").properties(
        width=420, height=alt.Step(22), title="attempt outcomes")
    efa = [{"run": r["run"], "measure": m, "n": int(r[k] or 0)} for r in efa_rows
           for m, k in (("failed lineages", "failed"), ("repaired by EFA", "repaired"))]
    repaired = alt.Chart(_data(efa)).mark_bar().encode(
        y=alt.Y("run:N", title=None, axis=alt.Axis(labelLimit=320)),
        yOffset=alt.YOffset("measure:N"),
        x=alt.X("n:Q", title="lineages"),
        color=alt.Color("measure:N", scale=alt.Scale(domain=["failed lineages", "repaired by EFA"],
                                                     range=["#e15759", "#59a14f"]), legend=alt.Legend(title=None)),
        tooltip=tooltips("run:N", "measure:N", "n:Q"),
    ).properties(width=420, height=alt.Step(14), title="failures repaired by the error-fixing agent")
    return alt.vconcat(bar, repaired).resolve_scale(color="independent")


def per_task(rows: Sequence[dict[str, Any]], runs: Sequence[str]) -> alt.TopLevelMixin:
    """Every task's clamped speedup at the full budget, one dot per run (log scale): filled where it is a
    paired re-timed speedup (with its 95% interval as a line), hollow where it is the search-time one."""
    data = [r for r in rows if r.get("speedup") is not None]
    order = [r["name"] for r in sorted({r["name"]: r for r in data}.values(), key=lambda r: (r["task_id"] or 0))]
    base = alt.Chart(_data(data)).encode(
        y=alt.Y("name:N", sort=order, title=None),
        color=alt.Color("run:N", scale=_runs_scale(runs), legend=_legend()))
    dots = base.mark_point(size=60).encode(
        x=alt.X("speedup:Q", scale=alt.Scale(type="log"), title="speedup over eager (clamped, log scale)"),
        fill=alt.condition("datum.timing == 're-timed'", alt.Color("run:N", scale=_runs_scale(runs), legend=None),
                           alt.value("transparent")),
        tooltip=tooltips("run:N", "task:N", "name:N", "timing:N", alt.Tooltip("speedup:Q", format=".3f"),
                 alt.Tooltip("speedup_raw:Q", format=".3f"), alt.Tooltip("ci_low:Q", format=".3f"),
                 alt.Tooltip("ci_high:Q", format=".3f"), alt.Tooltip("baseline_ms:Q", format=".4f"),
                 alt.Tooltip("best_ms:Q", format=".4f"), "best_key:N", "paired_flagged:N"))
    intervals = base.transform_filter("datum.ci_low != null").mark_rule(strokeWidth=2).encode(
        x=alt.X("ci_low:Q"), x2=alt.X2("ci_high:Q"))
    one = alt.Chart(_data([{"x": 1.0}])).mark_rule(color=REFERENCE_COLOR).encode(x=alt.X("x:Q"))
    return alt.layer(one, intervals, dots).properties(
        width=420, height=alt.Step(16),
        title=alt.Title("per-task speedup", subtitle="filled: re-timed paired, line: its 95% CI; hollow: search-time"))


def retime(rows: Sequence[dict[str, Any]], runs: Sequence[str]) -> alt.TopLevelMixin:
    """Search-time speedups beside the paired re-timed ones with their 95% intervals."""
    data = [r for r in rows if r.get("speedup") is not None]
    base = alt.Chart(_data(data)).encode(
        y=alt.Y("label:N", title=None, axis=alt.Axis(labelLimit=360)),
        color=alt.Color("run:N", scale=_runs_scale(runs), legend=_legend()))
    bars = base.mark_rule(strokeWidth=2).encode(x=alt.X("ci_low:Q", scale=alt.Scale(type="log"),
                                                        title="speedup over eager (log scale)"), x2=alt.X2("ci_high:Q"))
    paired = base.mark_point(filled=True, size=60).encode(
        x=alt.X("speedup:Q"),
        tooltip=tooltips("run:N", "task:N", alt.Tooltip("speedup:Q", format=".3f", title="re-timed (paired)"),
                         alt.Tooltip("ci_low:Q", format=".3f"), alt.Tooltip("ci_high:Q", format=".3f"),
                         alt.Tooltip("search_speedup:Q", format=".3f", title="search-time"), "n_pairs:Q",
                         "stop:N", "flagged:N"))
    search = base.mark_point(shape="diamond", size=60, filled=False).encode(x=alt.X("search_speedup:Q"))
    return alt.layer(bars, paired, search).properties(
        width=420, height=alt.Step(18),
        title=alt.Title("re-timed final bests", subtitle="filled: paired speedup with 95% CI; hollow diamond: "
                                                          "search-time"))


def trajectory_spec() -> dict[str, Any]:
    """The per-task trajectory chart of the HTML report; the page fills in the ``attempts`` data set."""
    base = alt.Chart(alt.Data(name="attempts"))
    x = alt.X("idx:Q", title="query", scale=alt.Scale(zero=False, nice=False, padding=8))
    correct = base.transform_filter("datum.category == 'correct'").mark_point(filled=True, size=40).encode(
        x=x,
        y=alt.Y("speedup:Q", scale=alt.Scale(type="log"), title="speedup (log)"),
        color=alt.Color("role:N", legend=alt.Legend(orient="top", title=None)),
        tooltip=tooltips("idx:Q", "key:N", "role:N", alt.Tooltip("speedup:Q", format=".3f"),
                 alt.Tooltip("runtime_ms:Q", format=".4f")))
    best = base.transform_filter("datum.best_speedup != null").mark_line(
        interpolate="step-after", color="black", strokeWidth=1.5).encode(x=x, y=alt.Y("best_speedup:Q"))
    top = alt.layer(best, correct).properties(width=520, height=170)
    categories = list(OUTCOME_CATEGORIES)
    strip = base.mark_tick(thickness=3, size=20).encode(
        x=x,
        color=alt.Color("category:N", scale=alt.Scale(domain=categories,
                                                      range=[CATEGORY_COLORS[c] for c in categories]),
                        legend=alt.Legend(orient="bottom", title=None, columns=4)),
        tooltip=tooltips("idx:Q", "key:N", "role:N", "category:N", "reason:N"),
    ).properties(width=520, height=24)
    return spec(alt.vconcat(top, strip).resolve_scale(x="shared", color="independent"))


def spec(chart: alt.TopLevelMixin) -> dict[str, Any]:
    """The chart's Vega-Lite spec, without altair's JSON-schema validation.

    Validation is most of the time altair spends on a spec (seconds a report on a small machine), and
    it checks only the structure this module writes, which is fixed: every figure is validated once in
    the tests (tests/report/test_report_cli.py) instead of on every report.
    """
    return chart.to_dict(validate=False)


def save(vega_lite: dict[str, Any], stem: Path, formats: Sequence[str]) -> list[Path]:
    """Write ``stem.png`` / ``stem.svg`` (as requested) from a spec with vl-convert; returns the files written."""
    import vl_convert as vlc

    written = []
    if "svg" in formats:
        path = stem.with_suffix(".svg")
        path.write_text(vlc.vegalite_to_svg(vega_lite), encoding="utf-8")
        written.append(path)
    if "png" in formats:
        path = stem.with_suffix(".png")
        path.write_bytes(vlc.vegalite_to_png(vega_lite, scale=2))
        written.append(path)
    return written
