"""`pikeh demo` runs two seeds by default and its report shows the configuration's bootstrap band.

Fast: offline:mutate writes the programs; a fake evaluator times each program by its code, so seeds
(which write different programs) get different speedups and the band has a width to show.
"""

from __future__ import annotations

import hashlib
import json
import types
from pathlib import Path

import duckdb

from pike_harness.api import Demo, EvalResult, hookimpl
from pike_harness.testing import default_verdict, fake_evaluator_plugin, invoke


def _by_code(request) -> EvalResult:
    """The reference at 1 ms; a candidate at 0.2-1.2 ms, fixed by its code."""
    result = default_verdict(request)
    if result.category == "correct" and request.baseline_mode is None \
            and request.candidate_source != request.reference_source:
        spread = int(hashlib.sha256(request.candidate_source.encode()).hexdigest()[:6], 16) / 0xFFFFFF
        result.runtime_ms = 0.2 + spread
    return result


def test_demo_runs_two_seeds_and_its_report_shows_the_band(tmp_path: Path):
    demo = Demo(name="default", strategy="best-of-n", suite="smoke", tasks="1-3", llm="offline:mutate",
                evaluator="fake", reporter="duckdb", strategy_options={"parallel": 2, "max_fix_attempts": 0},
                query_budget=2, llm_concurrency=2)

    @hookimpl
    def register_demos(register):
        register(demo)

    plugins = {"my-demo": types.SimpleNamespace(register_demos=register_demos),
               "fake-evaluator": fake_evaluator_plugin(_by_code)}
    result = invoke("demo", "--device", "cpu", "--output-dir", str(tmp_path), plugins=plugins)
    assert result.exit_code == 0, result.output
    seeds = json.loads((tmp_path / "runs" / "demo" / "seeds.json").read_text())["seeds"]
    assert seeds == [0, 1]
    con = duckdb.connect(str(tmp_path / "report" / "report.duckdb"), read_only=True)
    (n_runs, low, score, high), = con.execute("SELECT n_runs, ci_low, score, ci_high FROM config_scores").fetchall()
    assert n_runs == 2 and low < score < high  # a band with a width, around the estimate
    band = con.execute("SELECT count(*), count(*) FILTER (ci_high > ci_low) FROM config_score_vs_queries").fetchone()
    assert band[0] == 2 and band[1] >= 1
    page = (tmp_path / "report" / "index.html").read_text()
    assert "fig-seed_bands" in page and "Configurations: seeds and 95% intervals" in page
    assert '"ci_low"' in page and '"mark": {"type": "area"' in page.replace('"mark":{"type":"area"', '"mark": {"type": "area"')
    assert (tmp_path / "report" / "seed_bands.png").exists()
