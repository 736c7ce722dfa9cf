"""Configurations (runs that differ only in seed) grouped from hand-made run stores, their bootstrap
intervals and the paired comparison, read back from the tables seed_stats writes into report.duckdb."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from pikeh_duckdb import seed_stats
from pikeh_duckdb.metrics import rows

from pike_harness.errors import UserError

from .handmade import HandRun
from .test_metrics import database

# Per seed, per task: best runtime against a 10 ms baseline (speedups 2, 2.5, 4 on task 1; 1.25, 2, 5 on task 2).
BEST = {0: (5.0, 8.0), 1: (4.0, 5.0), 2: (2.5, 2.0)}


def _seed_runs(root: Path, name: str, seeds: dict[int, tuple[float, float]], **run: object) -> list[Path]:
    dirs = []
    for seed, (one, two) in seeds.items():
        hand = HandRun(root, f"{name}_s{seed}", seed=seed, **run).task(1, "1_One").task(2, "2_Two")
        hand.baseline(1, 10.0).baseline(2, 10.0)
        dirs.append(hand.attempt(1, 1, "correct", one).attempt(2, 1, "correct", two).write())
    return dirs


def test_runs_group_by_configuration_with_intervals(tmp_path):
    dirs = _seed_runs(tmp_path, "pikeb", BEST) + _seed_runs(tmp_path, "other", {0: (10.0, 10.0)}, llm="openai:gpt-5")
    con = database(dirs)
    result = seed_stats.analyse(con, replicates=400)
    configs = {c["label"]: c for c in rows(con, "FROM config_scores")}
    assert set(configs) == {"pikeb", "other"}  # seeds grouped by their configuration; labels without _s<seed>
    pikeb = configs["pikeb"]
    assert pikeb["runs"] == ["pikeb_s0", "pikeb_s1", "pikeb_s2"] and pikeb["seeds"] == [0, 1, 2]
    logs = [math.log(10 / ms) for pair in BEST.values() for ms in pair]
    assert pikeb["score"] == pytest.approx(math.exp(sum(logs) / 6))  # geomean over tasks and seeds
    assert pikeb["ci_low"] < pikeb["score"] < pikeb["ci_high"]
    assert pikeb["seed_scores"] == pytest.approx([math.sqrt(2 * 1.25), math.sqrt(2.5 * 2), math.sqrt(4 * 5)])
    # The band lies within the extremes a resample can reach (every cell at task 1's or task 2's worst/best).
    assert pikeb["ci_low"] >= 1.25 - 1e-9 and pikeb["ci_high"] <= 5 + 1e-9
    curve = rows(con, "FROM config_score_vs_queries WHERE label = 'pikeb' ORDER BY queries")
    assert [r["queries"] for r in curve] == [1] and curve[0]["score"] == pytest.approx(pikeb["score"])
    # Costs are known (Gemini prices for every call, $0.15 each): the money curve and the money-budget score
    # have bands too; by $0.20 per task every seed has spent its one query per task.
    money = rows(con, "FROM config_score_vs_money WHERE label = 'pikeb' ORDER BY usd")
    assert [round(r["usd"], 2) for r in money] == [0.2] and money[0]["score"] == pytest.approx(pikeb["score"])
    assert money[0]["ci_low"] < money[0]["score"] < money[0]["ci_high"]
    assert pikeb["money_score"] == pytest.approx(pikeb["score"]) and pikeb["money_low"] < pikeb["money_high"]
    # Exactly two configurations: the paired comparison is made without being asked.
    (pair,) = result["comparison"]
    assert (pair["a"], pair["b"]) == ("other", "pikeb") and pair["n_tasks"] == 2
    assert pair["ratio"] == pytest.approx(1 / pikeb["score"])
    assert (pair["favour_a"], pair["favour_b"], pair["ties"]) == (0, 2, 0)
    assert pair["ratio_high"] < 1  # every seed of pikeb beats `other` on both tasks


def test_compare_names_and_counts(tmp_path):
    dirs = (_seed_runs(tmp_path, "a", {0: (5.0, 10.0), 1: (5.0, 10.0)})
            + _seed_runs(tmp_path, "b", {0: (10.0, 5.0)}, llm="openai:gpt-5")
            + _seed_runs(tmp_path, "c", {0: (10.0, 10.0)}, llm="openai:gpt-4o"))
    con = database(dirs)
    assert seed_stats.analyse(con, replicates=100)["comparison"] == []  # three configurations: name two
    (pair,) = seed_stats.analyse(con, ["a_s*", "c"], replicates=200)["comparison"]
    assert (pair["a"], pair["b"], pair["favour_a"], pair["favour_b"], pair["ties"]) == ("a", "c", 1, 0, 1)
    assert pair["ratio"] == pytest.approx(math.sqrt(2))
    (pair,) = seed_stats.analyse(con, ["a", "b"], replicates=200)["comparison"]
    assert (pair["favour_a"], pair["favour_b"], pair["ties"]) == (1, 1, 0) and pair["ratio"] == pytest.approx(1.0)
    assert pair["ratio_low"] < 1 < pair["ratio_high"]
    for names, message in ((["a", "zzz"], "matches no configuration"), (["a_s0", "a_s1"], "same configuration"),
                           (["*", "a"], "matches 3 configurations")):
        with pytest.raises(UserError, match=message):
            seed_stats.analyse(con, names, replicates=10)


def test_report_compare_option_on_the_command_line(cli, tmp_path):
    runs = tmp_path / "runs"
    _seed_runs(runs, "a", {0: (5.0, 10.0), 1: (5.0, 10.0)})
    _seed_runs(runs, "b", {0: (10.0, 5.0)}, llm="openai:gpt-5")
    _seed_runs(runs, "c", {0: (10.0, 10.0)}, llm="openai:gpt-4o")
    out = tmp_path / "report"
    result = cli("report", "--input", str(runs), "--output", str(out), "--format", "csv", "--compare", "a", "c_s0")
    assert result.exit_code == 0, result.output
    assert "a vs c: score ratio 1.414x" in result.output and "tasks favouring a: 1, c: 0, ties: 1" in result.output
    assert (out / "config_comparison.csv").read_text().startswith("a,b,a_key")
    bad = cli("report", "--input", str(runs), "--output", str(out), "--format", "csv", "--compare", "a", "nope")
    assert bad.exit_code == 1 and "'nope' matches no configuration" in bad.output and "Traceback" not in bad.output


def test_bands_render_in_a_browser(tmp_path):
    import re

    from pikeh_duckdb.reporter import build_report

    from pike_harness.contracts.reporting import ReportOptions, ReportServices

    from .test_html_chromium import browse, chromium

    chromium()  # skips without Chromium
    runs = tmp_path / "runs"
    _seed_runs(runs, "pikeb", BEST)
    build_report(ReportOptions(inputs=[runs], output=tmp_path / "report", formats=("html",),
                               services=ReportServices(progress=lambda _: None)))
    dom = browse(tmp_path / "report" / "index.html", tmp_path / "profile", "--dump-dom").stdout
    assert 'data-render-error="' not in dom
    assert re.search(r'id="fig-seed_bands"[^>]*>\s*<svg[^>]*class="marks"', dom)  # the band figure drew
    assert "Configurations: seeds and 95% intervals" in dom and "pikeb_s0, pikeb_s1, pikeb_s2" in dom
