"""The ``duckdb`` reporter: runs and baseline sets -> DuckDB -> metrics (SQL) -> figures, tables, HTML.

Steps: find the run directories and ``pikeh baselines`` folders under the inputs, load them with the
host's one loader (``store_db.materialize``) into ``report.duckdb`` in the output folder, create the
metric views (metrics.py), optionally re-time the finalists, then write what ``--format`` asks for.
Nothing is written into a run directory, so a run that is still going can be reported at any time.
"""

from __future__ import annotations

import base64
import fnmatch
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pike_harness.api import (
    PairedSpec,
    ReportOptions,
    ReportServices,
    ReportSummary,
    UserError,
    printable,
    short_text,
)

from . import clock_flags, html, outlier_flags, profiles, seed_figures, seed_stats, sol, tables
from . import figures as fig
from . import retime as retiming
from .metrics import MetricParams, create_metrics, materialize_views, rows
from .metrics import json_object as _json
from .options import DuckDBConfig

# Queries abandoned at a stop, apart from the spend: per_task_long.csv's last columns, never in summary.csv.
ABANDONED_COLUMNS = ("abandoned_queries", "abandoned_usd_estimated", "abandoned_cost_unknown")

# Per-attempt fields of the HTML trajectory, sent as rows of values (columns once) to keep pages small.
TRAJECTORY_COLUMNS = ("idx", "key", "role", "category", "runtime_ms", "speedup", "best_speedup", "reason")

FIGURE_CAPTIONS = {
    "suite_score": "Suite score (geometric mean of clamped per-task speedups over PyTorch eager) against LLM "
                   "queries per task, and against dollars per task when costs are known. Dashed lines: reference "
                   "baselines (torch.compile, TensorRT, imported solution sets); solid grey: eager.",
    "final_scores": "Final suite score at the full query budget for each run and baseline; the dotted tick is the "
                    "score at the money budget.",
    "fast_p": "fast_p: share of tasks whose best attempt is correct and more than p times faster than eager.",
    "outcomes": "Attempt outcomes per run, and failed lineages repaired by the error-fixing agent.",
    "per_task": "Per-task clamped speedup at the full budget: the paired re-timed speedup where there is one, "
                "else the search-time one.",
    "sol": sol.CAPTION,
    "seed_bands": "Suite score per configuration (runs that differ only in their seed), averaged over its seeds, "
                  "with a 95% bootstrap band (tasks drawn with replacement, each with its seeds), against "
                  "LLM queries per task and, when costs are known, dollars per task.",
    "retime": "Final bests re-timed paired against their eager reference (alternating blocks), with 95% "
              "intervals, beside the search-time speedup.",
}


# -- inputs ----------------------------------------------------------------------------------------

def discover(inputs: Sequence[Path], wanted: Sequence[str] | None) -> tuple[list[Path], list[Path]]:
    """Run directories and baseline-set folders under the inputs, filtered by run name patterns."""
    from pike_harness.api import RUN_FILE, find_baseline_sets, find_runs

    run_dirs: dict[Path, None] = {}
    sets: dict[Path, None] = {}
    for path in inputs:
        path = Path(path)
        if not path.exists():
            raise UserError(f"--input {path} does not exist")
        found_runs = list(find_runs([path]))
        found_sets = find_baseline_sets([path])
        if not found_runs and not found_sets:
            raise UserError(f"--input {path} holds no run directory (a folder with {RUN_FILE}) and no baseline set "
                            "(a folder with baselines.jsonl); point it at a run, a folder of runs or "
                            "`pikeh baselines` output")
        run_dirs.update(dict.fromkeys(p.resolve() for p in found_runs))
        sets.update(dict.fromkeys(p.resolve() for p in found_sets))
    names: dict[str, Path] = {}
    for run_dir in run_dirs:
        name = _run_name(run_dir)
        if name in names:
            raise UserError(f"two inputs hold a run named {name!r} ({names[name]} and {run_dir}); "
                            "report them separately or rename one")
        names[name] = run_dir
    if wanted:
        missing = [w for w in wanted if not fnmatch.filter(names, w)]
        if missing:
            raise UserError(f"--runs: no run matches {', '.join(missing)} (runs found: {', '.join(sorted(names))})")
        keep = {n for w in wanted for n in fnmatch.filter(names, w)}
        return [names[n] for n in sorted(keep)], list(sets)
    return [names[n] for n in sorted(names)], list(sets)


def _run_name(run_dir: Path) -> str:
    try:
        return str(json.loads((run_dir / "run.json").read_text()).get("name") or run_dir.name)
    except (OSError, json.JSONDecodeError) as exc:
        raise UserError(f"{run_dir / 'run.json'} cannot be read: {exc}") from None


def price_rows(con: Any, price_as: str | None, price_files: Sequence[Path]) -> list[dict[str, Any]]:
    """The price of every (provider, model) in the calls, from the price table, for SQL costing.

    The lookup rules (``provider:model``, bare model, vendor prefix and date suffix stripped) live in
    pike_harness.host.pricing; SQL then applies the rates, tiers and cached-token discount per call.
    """
    from pike_harness.api import PriceTable

    table = PriceTable.load(price_files)

    def row(provider: str | None, model: str | None, price: Any, forced: bool) -> dict[str, Any]:
        long = price.long_context
        return {"provider": provider, "model": model, "forced": forced, "price_key": price.key,
                "input": price.rates.input, "output": price.rates.output, "cached_input": price.rates.cached_input,
                "long_above": price.long_context_above, "long_input": long.input if long else None,
                "long_output": long.output if long else None,
                "long_cached_input": long.cached_input if long else None}

    if price_as:
        provider, sep, model = price_as.partition(":")
        price = table.price(provider, model) if sep else None
        if price is None:
            raise UserError(f"--price-as {price_as!r}: no price for it (write PROVIDER:MODEL of a model in the "
                            "price table, or add one with --prices FILE)")
        return [row(provider, model, price, True)]
    out = []
    for provider, model in con.execute("SELECT DISTINCT provider, model FROM llm_calls "
                                       "WHERE provider IS NOT NULL AND model IS NOT NULL").fetchall():
        price = table.price(provider, model)
        if price is not None:
            out.append(row(provider, model, price, False))
    return out


# -- the report ------------------------------------------------------------------------------------

MANIFEST = "pikeh-report-files.txt"  # what the last report wrote here, so the next one removes exactly that


def build_report(options: ReportOptions, config: DuckDBConfig | None = None) -> ReportSummary:
    """The report ``options`` ask for, with this reporter's ``config`` (None: its defaults) and the host's
    services (``options.services``)."""
    import duckdb

    from pike_harness import __version__
    from pike_harness.api import materialize

    config = config or DuckDBConfig()
    services = options.services
    say: Callable[[str], None] = services.progress or (lambda m: print(f"pikeh report: {m}", file=sys.stderr))
    run_dirs, sets = discover(options.inputs, options.runs)
    output = Path(options.output)
    output.mkdir(parents=True, exist_ok=True)
    clear_earlier_report(output)
    db_path = output / "report.duckdb"
    tmp = db_path.with_suffix(".duckdb.tmp")
    tmp.unlink(missing_ok=True)
    con = duckdb.connect(str(tmp))
    try:
        materialize(run_dirs, con, baseline_dirs=sets)
        params = MetricParams(budget=config.budget, money_step=config.money_step or 0.20,
                              money_max=config.money_max or 25.0, money_budget=config.money_budget,
                              outlier_factor=config.outlier_factor, include_jit_trace=config.include_jit_trace)
        create_metrics(con, params, price_rows(con, config.price_as, [Path(p) for p in config.prices or ()]))
        _retimes(con, output, config, services, say)
        materialize_views(con)  # nothing the views read changes after the re-timings
        sol_table = sol.build(con, services.resolve_task, config.peaks or (), say) \
            if config.speed_of_light else []
        profiled = profiles.run_profiles(con, output, config.profile_best, services, say)
        data = {**collect(con), **seed_stats.analyse(con, config.compare)}
        data.update(sol=sol_table, clock_flags=clock_flags.flagged(con), profiles=profiled,
                    baseline_outliers=outlier_flags.flagged(con))
        for line in seed_stats.describe(data["configs"], data["comparison"]):
            say(line)
        for warning in report_warnings(data):
            say(f"warning: {warning}")
    finally:
        con.close()
    tmp.replace(db_path)
    files = [db_path, *write_outputs(data, output, options.formats, config.title, [str(p) for p in options.inputs],
                                     __version__)]
    (output / MANIFEST).write_text("".join(f"{f.relative_to(output)}\n" for f in files), encoding="utf-8")
    return ReportSummary(output=output, files=files, rows=data["summary"])


def clear_earlier_report(output: Path) -> None:
    """Delete the files an earlier report wrote into ``output`` (its manifest lists them), and only those.

    A reused folder must not mix two reports: a call that writes fewer formats would leave the old
    figures (and the page would embed a stale PNG). The user's other files stay, and so do the
    re-timings and profiles, which later reports reuse.
    """
    manifest = output / MANIFEST
    if not manifest.is_file():
        return
    root = output.resolve()
    for name in manifest.read_text(encoding="utf-8").splitlines():
        path = output / name.strip()
        if name.strip() and path.resolve().parent == root and path.is_file() and not path.is_symlink():
            path.unlink()
    manifest.unlink()


def report_warnings(data: dict[str, Any]) -> list[str]:
    """Every warning of the report, the same lines on the terminal and in the page."""
    return (outlier_flags.warnings(data.get("baseline_outliers") or []) + mismatch_warnings(data["summary"])
            + clock_flags.warnings(data.get("clock_flags") or []))


def mismatch_warnings(summary: Sequence[dict[str, Any]]) -> list[str]:
    """One line per run whose correct attempts were timed on other hardware than their baselines."""
    return [f"run {r['run']}: {r['mismatched_timings']} correct attempt(s) were timed on other hardware than "
            "their task's eager baseline, so their speedups compare two machines (view timing_mismatch in "
            "report.duckdb lists them; `pikeh report --retime` times final bests again, paired against their reference)"
            for r in summary if r.get("mismatched_timings")]


def _retimes(con: Any, output: Path, config: DuckDBConfig, services: ReportServices,
             say: Callable[[str], None]) -> None:
    """Re-time the finalists when asked; load earlier re-timings that still match the best code."""
    best = rows(con, "SELECT f.run, f.task, f.best_key, f.best_dir, f.best_sha256, r.path FROM task_final f "
                     "JOIN runs r USING (run) WHERE f.best_ms IS NOT NULL AND (f.baseline_ms IS NOT NULL "
                     "OR (f.run, f.task) IN (SELECT (run, task) FROM baseline_outliers)) "
                     "ORDER BY f.run, f.task")
    path = output / retiming.RETIME_FILE
    if config.retime:
        make_evaluator, resolve_task = services.make_evaluator, services.resolve_task
        if make_evaluator is None or resolve_task is None:
            raise UserError("--retime needs an evaluator and the task suites: run it through `pikeh report`")
        items = retiming.finalists(best, say)
        evaluator = make_evaluator()
        spec = PairedSpec(target_halfwidth=config.retime_halfwidth, max_seconds=config.retime_max_seconds)
        try:
            new_rows = retiming.retime(items, resolve_task=resolve_task, evaluator=evaluator, spec=spec,
                                       protocol=services.evaluation.get("protocol") or "robust", progress=say)
        finally:
            evaluator.close()
        retiming.save(path, new_rows)
    retiming.insert(con, retiming.load(path))


WHY_LIMIT = 300  # a final re-timing's ``why`` as shown: a run writes at most about 240 (final_timing.py)


def collect(con: Any) -> dict[str, Any]:
    """Everything the outputs need, read from the metric views."""
    data = _collect(con)
    for row in data["final"]:  # a foreign journal's ``why`` is not cut nor escaped; the HTML, CSV and table show it
        why = row.get("paired_why")
        row["paired_why"] = _short(printable(why), WHY_LIMIT) if isinstance(why, str) else why
    return data


def _collect(con: Any) -> dict[str, Any]:
    return {
        "summary": rows(con, "FROM run_summary"),
        "runs": rows(con, "FROM runs ORDER BY run"),
        "queries": rows(con, "FROM score_vs_queries ORDER BY run, queries"),
        "money": rows(con, "FROM score_vs_money ORDER BY run, usd"),
        "fast_p": rows(con, "FROM fast_p ORDER BY run, p"),
        "outcomes": rows(con, "FROM outcomes ORDER BY run, role, category"),
        "efa": rows(con, "FROM efa ORDER BY run"),
        "efa_by_category": rows(con, "FROM efa_by_category ORDER BY run, root_category"),
        "references": rows(con, "FROM reference_scores ORDER BY source, mode"),
        "reference_tasks": rows(con, "FROM reference_tasks ORDER BY source, mode, task"),
        "final": rows(con, "SELECT f.*, r.path FROM task_final f JOIN runs r USING (run) ORDER BY f.run, f.suite, "
                           "f.task_id"),
        "attempts": rows(con, "FROM attempt_detail ORDER BY run, task, idx NULLS FIRST, key"),
        "abandoned": rows(con, "FROM task_abandoned ORDER BY run, task"),
        "retime": rows(con, "SELECT run, task, name, speedup_raw AS speedup, ci_low, ci_high, n_pairs, effective_pairs, "
                            "paired_stop AS stop, "
                            "paired_flagged AS flagged, paired_source AS source, search_speedup_raw AS search_speedup, "
                            "run || ' ' || name AS label FROM task_final WHERE timing = 're-timed' "
                            "ORDER BY run, task_id"),
    }


def write_outputs(data: dict[str, Any], output: Path, formats: Sequence[str], title: str | None,
                  inputs: Sequence[str], version: str) -> list[Path]:
    runs = [r["run"] for r in data["summary"]]
    written: list[Path] = []
    header, body = tables.per_task_matrix(data["final"], data["reference_tasks"], runs, data["references"],
                                          data["summary"])
    if "csv" in formats:
        for name in ("summary", "queries", "money", "fast_p", "outcomes", "efa", "efa_by_category", "references",
                     "configs", "config_queries", "config_money", "comparison", "retime", "sol"):
            if data.get(name) or name in ("summary", "queries"):
                file_name = {"queries": "score_vs_queries", "money": "score_vs_money",
                             "config_queries": "config_score_vs_queries", "config_money": "config_score_vs_money",
                             "comparison": "config_comparison"}.get(name, name)
                columns = [c for c in data[name][0] if c not in ABANDONED_COLUMNS] \
                    if name == "summary" and data[name] else None  # summary.csv's header stays as documented
                written.append(tables.write_csv(output / f"{file_name}.csv", data[name], columns))
        long_columns = ["run", "task", "name", "baseline_ms", "best_ms", "speedup", "speedup_raw", "timing", "ci_low",
                        "ci_high", "n_pairs", "effective_pairs", "paired_stop", "paired_flagged", "paired_why", "search_speedup_raw",
                        "best_noisy", "best_key", "best_idx", "n_attempts", "n_correct", "queries", "spend_usd",
                        "spend_in_budget_usd", *ABANDONED_COLUMNS]
        written.append(tables.write_csv(output / "per_task_long.csv", with_abandoned(data["final"], data["abandoned"]),
                                        long_columns))
        written.append(tables.write_matrix_csv(output / "per_task.csv", header, body))
    if "tex" in formats:
        written.append(tables.write_matrix_latex(output / "per_task.tex", header, body))
    # Building the figures costs about a second with altair: only when a figure is written.
    drawn = build_figures(data, runs) if {"html", "png", "svg"} & set(formats) else []
    charts = [(name, fig.spec(chart)) for name, chart in drawn]
    if "png" in formats or "svg" in formats:
        for name, spec in charts:
            written += fig.save(spec, output / name, formats)
    if "html" in formats:
        page = html.render(
            title=title or "pike-harness report", generated=time.strftime("%Y-%m-%d %H:%M:%S"),
            version=version, inputs=inputs, summary=data["summary"], references=data["references"],
            configs=data["configs"] if len(runs) > 1 else [], comparison=data["comparison"],
            figures=[(name, spec, FIGURE_CAPTIONS[name]) for name, spec in charts],
            matrix_header=header, matrix_body=body, matrix_notes=tables.matrix_notes(data["final"], header, body),
            tasks=task_views(data), trajectory_spec=fig.trajectory_spec(),
            has_retime=bool(data["retime"]), extra_notes=abandoned_notes(data["summary"]),
            warnings=report_warnings(data),
            sections=[s for s in (outlier_flags.section(data.get("baseline_outliers") or []),
                                  sol.section(data.get("sol") or []), clock_flags.section(data.get("clock_flags") or []),
                                  profiles.section(data.get("profiles") or [])) if s],
            configuration=[configuration_row(r) for r in data["runs"]], banner=not_a_benchmark(data["runs"]),
            static_figures={name: "data:image/png;base64," + base64.b64encode((output / f"{name}.png").read_bytes()).decode()
                            for name, _ in charts if (output / f"{name}.png").exists()})
        written.append(html.write(output / html.HTML_FILE, page))
    return written


def with_abandoned(final: Sequence[dict[str, Any]], abandoned: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each task's row with its abandoned queries (``task_abandoned``): 0 and $0 where it has none, an empty
    dollar figure where none of its abandoned queries has an estimate (unknown, never $0)."""
    none = {"abandoned_queries": 0, "abandoned_usd_estimated": 0.0, "abandoned_cost_unknown": 0}
    by_task = {(r["run"], r["task"]): {c: r[c] for c in ABANDONED_COLUMNS} for r in abandoned}
    return [{**row, **by_task.get((row["run"], row["task"]), none)} for row in final]


def abandoned_notes(summary: Sequence[dict[str, Any]]) -> list[str]:
    """The page's note on queries abandoned at a stop, one figure per run that has any (none: no note)."""
    figures = [f"{r['run']}: {abandoned_text(r)}" for r in summary if r.get("abandoned_queries")]
    if not figures:
        return []
    return ["Abandoned (estimated, lower bound): LLM queries still unanswered when a run stopped, which the "
            "provider may have billed; a resume asks them again, and that answer is billed apart and counted "
            "as usual. The estimate prices the prompt (characters / 4) at the input price, output left out, "
            "so it is a floor; ? where the model has no price. It is not in the spend, the queries or the "
            "curves. " + "; ".join(figures) + "."]


def abandoned_text(row: dict[str, Any]) -> str:
    """"2 queries, at least $0.03", "+ 1 of unknown cost" where some have no estimate."""
    count, usd, unknown = row.get("abandoned_queries") or 0, row.get("abandoned_usd_estimated"), \
        row.get("abandoned_cost_unknown") or 0
    text = f"{count} quer{'y' if count == 1 else 'ies'}"
    if usd is not None:
        text += f", at least ${float(usd):.2f}"
    if unknown:
        text += f" ({unknown} of unknown cost)" if usd is not None else ", cost unknown"
    return text


def configuration_row(run: dict[str, Any]) -> dict[str, str]:
    """What one run measured, for the report's configuration block (from run.json via the runs table):
    the device the evaluator actually used (not ``auto``), the CPU beside the GPU, the timing protocol
    with its statistic, and the versions that change timings."""
    config = _json(run.get("config"))
    env = _json(run.get("environment"))
    options = ", ".join(f"{k}={v}" for k, v in sorted((config.get("strategy_options") or {}).items()))
    llms = str(run.get("llm") or "") + (f"; fixes: {run['fix_llm']}" if run.get("fix_llm") else "")
    if config.get("temperature") is not None:
        llms += f" (temperature {config['temperature']})"
    device = str(run.get("device") or "")
    if run.get("device_requested") and run.get("device_requested") != run.get("device"):
        device += f" (asked: {run['device_requested']})"
    cpu = f"CPU: {env['cpu']}" + (f" ({env['cpu_count']} cores)" if env.get("cpu_count") else "") if env.get("cpu") else ""
    gpu = f"GPU: {run['gpu']}" if run.get("gpu") else "no GPU"
    protocol = _json(_json(env.get("evaluator")).get("protocol"))
    protocol_text = str(run.get("protocol") or "")
    if protocol.get("statistic"):
        low, high = protocol.get("min_reps"), protocol.get("max_reps")
        calls = f" of {low} calls" if low and low == high else f" of {low}-{high} calls" if low and high else ""
        protocol_text += f" ({protocol['statistic']}{calls})"
    versions = ", ".join(f"{k} {env[k]}" for k in ("pikeh", "torch", "triton", "cuda", "python") if env.get(k))
    return {"run": run["run"], "strategy": f"{run.get('strategy')}" + (f" ({options})" if options else ""),
            "llms": llms, "evaluator": str(run.get("evaluator") or ""),
            "device": "; ".join(part for part in (device, gpu, cpu) if part),
            "protocol": protocol_text, "host": str(run.get("host") or ""), "versions": versions}


def not_a_benchmark(runs: Sequence[dict[str, Any]]) -> list[str]:
    """Why the numbers cannot be read as a GPU benchmark (empty when they can)."""
    reasons = []
    cpu = [r["run"] for r in runs if r.get("device") == "cpu" or not r.get("gpu")]
    if cpu:
        reasons.append(f"timed on a CPU, not a GPU ({', '.join(cpu)})")
    quick = [r["run"] for r in runs if r.get("protocol") == "quick"]
    if quick:
        reasons.append(f"the quick timing protocol (5 calls, for smoke checks) ({', '.join(quick)})")
    offline = [r["run"] for r in runs if str(r.get("llm") or "").startswith("offline:")]
    if offline:
        reasons.append(f"an offline stand-in wrote the programs, not an LLM ({', '.join(offline)})")
    return reasons


def build_figures(data: dict[str, Any], runs: list[str]) -> list[tuple[str, Any]]:
    """The figures that have something to show, by file stem."""
    charts: list[tuple[str, Any]] = []
    # A money curve needs known costs, and a run that spent nothing (offline stand-ins) has none to draw.
    paid = {r["run"] for r in data["summary"] if not r.get("unknown_cost_calls") and (r.get("usd_per_task") or 0) > 0}
    money = [r for r in data["money"] if r["run"] in paid]
    if data["queries"] or data["references"]:
        charts.append(("suite_score", fig.score_vs_budget(data["queries"], money, data["references"], runs)))
        charts.append(("final_scores", fig.final_scores(data["summary"], data["references"], runs)))
    if data["fast_p"]:
        charts.append(("fast_p", fig.fast_p(data["fast_p"], runs)))
    if data["outcomes"]:
        charts.append(("outcomes", fig.outcomes(data["outcomes"], data["efa"])))
    if any(r.get("speedup") is not None for r in data["final"]):
        charts.append(("per_task", fig.per_task(data["final"], runs)))
    if data["retime"]:
        charts.append(("retime", fig.retime(data["retime"], runs)))
    if any(r.get("eager_fraction") or r.get("best_fraction") for r in data.get("sol") or []):
        charts.append(("sol", sol.figure(data["sol"])))
    if data["config_queries"] and len(runs) > 1:  # one run: the suite-score figure already shows it
        charts.append(("seed_bands", seed_figures.bands(data["config_queries"], data["config_money"])))
    return charts


def task_views(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Per task, per run: numbers, best code, trajectory rows and failures for the HTML report."""
    attempts: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in data["attempts"]:
        attempts[(row["run"], row["task"])].append(row)
    tasks: dict[str, dict[str, Any]] = {}
    for number, row in enumerate(data["final"]):
        entry = tasks.setdefault(row["task"], {"task": row["task"], "name": row["name"], "task_id": row["task_id"],
                                               "suite": row["suite"], "runs": []})
        mine = attempts.get((row["run"], row["task"]), [])
        code = None
        if row.get("best_dir"):
            try:
                # shown as written: a bidi override would reorder what a reviewer reads ("Trojan Source")
                code = printable((Path(row["path"]) / row["best_dir"] / "code.py").read_text(encoding="utf-8"))
            except OSError:
                code = None
        entry["runs"].append({
            **{k: row.get(k) for k in ("run", "baseline_ms", "best_ms", "best_key", "best_idx", "speedup",
                                       "speedup_raw", "n_attempts", "n_correct", "spend_usd", "timing", "ci_low",
                                       "ci_high", "n_pairs", "effective_pairs", "paired_stop", "paired_flagged",
                                       "paired_why", "best_noisy")},
            "uid": f"{number}", "code": code,
            "attempts": {"columns": list(TRAJECTORY_COLUMNS),
                         "rows": [[_compact(a.get(k)) for k in TRAJECTORY_COLUMNS[:-1]] + [_short(a.get("reason"), 400)]
                                  for a in mine]},
            # Rendered into the page itself, so the failures read without JavaScript.
            "failures": [{"idx": "-" if a.get("idx") is None else a["idx"], "key": a.get("key"), "role": a.get("role"),
                          "category": a.get("category"), "reason": _short(a.get("reason"), 400) or ""}
                         for a in mine if a.get("category") != "correct"],
        })
    return sorted(tasks.values(), key=lambda t: (t["suite"] or "", t["task_id"] or 0))


def _compact(value: Any) -> Any:
    """Four significant digits are plenty for a chart; a 300-query, 30-task run stays a few MB."""
    return float(f"{value:.4g}") if isinstance(value, float) else value


def _short(text: str | None, limit: int) -> str | None:
    return None if text is None else short_text.shorten(text, limit)
