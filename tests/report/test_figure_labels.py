"""The figures' axes and subtitles describe what is drawn: fast_p's symlog axis is labelled between 0 and
20, the final-score subtitle names the dotted money tick only when one is drawn, and the outcome bars'
order is a Vega expression holding the categories as a JSON literal."""

from __future__ import annotations

import json

from pikeh_duckdb import figures


def _summary(money_score: float | None, usd: float | None, unknown: int = 0) -> list[dict]:
    return [{"run": "r", "score": 2.0, "money_score": money_score, "usd_per_task": usd, "money_marker": 1.0,
             "unknown_cost_calls": unknown}]


def test_the_symlog_fast_p_axis_has_labels_between_0_and_20():
    rows = [{"run": "r", "p": p, "fast_p": 1.0 / (1 + p)} for p in (0, 0.5, 1, 3, 10, 40, 257.8)]
    axis = figures.fast_p(rows, ["r"]).to_dict()["encoding"]["x"]["axis"]
    assert [v for v in axis["values"] if 0 < v < 20] == [0.5, 1, 2, 5, 10]
    assert max(axis["values"]) <= 257.8


def test_a_narrow_fast_p_axis_keeps_the_default_labels():
    rows = [{"run": "r", "p": p, "fast_p": 0.5} for p in (0, 1, 2)]
    assert "values" not in figures.fast_p(rows, ["r"]).to_dict()["encoding"]["x"].get("axis", {})


def test_the_final_score_subtitle_mentions_only_ticks_that_are_drawn():
    def subtitle(summary: list[dict]) -> str:
        return figures.final_scores(summary, [], ["r"]).to_dict()["title"]["subtitle"]

    assert subtitle(_summary(None, None)) == "bars: full query budget"  # an offline run: no money tick
    assert subtitle(_summary(1.5, 0.4, unknown=2)) == "bars: full query budget"  # cost unknown: no tick
    assert subtitle(_summary(1.5, 0.4)) == "bars: full query budget; dotted tick: money budget"


def test_the_outcome_order_is_a_javascript_literal_of_the_categories():
    """The bar order is a Vega expression: the category list in it is JSON, whatever a category holds."""
    odd = ["it's", 'say "hi"', "back\\slash", "\U0001f600", "</script>"]
    rows = [{"run": "r", "category": c, "n": 1} for c in ["correct", *odd]]
    chart = figures.outcomes(rows, [{"run": "r", "failed": 1, "repaired": 0}]).to_dict()
    [calculate] = [t["calculate"] for t in chart["vconcat"][0]["transform"] if "calculate" in t]
    assert calculate.startswith("indexof(") and calculate.endswith(", datum.category)")
    assert json.loads(calculate[len("indexof("):-len(", datum.category)")]) == ["correct", *sorted(odd)]
