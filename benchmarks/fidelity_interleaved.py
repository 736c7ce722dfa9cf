"""``fidelity.py --interleaved`` (issue 28, item 4): the plain loop and the harness in alternating
rounds of one sitting, so both see the same host, each side's speedups with 95% intervals.

Why rounds: the host itself moves (the plain loop read one eager reference 0.056 ms one day and
0.16 ms the next), so a single plain-loop figure is no fixed target. Each round times every task on
the plain loop (``plain_loop.py``, one process per task, nothing from pike_harness: the eager
reference and the solution, ``--plain-repeats`` times each), then every task on the harness (all
submitted at once, as a run does, each with a paired re-timing against its eager reference). Per task:

* the plain loop's speedup over its rounds: each (eager, solution) timing pair of one process is one
  ratio, and the geometric mean of the ratios with a Student-t 95% interval (``paired_stats``);
* the harness's paired speedup, all rounds' pairs pooled, with its interval, and whether it lies
  within the plain loop's interval;
* each round's own speedup on each side and their spread (largest over smallest): how far a figure
  moves when either side is run again minutes later, which the pooled plain interval (wide where the
  plain processes disagree) does not show;
* the search-time timing (the harness's ordinary ``runtime_ms``) over the plain loop's solution time;
* the noise canary (median reading) and the largest steal share, and the flags.

Summary: tasks within the plain loop's interval, the suite's clamped geomean both ways, interval
half-widths, search-time agreement, against issue 28's goals. Resumable like the other modes:
``interleaved.jsonl`` in ``--state`` holds every finished measurement, keyed by round.
"""

from __future__ import annotations

import concurrent.futures
import statistics
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import fidelity_runs as runs
from perf_common import Budget, JsonlState, request, spread, write

from pike_harness.contracts.evaluation import EvaluatorError, EvaluatorOptions
from pike_harness.worker.paired_stats import estimate
from pike_harness.worker.records import PairedSpec

STATE_FILE = "interleaved.jsonl"
GOALS = {"within_ci": 27 / 30, "geomean": 0.03, "halfwidth": 0.05, "search_time": 0.10, "search_share": 25 / 30}


def run(args: Any, work: list[tuple[Any, Path]], base: Path) -> int:
    """The rounds (resumable), then the report; 0 when finished, 3 when the budget stopped it. With
    ``--report-only`` no device is touched: the report is rebuilt from the state's measurements with
    today's statistics (after an interval rule changed since they were taken, say)."""
    state = JsonlState(args.state or args.out, STATE_FILE)
    spec = PairedSpec(target_halfwidth=args.target_halfwidth, min_pairs=args.min_pairs, max_pairs=args.max_pairs,
                      max_seconds=args.paired_max_s, block_ms=args.block_ms)
    settings = {"warmup_ms": args.warmup_ms, "rep_ms": args.rep_ms, "repeats": args.plain_repeats,
                "rounds": args.rounds, "paired": asdict(spec)}
    if getattr(args, "report_only", False):
        finished = all(state.get(f"{side}|{r}|{task.id}") for task, _ in work for side in ("plain", "harness")
                       for r in range(1, args.rounds + 1))
    else:
        finished = _measure(args, work, base, state, spec, settings)
    rows = [task_row(task, path, state, args.rounds) for task, path in work]
    summary = summarize(rows)
    # --report-only runs where the measurements were not taken (a CPU machine): what the state recorded.
    here = not getattr(args, "report_only", False)
    setup = {"suite": args.suite, "device": args.device if here else _recorded(state, "device") or args.device,
             "gpu": _recorded(state, "gpu") or args.device, "torch": _recorded(state, "torch"),
             "triton": runs.triton_version() if here else "(not recorded)", "date": time.strftime("%Y-%m-%d"),
             "tasks": len(work), "finished": finished, **settings}
    text = markdown(rows, summary, setup)
    write(args.out, "fidelity-interleaved", {"setup": setup, "summary": summary, "rows": rows}, text)
    reports = args.reports or args.out / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    (reports / f"fidelity-interleaved-{runs.gpu_slug(setup['gpu'])}.md").write_text(text)
    if (args.state or args.out).resolve() != args.out.resolve():  # the state travels back with --out
        (args.out / STATE_FILE).write_bytes(state.path.read_bytes())
    return 0 if finished else 3


def _measure(args: Any, work: list[tuple[Any, Path]], base: Path, state: JsonlState, spec: PairedSpec,
             settings: dict[str, Any]) -> bool:
    """Both warm-ups, then every round not yet in ``state``; False when the budget stopped them."""
    from pikeh_local import LocalEvaluator

    budget = Budget(args.budget_s)
    cache = args.cache.resolve() if args.cache else None
    extra: dict[str, Any] = {"build_cache": str((cache or base) / "harness-cache")}
    if args.jobs:
        extra["jobs"] = args.jobs
    with concurrent.futures.ThreadPoolExecutor(1) as side:  # both warm-ups before anything is timed
        harness_warmed = side.submit(warm_harness if args.warm_jobs > 0 else _skip, work, state, args.device, Path(extra["build_cache"]),
                                     base / "harness-warm", budget, args.margin_s, extra)
        runs.warm_solutions(work, state, args.device, budget, cache, args.warm_jobs, args.margin_s)
        harness_warmed.result()
    evaluator = LocalEvaluator(EvaluatorOptions(device=args.device, protocol="pike", workdir=base / "interleaved",
                                                protocol_params={"warmup_ms": args.warmup_ms, "rep_ms": args.rep_ms},
                                                config=LocalEvaluator.Config(**extra)))
    finished = True
    try:
        for round_no in range(1, args.rounds + 1):
            finished = (plain_round(work, state, args.device, settings, round_no, budget, cache, args.margin_s)
                        and harness_round(work, state, evaluator, spec, round_no, budget, args.margin_s))
            if not finished:
                break
    finally:
        evaluator.close()
    return finished


def warm_harness(work: list[tuple[Any, Path]], state: JsonlState, device: str, harness_cache: Path, workdir: Path,
                 budget: Budget, margin_s: float, config: dict[str, Any]) -> None:
    """Fill the harness's own build and JIT caches before the first round, beside the plain loop's
    warm-up: every solution evaluated once, all at once, with a token timing (1/5 ms), nothing paired.
    Without it the first harness round pays every ``load_inline`` build and Triton compile while the
    others are timed, and the rounds are not alike. Skips what this cache already holds."""
    from pikeh_local import LocalEvaluator

    token = runs.cache_token(harness_cache)
    todo = [(task, path) for task, path in work if not runs.warmed_here(state, f"harnesswarm|{path.name}", token)]
    if not todo or budget.left() < margin_s:
        return
    print(f"[interleaved] harness: warming {len(todo)} solutions (builds and JIT caches)", flush=True)
    workdir.mkdir(parents=True, exist_ok=True)
    evaluator = LocalEvaluator(EvaluatorOptions(device=device, protocol="pike", workdir=workdir,
                                                protocol_params={"warmup_ms": 1.0, "rep_ms": 5.0},
                                                config=LocalEvaluator.Config(**config)))
    try:
        futures = {evaluator.submit(request(task, path.read_text(encoding="utf-8"))): (task, path)
                   for task, path in todo}
        try:
            for future in concurrent.futures.as_completed(futures, timeout=max(1.0, budget.left() - margin_s)):
                task, path = futures[future]
                try:
                    category = future.result().category
                except EvaluatorError as exc:
                    category = f"evaluator_error: {str(exc)[:200]}"
                state.add({"key": f"harnesswarm|{path.name}", "kind": "harnesswarm", "task": task.id,
                           "file": path.name, "cache": token, "category": category})
        except concurrent.futures.TimeoutError:
            evaluator.abort([f for f in futures if not f.done()])
    finally:
        evaluator.close()


def _skip(*_args: Any) -> None:
    """``--warm-jobs 0``: neither side is warmed first (each round builds what it needs)."""


def plain_round(work: list[tuple[Any, Path]], state: JsonlState, device: str, settings: dict[str, Any], round_no: int,
                budget: Budget, cache: Path | None, margin_s: float) -> bool:
    """Every task on the plain loop, one process at a time; False when the budget stopped it."""
    for task, path in work:
        key = f"plain|{round_no}|{task.id}"
        if state.done(key):
            continue
        if budget.left() < margin_s:
            return False
        result = runs.run_plain(["--reference", str(task.path), "--solution", str(path), "--repeats",
                                 str(settings["repeats"]), "--warmup-ms", str(settings["warmup_ms"]), "--rep-ms",
                                 str(settings["rep_ms"]), *runs.plain_options(task, device)],
                                min(600.0, budget.left() - 5), cache)
        if result.get("verdict") == "timeout":
            return False
        print(f"[interleaved] round {round_no} plain {task.id}: {result.get('verdict')} eager "
              f"{result.get('eager_ms')} solution {result.get('solution_ms')}", flush=True)
        state.add({"key": key, "kind": "plain", "round": round_no, "task": task.id, "file": path.name, **result})
    return True


def harness_round(work: list[tuple[Any, Path]], state: JsonlState, evaluator: Any, spec: PairedSpec, round_no: int,
                  budget: Budget, margin_s: float) -> bool:
    """Every task on the harness, all submitted at once, each re-timed paired; False at the budget."""
    todo = [(f"harness|{round_no}|{task.id}", task, path) for task, path in work
            if not state.done(f"harness|{round_no}|{task.id}")]
    if not todo:
        return True
    if budget.left() < margin_s:
        return False
    futures = {evaluator.submit(request(task, path.read_text(encoding="utf-8"), paired=spec)): (key, task)
               for key, task, path in todo}
    try:
        for future in concurrent.futures.as_completed(futures, timeout=max(1.0, budget.left() - 10)):
            key, task = futures[future]
            state.add({"key": key, "kind": "harness", "round": round_no, "task": task.id, **_harness_fields(future)})
    except concurrent.futures.TimeoutError:
        evaluator.abort([f for f in futures if not f.done()])
        return False
    return True


def _harness_fields(future: Any) -> dict[str, Any]:
    try:
        result = future.result()
    except EvaluatorError as exc:
        return {"category": "evaluator_error", "reason": str(exc)[:400]}
    runtime = result.runtime
    print(f"[interleaved] harness {result.task}: {result.category} {result.runtime_ms} paired "
          f"{result.paired.speedup if result.paired else None}", flush=True)
    return {"category": result.category, "check": result.check, "reason": (result.reason or "")[:400],
            "flags": list(result.flags), "runtime_ms": result.runtime_ms,
            "mean_ms": runtime.mean_ms if runtime else None, "cv": runtime.cv if runtime else None,
            "noise": asdict(result.noise) if result.noise else None,
            "paired": asdict(result.paired) if result.paired else None,
            "paired_unavailable": result.environment.get("paired"),
            "gpu": result.environment.get("gpu"), "torch": result.environment.get("torch")}


def task_row(task: Any, path: Path, state: JsonlState, rounds: int) -> dict[str, Any]:
    """One task's figures from every round measured so far."""
    plain = [state.get(f"plain|{r}|{task.id}") for r in range(1, rounds + 1)]
    harness = [state.get(f"harness|{r}|{task.id}") for r in range(1, rounds + 1)]
    plain = [p for p in plain if p]
    harness = [h for h in harness if h]
    plain_pairs = [(e, s) for p in plain if p.get("verdict") == "correct"
                   for e, s in zip(p.get("eager_ms") or [], p.get("solution_ms") or [], strict=False) if e and s]
    harness_pairs = [tuple(pair) for h in harness if h.get("paired") for pair in h["paired"]["pairs"]]
    row: dict[str, Any] = {"task": task.id, "file": path.name, "plain_rounds": len(plain),
                           "harness_rounds": len(harness),
                           "plain_verdict": _last(plain, "verdict"), "harness_verdict": _last(harness, "category")}
    row["plain"] = _interval(plain_pairs)
    row["harness"] = _interval(harness_pairs)
    # Each round's own speedup on each side (a plain process; one harness re-timing), and how far apart
    # the rounds of one sitting lie: what a user who ran either side once, minutes later, would see move.
    row["plain_by_round"] = [_geomean([e / s for e, s in zip(p.get("eager_ms") or [], p.get("solution_ms") or [],
                                                            strict=False) if e and s])
                             for p in plain if p.get("verdict") == "correct"]
    row["harness_by_round"] = [h["paired"]["speedup"] for h in harness if h.get("paired")]
    row["plain_round_spread"] = spread(row["plain_by_round"])
    row["harness_round_spread"] = spread(row["harness_by_round"])
    plain_ci, harness_ci = row["plain"], row["harness"]
    row["within_plain_ci"] = (plain_ci["low"] <= harness_ci["speedup"] <= plain_ci["high"]
                              if plain_ci and harness_ci else None)
    plain_solution = _geomean([s for _, s in plain_pairs])
    search = _geomean([h["mean_ms"] for h in harness if h.get("mean_ms")])
    row["search_ms"], row["plain_solution_ms"] = search, plain_solution
    row["search_ratio"] = search / plain_solution if search and plain_solution else None
    canaries = [v for h in harness for v in ((h.get("noise") or {}).get("canary_before_ms"),
                                             (h.get("noise") or {}).get("canary_after_ms")) if v]
    steals = [v for h in harness for n in (h.get("noise"), (h.get("paired") or {}).get("noise"))
              if n and (v := n.get("steal_fraction")) is not None]
    row["canary_ms"] = statistics.median(canaries) if canaries else None
    row["max_steal"] = max(steals) if steals else None
    row["flags"] = sorted({f for h in harness for f in h.get("flags") or []
                           if f in ("noisy_timing", "paired_wide_interval", "paired_unavailable")})
    row["paired_flagged"] = [h["paired"]["flagged"] for h in harness if h.get("paired") and h["paired"].get("flagged")]
    row["unavailable"] = [h["paired_unavailable"] for h in harness if h.get("paired_unavailable")]
    return row


def _interval(pairs: list[tuple[float, float]]) -> dict[str, Any] | None:
    if len(pairs) < 2:
        return None
    found = estimate(pairs)
    return {"speedup": found.speedup, "low": found.ci_low, "high": found.ci_high, "halfwidth": found.halfwidth,
            "n": found.n}


def _last(rows: list[dict[str, Any]], field: str) -> str | None:
    return rows[-1].get(field) if rows else None


def _geomean(values: list[float]) -> float | None:
    return runs.geomean([v for v in values if v])


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The suite's figures against issue 28's goals, over the tasks both sides timed."""
    both = [r for r in rows if r["plain"] and r["harness"]]
    plain_geo = runs.geomean([runs.clamp(r["plain"]["speedup"]) for r in both])
    harness_geo = runs.geomean([runs.clamp(r["harness"]["speedup"]) for r in both])
    searched = [r for r in rows if r["search_ratio"] is not None]
    return {"tasks": len(rows), "timed_both": len(both),
            "within_plain_ci": sum(1 for r in both if r["within_plain_ci"]),
            "geomean_plain": plain_geo, "geomean_harness": harness_geo,
            "geomean_ratio": harness_geo / plain_geo if plain_geo and harness_geo else None,
            "halfwidth_ok_or_flagged": sum(1 for r in both if r["harness"]["halfwidth"] <= GOALS["halfwidth"]
                                           or r["flags"]),
            "search_within_10pct": sum(1 for r in searched if abs(r["search_ratio"] - 1) <= GOALS["search_time"]),
            "search_timed": len(searched),
            "noisy_tasks": sum(1 for r in rows if "noisy_timing" in r["flags"]),
            "median_halfwidth_plain": _median([r["plain"]["halfwidth"] for r in both]),
            "median_halfwidth_harness": _median([r["harness"]["halfwidth"] for r in both]),
            "median_round_spread_plain": _median([r.get("plain_round_spread") for r in both]),
            "median_round_spread_harness": _median([r.get("harness_round_spread") for r in both])}


def _median(values: list[float | None]) -> float | None:
    found = [v for v in values if v is not None]
    return statistics.median(found) if found else None


def markdown(rows: list[dict[str, Any]], summary: dict[str, Any], setup: dict[str, Any]) -> str:
    def num(value: float | None, digits: int = 3) -> str:
        return f"{value:.{digits}f}" if value is not None else "-"

    def ci(interval: dict[str, Any] | None) -> str:
        if not interval:
            return "-"
        return f"{interval['speedup']:.3f} [{interval['low']:.3f}, {interval['high']:.3f}] n={interval['n']}"

    def pct(value: float | None) -> str:
        return f"+-{value:.1%}" if value is not None else "-"

    def spread(row: dict[str, Any]) -> str:
        plain, harness = row.get("plain_round_spread"), row.get("harness_round_spread")
        return "-" if plain is None and harness is None else f"{num(plain, 2)} / {num(harness, 2)}"

    lines = [f"## Fidelity, interleaved: plain loop and harness in alternating rounds ({setup['suite']}, "
             f"{setup['device']})", "",
             f"{setup['gpu']}; torch {setup['torch']}, Triton {setup['triton']}; {setup['date']}; {setup['tasks']} "
             f"tasks, {setup['rounds']} rounds (plain: {setup['repeats']} timings of each side per round, "
             f"{setup['warmup_ms']:g}/{setup['rep_ms']:g} ms; harness: protocol pike at the same budgets, all "
             f"submitted at once, paired blocks of {setup['paired']['block_ms']:g} ms to +-"
             f"{setup['paired']['target_halfwidth']:.0%} or {setup['paired']['max_pairs']} pairs or "
             f"{setup['paired']['max_seconds']:g} s).", "",
             "| task | plain verdict | harness verdict | plain speedup [95% CI] | harness paired [95% CI] | "
             "inside | rounds' spread, plain / harness | search/plain | canary ms | max steal | flags |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        inside = {True: "yes", False: "**no**", None: "-"}[r["within_plain_ci"]]
        steal = f"{r['max_steal']:.1%}" if r["max_steal"] is not None else "-"
        lines.append(f"| {r['task']} | {r['plain_verdict'] or '-'} | {r['harness_verdict'] or '-'} | {ci(r['plain'])} | "
                     f"{ci(r['harness'])} | {inside} | {spread(r)} | {num(r['search_ratio'])} | {num(r['canary_ms'], 4)} | {steal} | "
                     f"{', '.join(r['flags']) or '-'} |")
    s = summary
    lines += ["", f"- Harness paired speedup inside the plain loop's 95% interval: {s['within_plain_ci']} of "
              f"{s['timed_both']} timed on both sides (goal: 27 of 30).",
              f"- Suite clamped geomean: plain {num(s['geomean_plain'])}x, harness {num(s['geomean_harness'])}x, "
              f"ratio {num(s['geomean_ratio'])} (goal: within 3%).",
              f"- Interval half-width at most 5% or flagged with its reason: {s['halfwidth_ok_or_flagged']} of "
              f"{s['timed_both']}.",
              f"- Search-time timing within 10% of the plain loop: {s['search_within_10pct']} of {s['search_timed']} "
              f"(goal: 25 of 30).",
              f"- Tasks with a timing flagged noisy: {s['noisy_tasks']}.",
              f"- Median 95% half-width: plain {pct(s.get('median_halfwidth_plain'))}, harness "
              f"{pct(s.get('median_halfwidth_harness'))}. A wide plain interval makes \"inside\" easy; it is the "
              "plain loop's own spread over its processes, not the harness's.",
              f"- Rounds' spread (largest over smallest of a task's per-round speedups, one plain process or one "
              f"re-timing a round), median over tasks: plain {num(s.get('median_round_spread_plain'), 2)}, harness "
              f"{num(s.get('median_round_spread_harness'), 2)}."]
    reasons = [(r["task"], text) for r in rows for text in r["paired_flagged"] + r["unavailable"]]
    if reasons:
        lines += ["", "Flagged or unpaired, with the measured reason:", ""]
        lines += [f"- task {task}: {text}" for task, text in reasons]
    if not setup["finished"]:
        lines += ["", "**Partial**: the budget stopped this call; run it again with the same --state to continue."]
    return "\n".join(lines)


def _recorded(state: JsonlState, field: str) -> Any:
    return next((row.get(field) for row in state.rows.values() if row.get(field)), None)
