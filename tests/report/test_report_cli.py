"""`pikeh report` end to end on hand-made runs: every output format, filters, errors, the terminal table."""

from __future__ import annotations

import csv
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import altair as alt
import duckdb
import jsonschema
import pytest

from .handmade import HandRun, scenario_a, write_baseline_set

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("inputs")
    runs = root / "runs"
    scenario_a(runs)
    second = HandRun(runs, "B", strategy="best-of-n").task(1, "1_Alpha").task(2, "2_Beta")
    second.baseline(1, 10.0).baseline(2, 4.0).attempt(1, 1, "correct", 4.0).attempt(2, 1, "incorrect")
    second.write()
    return runs, write_baseline_set(root / "baselines" / "h100")


def test_report_writes_every_format(cli, inputs, tmp_path):
    runs, baselines = inputs
    out = tmp_path / "report"
    result = cli("report", "--input", str(runs), "--input", str(baselines.parent), "--output", str(out))
    assert result.exit_code == 0, result.output
    # The terminal table: both runs with their headline numbers.
    rows = {line.split()[0]: line.split() for line in result.output.splitlines() if line.startswith(" ") and line.split()}
    assert rows["A"][1:6] == ["4", "4/4+1", "2.000x", "2.000x", "3"]  # tasks, queries (+ past the budget), score, raw, solved
    assert rows["A"][-1] == "2/7"  # failed lineages the EFA repaired
    assert rows["B"][1:4] == ["2", "1/4", "1.581x"]
    for stem in ("suite_score", "final_scores", "fast_p", "outcomes", "per_task"):
        png = (out / f"{stem}.png").read_bytes()
        assert png.startswith(PNG_MAGIC) and len(png) > 5_000, stem
        root = ET.fromstring((out / f"{stem}.svg").read_text())
        assert root.tag.endswith("svg") and len(list(root.iter())) > 20, stem
    # PIKE's per-task table: one column per run and per reference, and the geomean row equals the score.
    with (out / "per_task.csv").open() as handle:
        table = list(csv.reader(handle))
    assert table[0] == ["task", "name", "A", "B", "A compile", "h100-set compile-max-autotune"]
    assert table[-1][0] == "geomean" and float(table[-1][2]) == pytest.approx(2.0)
    assert float(table[-1][3]) == pytest.approx(2.5 ** 0.5)  # B: hand/1 10/4 = 2.5, hand/2 nothing -> 1
    tex = (out / "per_task.tex").read_text()
    assert r"\begin{tabular}{lrrrr}" in tex and r"Geomean & 2.00 & 1.58 & 1.26 & \textbf{2.24} \\" in tex
    # The saved database recomputes from its tables.
    con = duckdb.connect(str(out / "report.duckdb"), read_only=True)
    assert con.execute("SELECT max(score) FROM score_vs_queries WHERE run = 'A'").fetchone()[0] == pytest.approx(2.0)
    html = (out / "index.html").read_text()
    # Nothing is loaded from elsewhere (test_html_chromium.py renders it with the network blocked).
    markup = re.sub(r"<script\b[^>]*>.*?</script>", "", html, flags=re.S)
    assert not re.search(r"<(script|link|img|iframe)\b[^>]*\b(src|href)=\"(?!data:)", markup)
    # Without JavaScript the figures are still there (PNG data inside the page), and the configuration
    # block and the not-a-GPU-benchmark banner say what was measured.
    assert markup.count('<img src="data:image/png;base64,') >= 4 and "<noscript>" in markup
    assert 'id="configuration"' in markup and 'id="not-a-benchmark"' in markup
    assert "<td>4/4 +1 past the budget</td>" in markup  # run A's q5 is past its budget of 4: shown, not scored
    # Four page scripts and one attempt list per (run, task); no data string closes its element early.
    assert html.count("<script") == html.count("</script>") == 4 + 7
    assert "Content-Security-Policy" in html and "default-src 'none'" in html
    assert 'id="task-hand-1"' in html and "class ModelNew" in html
    # The reporter skips altair's schema validation on every report (figures.spec): every figure it
    # drew here, and the trajectory chart, must still be valid Vega-Lite.
    specs = {**_page_json(html, "figure-specs"), "trajectory": _page_json(html, "trajectory-spec")}
    assert {"suite_score", "final_scores", "fast_p", "outcomes", "per_task", "seed_bands"} <= set(specs)
    for spec in specs.values():
        alt.Root.validate(spec)  # raises on an invalid spec
    with pytest.raises(jsonschema.ValidationError):
        alt.Root.validate({**specs["fast_p"], "mark": {"type": "no-such-mark"}})


def _page_json(html: str, element_id: str) -> dict:
    """The JSON data block of the report page with this id."""
    found = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>', html, re.S)
    assert found, element_id
    return json.loads(found.group(1))


def test_runs_filter_formats_and_json(cli, inputs, tmp_path):
    runs, _ = inputs
    out = tmp_path / "only-b"
    result = cli("report", "--input", str(runs), "--output", str(out), "--runs", "B*", "--format", "csv", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output[result.output.index("["):])
    assert [r["run"] for r in summary] == ["B"] and summary[0]["score"] == pytest.approx(2.5 ** 0.5)
    written = {p.name for p in out.iterdir()}
    assert "summary.csv" in written and "report.duckdb" in written
    assert not any(name.endswith((".png", ".svg", ".html", ".tex")) for name in written)


def test_budget_option_truncates(cli, inputs, tmp_path):
    runs, _ = inputs
    result = cli("report", "--input", str(runs), "--output", str(tmp_path / "r"), "--runs", "A",
                 "--format", "csv", "--budget", "2", "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output[result.output.index("["):])
    assert summary[0]["score"] == pytest.approx(2 ** 0.25) and summary[0]["budget"] == 2


@pytest.mark.parametrize("args, message", [
    (["--input", "/nonexistent/runs"], "does not exist"),
    (["--input", "{empty}"], "holds no run directory"),
    (["--input", "{runs}", "--runs", "nope"], "no run matches nope"),
    (["--input", "{runs}", "--price-as", "acme:unknown-model"], "no price for it"),
])
def test_user_errors_name_the_fix(cli, inputs, tmp_path, args, message):
    runs, _ = inputs
    (tmp_path / "empty").mkdir()
    args = [a.format(empty=tmp_path / "empty", runs=runs) for a in args]
    result = cli("report", *args, "--output", str(tmp_path / "out"), "--format", "csv")
    assert result.exit_code == 1, result.output
    assert message in result.output


def test_bad_format_and_help(cli, inputs, tmp_path):
    runs, _ = inputs
    result = cli("report", "--input", str(runs), "--format", "pdf")
    assert result.exit_code == 2 and "choose among html,png,svg,csv,tex" in result.output
    help_text = cli("report", "--help").output
    for option in ("--input", "--runs", "--format", "--retime", "--price-as", "--money-max", "--budget"):
        assert option in help_text


def test_prices_file_recosts_tokens(cli, inputs, tmp_path):
    """A user price file replaces the shipped entry: twice Gemini 2.5 Pro's prices, twice the spend."""
    runs, _ = inputs
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."gemini-2.5-pro"]\ninput = 2.5\noutput = 20.0\n')
    result = cli("report", "--input", str(runs), "--output", str(tmp_path / "r"), "--runs", "A", "--format", "csv",
                 "--prices", str(prices), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output[result.output.index("["):])[0]["usd_per_task"] == pytest.approx(2 * 0.54)  # q5 past the budget paid too


def test_mismatched_hardware_is_warned_on_the_terminal_and_in_the_page(cli, tmp_path):
    run = HandRun(tmp_path / "runs", "moved").task(1, "1_One")
    run.baseline(1, 6.0, device_name="NVIDIA H100 80GB HBM3")
    run.attempt(1, 1, "correct", 3.0, device_name="NVIDIA H200")
    run.write()
    out = tmp_path / "report"
    result = cli("report", "--input", str(tmp_path / "runs"), "--output", str(out), "--format", "html")
    assert result.exit_code == 0, result.output
    assert "warning: run moved: 1 correct attempt(s) were timed on other hardware" in result.output
    page = (out / "index.html").read_text()
    assert 'class="warnings"' in page and "run moved: 1 correct attempt(s)" in page


def test_a_run_that_cost_nothing_has_no_money_marker_and_says_what_was_measured(cli, tmp_path):
    run = HandRun(tmp_path / "runs", "free", llm="offline:mutate").task(1, "1_One")
    run.baseline(1, 6.0)
    run.attempt(1, 1, "correct", 3.0, provider="offline", model="mutate", cost_usd=0.0, cost_source="free")
    run.write()
    out = tmp_path / "report"
    result = cli("report", "--input", str(tmp_path / "runs"), "--output", str(out), "--format", "html")
    assert result.exit_code == 0, result.output
    page = (out / "index.html").read_text()
    row = page[page.index("<td class=\"l\">free</td>"):]
    row = row[:row.index("</tr>")]
    assert "cost unknown" not in row  # the cost is known: nothing
    assert " at $" not in row and "$0.00" not in row  # no money marker, no "$0.00 per task"
    banner = page[page.index('id="not-a-benchmark"'):]
    assert "timed on a CPU" in banner and "an offline stand-in wrote the programs" in banner
    block = page[page.index('id="configuration"'):page.index('id="figures"')]
    assert "offline:mutate" in block and "pike-b" in block and "no GPU" in block


def test_the_documented_example_summary_has_the_columns_report_writes(cli, inputs, tmp_path):
    """docs/examples/report/summary.csv (docs/report.md's example) shows the columns of today's summary.csv."""
    runs, _ = inputs
    out = tmp_path / "r"
    result = cli("report", "--input", str(runs), "--output", str(out), "--format", "csv")
    assert result.exit_code == 0, result.output
    example = Path(__file__).resolve().parents[2] / "docs" / "examples" / "report" / "summary.csv"
    with (out / "summary.csv").open() as written, example.open() as documented:
        assert next(csv.reader(documented)) == next(csv.reader(written))
