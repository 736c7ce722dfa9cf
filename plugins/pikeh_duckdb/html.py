"""The self-contained HTML report: one file that renders with no network.

Vega, Vega-Lite and vega-embed are inlined from vl-convert's bundle (no CDN), chart specs and per-task
data travel as JSON inside the page, and a Content-Security-Policy forbids every fetch, so a report
that renders in a test renders on an air-gapped laptop. Per-task trajectories are drawn only when a
reader opens the task, which keeps a 30-task, 300-query report quick to open.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path
from typing import Any

TEMPLATE = "report.html.j2"
HTML_FILE = "index.html"

NOTES = [
    "Speedup of a task at budget b: eager baseline runtime / runtime of the fastest correct attempt among the "
    "first b counted LLM queries of the task (brainstorming and other uncounted queries never count; queries past "
    "the budget are cut off). The eager baseline is the run's own timing of the reference on the same evaluator.",
    "Clamped speedup (PIKE): max(1, speedup), and 1.0 when nothing is correct. Raw: the ratio itself; the raw "
    "suite score counts tasks with no correct attempt as 1.0, so it differs from the clamped one only by the clamp.",
    "Suite score: geometric mean of task speedups over the tasks that have a correct eager baseline.",
    "Cost per task ($ / task, spend): every LLM call's prompt and output tokens at the price table's rates (the "
    "recorded cost when the table has no price, or when the service reported the cost), brainstorming and queries "
    "past the budget included: what was paid, as the run's own table shows it. The money curve counts only the "
    "calls within the budget, accumulated in query order; an attempt is within a money budget when the spend up "
    "to its query fits.",
    "fast_p: fraction of tasks (with a baseline) whose best attempt at the full budget is correct and more than "
    "p times faster than eager.",
    "EFA repair: a lineage starts at a query that is not a fix and follows fix queries through their parent. It "
    "failed when its first attempt was an error, incorrect or rejected (an LLM error leaves nothing to fix); it "
    "was repaired when one of its fix attempts within the budget is correct.",
    "Reference lines: other baseline modes (torch.compile, TensorRT, imported solution sets) over the eager "
    "baseline of the same source, clamped like the runs.",
    "Re-timed finalists: each task's best solution and its eager reference evaluated alternately (B, C, B, C, ...) "
    "on one evaluator; the speedup is the geometric mean of the paired ratios with a Student-t 95% interval.",
]


COST_NOTE = 3  # the note on cost per task: notes on abandoned queries follow it


def _json_for_script(value: Any) -> str:
    """JSON that is safe inside <script>: no '</script>' or '<!--' can close or confuse the element."""
    return json.dumps(value, separators=(",", ":"), default=str).replace("<", "\\u003c")


def _fmt(value: Any, suffix: str = "x") -> str:
    if value is None:
        return "–"
    try:
        return f"{float(value):.2f}{suffix}"
    except (TypeError, ValueError):
        return str(value)


def _pct(value: Any) -> str:
    return "–" if value is None else f"{float(value) * 100:.0f}%"


def _money(value: Any) -> str:
    return "–" if value is None else f"${float(value):.2f}"


def _ms(value: Any) -> str:
    return "–" if value is None else f"{float(value):.4g} ms"


def _anchor(text: Any) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", str(text))


@functools.cache
def vega_bundle() -> str:
    """vega + vega-lite + vega-embed as one inline script (about 0.9 MB), from vl-convert, offline.

    Bundling takes seconds, so the result is kept per vl-convert version in the user's cache folder.
    """
    import vl_convert as vlc

    version = getattr(vlc, "__version__", None) or _distribution_version("vl-convert-python")
    cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    cached = cache_home / "pikeh" / f"vega-bundle-{version}.js"
    try:
        return cached.read_text(encoding="utf-8")
    except OSError:
        pass
    # vl-convert's stub makes ``snippet`` required; at run time it is optional (None: the default snippet).
    bundle = vlc.javascript_bundle().replace("</script", "<\\/script")  # type: ignore[call-arg]
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(bundle, encoding="utf-8")
        tmp.replace(cached)
    except OSError:
        pass  # a read-only home only costs the time
    return bundle


def _distribution_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


def render(*, title: str, generated: str, version: str, inputs: Sequence[str], summary: Sequence[dict[str, Any]],
           references: Sequence[dict[str, Any]], configs: Sequence[dict[str, Any]],
           comparison: Sequence[dict[str, Any]],
           figures: Sequence[tuple[str, dict[str, Any], str]], matrix_header: Sequence[str],
           matrix_body: Sequence[Sequence[Any]], matrix_notes: Sequence[Sequence[str | None]],
           tasks: Sequence[dict[str, Any]],
           trajectory_spec: dict[str, Any], has_retime: bool, warnings: Sequence[str] = (),
           configuration: Sequence[dict[str, Any]] = (), banner: Sequence[str] = (),
           static_figures: dict[str, str] | None = None, sections: Sequence[dict[str, Any]] = (),
           extra_notes: Sequence[str] = ()) -> str:
    """The report page. ``figures`` are (name, Vega-Lite spec, caption); ``tasks`` carry per-run details;
    ``configuration`` says what each run measured and ``banner`` why the numbers are not a GPU benchmark;
    ``static_figures``: figure name -> a data: URI of its PNG, shown when JavaScript is off; ``sections``:
    extra tables ({"id", "title", "note", "columns", "rows"}: speed of light, GPU clocks, profiles);
    ``extra_notes``: notes after the cost note (abandoned queries, where a run has some)."""
    import jinja2

    template_dir = files("pikeh_duckdb").joinpath("templates")
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(template_dir)), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.globals.update(fmt=_fmt, pct=_pct, money=_money, ms=_ms, anchor=_anchor)
    for task in tasks:
        for run in task["runs"]:
            run["attempts_json"] = _json_for_script(run.pop("attempts"))
    return env.get_template(TEMPLATE).render(
        title=title, generated=generated, version=version, inputs=list(inputs), runs=[r["run"] for r in summary],
        summary=summary, references=references, configs=configs, comparison=comparison,
        figures=[{"name": name, "caption": caption} for name, _, caption in figures],
        specs_json=_json_for_script({name: spec for name, spec, _ in figures}),
        matrix_header=matrix_header, matrix_body=matrix_body, matrix_notes=matrix_notes, tasks=tasks,
        trajectory_json=_json_for_script(trajectory_spec), vega_bundle=vega_bundle(), has_retime=has_retime,
        notes=NOTES[:COST_NOTE + 1] + list(extra_notes) + NOTES[COST_NOTE + 1:], warnings=list(warnings), configuration=list(configuration), banner=list(banner),
        static_figures=dict(static_figures or {}), sections=list(sections))


def write(path: Path, page: str) -> Path:
    path.write_text(page, encoding="utf-8")
    return path
