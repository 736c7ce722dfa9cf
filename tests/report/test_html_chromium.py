"""The HTML report rendered by a real browser with no network: headless Chromium (Debian's package).

The page is opened from disk with every host name unresolvable and the page's own Content-Security-Policy
forbidding fetches, so a chart that renders here renders offline. Two checks: the DOM after the scripts
ran (every figure embedded, a task's trajectory drawn on opening), and a screenshot whose pixels carry
the charts' colours, with a control screenshot (JavaScript off) in which they are absent.
Install Chromium with .ci/install-chromium.sh; without it these tests skip.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from pikeh_duckdb.reporter import build_report

from pike_harness.contracts.reporting import ReportOptions, ReportServices

from .handmade import scenario_a, write_baseline_set
from .pngread import count_near

RUN_BLUE = (0x4C, 0x78, 0xA8)  # the first run's colour in every figure
EAGER_GREY = (0x55, 0x55, 0x55)


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("Chromium is not installed: run .ci/install-chromium.sh (Debian's chromium package)")


def browse(page: Path, profile: Path, *args: str, fragment: str = "") -> subprocess.CompletedProcess:
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--no-first-run", "--no-default-browser-check", f"--user-data-dir={profile}",
               "--host-resolver-rules=MAP * ~NOTFOUND",  # no host name resolves: the page is on its own
               "--virtual-time-budget=15000", *args, page.resolve().as_uri() + fragment]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("html")
    run = scenario_a(root / "runs")
    baselines = write_baseline_set(root / "h100")
    build_report(ReportOptions(inputs=[run, baselines], output=root / "report", formats=("html",),
                               services=ReportServices(progress=lambda _: None)))
    return root / "report" / "index.html"


def test_charts_and_trajectory_render_offline(page, tmp_path):
    done = browse(page, tmp_path / "profile", "--dump-dom", fragment="#task-hand-1")
    dom = done.stdout
    assert done.returncode == 0 and dom, done.stderr[-2000:]
    assert 'data-render-error="' not in dom
    assert re.search(r'<body[^>]*data-rendered="5"', dom), "not every figure was embedded"
    # Five figures (suite score, final scores, fast_p, outcomes, per-task) drew SVG marks.
    for name in ("suite_score", "final_scores", "fast_p", "outcomes", "per_task"):
        assert re.search(rf'id="fig-{name}"[^>]*>\s*<svg[^>]*class="marks"', dom), name
    # Opening hand/1 (the #fragment) drew its trajectory; the other tasks stay closed and undrawn.
    opened = dom[dom.index('id="task-hand-1"'):dom.index('id="task-hand-2"')]
    assert 'class="trajectory vega-embed"' in opened and 'class="marks"' in opened
    assert "class ModelNew" in opened  # the best code is there to read
    assert "compile_error in q001" in opened  # and its failures (hand/1's first query did not compile)
    closed = dom[dom.index('id="task-hand-2"'):]
    assert 'data-drawn="1"' not in closed.split("</details>")[0]


@pytest.mark.slow
def test_screenshot_shows_the_charts(page, tmp_path):
    shot = tmp_path / "report.png"
    # Tall enough for the final-score chart below the summary tables ("What was measured" is filled now)
    done = browse(page, tmp_path / "profile", "--window-size=1200,2000", f"--screenshot={shot}")
    assert shot.exists(), done.stderr[-2000:]
    colors = count_near(shot, {"run": RUN_BLUE, "grey": EAGER_GREY})
    # The run's line and its bar in the final-score chart are drawn in the run's colour.
    assert colors["run"] > 3000, colors
    # Control: the same page without its inlined Vega bundle shows none of it (and fetches nothing instead).
    bare = tmp_path / "bare.html"
    bare.write_text(re.sub(r'<script id="vega-bundle">.*?</script>', "", page.read_text(), flags=re.S))
    control = tmp_path / "bare.png"
    browse(bare, tmp_path / "profile-bare", "--window-size=1200,2000", f"--screenshot={control}")
    assert count_near(control, {"run": RUN_BLUE})["run"] < 50, "the colour must come from the rendered charts"
