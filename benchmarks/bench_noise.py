"""Timing noise: one candidate timed repeatedly alone, and while other candidates compile in parallel.

One evaluator (the default configuration). The timed candidate is a task's reference submitted as a
candidate (default level3-pike/9, ResNet-18: launch-bound, so the most sensitive to a busy host).

1. ``alone``: timed ``--reps``/2 times, one evaluation after the other, nothing else running;
2. ``loaded``: ``--builds`` candidates with one-kernel ``load_inline`` extensions (fresh sources, so
   cold builds) are submitted first, filling all CPU slots but one; once their builds run, the timed
   candidate is evaluated ``--reps`` times, one after the other, on the remaining slot;
3. ``alone`` again, ``--reps``/2 times (so drift over the run does not pass for load).

Reported per condition: the headline runtimes (the protocol's statistic per evaluation), their
coefficient of variation, their median, and the ratio of medians loaded/alone; for each loaded
evaluation, how many loads and builds were running while it was timed. Targets: CV < 1% in both
conditions, medians within 1%.

  PYTHONPATH=src:plugins python benchmarks/bench_noise.py --out $OUT [--device cuda:0]
"""

from __future__ import annotations

import contextlib
import time

from perf_common import (
    Budget,
    arguments,
    default_device,
    env_line,
    environment_of,
    extra_options,
    fmt,
    fresh_nonce,
    have_ninja,
    inline_source,
    make_evaluator,
    request,
    summary,
    task,
    workdir,
    write,
)


def concurrent_loads(traces: list, timed) -> int:
    """Other evaluations that were loading (importing, building, warming up) during ``timed``'s timing."""
    start, end = timed.timing_start, timed.timing_end
    if start is None or end is None:
        return 0
    count = 0
    for trace in traces:
        if trace.seq == timed.seq or trace.load_start is None:
            continue
        finished = trace.loaded or trace.done or float("inf")  # an aborted load ends when its job does
        if trace.load_start < end and finished > start:
            count += 1
    return count


def timed_runs(evaluator, task_obj, source: str, reps: int, budget: Budget, label: str) -> list[dict]:
    rows = []
    for _ in range(reps):
        if budget.over(margin=20):
            print(f"[noise] budget spent during {label}", flush=True)
            break
        result = evaluator.evaluate(request(task_obj, source))
        trace = next(t for t in reversed(evaluator.engine.traces) if t.category is not None
                     and t.task == task_obj.ref)
        row = {"category": result.category, "runtime_ms": result.runtime_ms,
               "within_run_cv": result.runtime.cv if result.runtime else None,
               "n": result.runtime.n if result.runtime else None,
               "concurrent_loads": concurrent_loads(evaluator.engine.traces, trace),
               "reason": result.reason}
        rows.append(row)
        print(f"[noise] {label}: {fmt(result.runtime_ms, 4)} ms ({result.category}), "
              f"{row['concurrent_loads']} loads meanwhile", flush=True)
    return rows


def main() -> None:
    parser = arguments(__doc__.splitlines()[0], budget_s=150)
    parser.add_argument("--task", default=None, help="The timed task (default level3-pike/9 on CUDA, smoke/1 on CPU).")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--builds", type=int, default=None, help="Parallel builds (default: CPU slots - 1).")
    parser.add_argument("--inline", default=None, choices=["cuda", "cpp", "tiny", "compile"],
                        help="Kind of candidate compiling meanwhile (default: a load_inline build, cuda on GPUs, "
                             "cpp on CPU; a torch.compile candidate where ninja is missing).")
    args = parser.parse_args()
    device = args.device or default_device()
    cuda = device.startswith("cuda")
    protocol = args.protocol or "robust"
    inline_kind = args.inline or (("cuda" if cuda else "cpp") if have_ninja() else "compile")
    timed_task = task(args.task or ("level3-pike/9" if cuda else "smoke/1"))
    source = timed_task.source  # the reference, as a candidate (defines Model: PIKE's rule picks it)
    budget = Budget(args.budget_s)
    base = workdir(args, "noise")
    evaluator = make_evaluator("ours", device, protocol, base / "work", base / "cache", **extra_options(args))
    builds = args.builds if args.builds is not None else max(1, evaluator.engine.jobs - 1)
    gelu = task("smoke/5")
    half = max(1, args.reps // 2)
    try:
        warm = evaluator.evaluate(request(timed_task, source))  # reference process, caches, allocator
        alone = timed_runs(evaluator, timed_task, source, half, budget, "alone (before)")
        futures = [evaluator.submit(request(gelu, inline_source(inline_kind, fresh_nonce()))) for _ in range(builds)]
        time.sleep(5.0)  # let the build candidates start and their builders get going
        loaded = timed_runs(evaluator, timed_task, source, args.reps, budget, "while compiling")
        builds_done = sum(1 for f in futures if f.done())
        evaluator.abort(futures)  # the load ends here: "alone" again means alone
        for future in futures:
            with contextlib.suppress(Exception):
                future.result(timeout=max(1.0, budget.left() - 20))
        alone += timed_runs(evaluator, timed_task, source, args.reps - half, budget, "alone (after)")
        stats = evaluator.stats()
    finally:
        evaluator.close()  # aborts builds still running
    ok_alone = [r["runtime_ms"] for r in alone if r["runtime_ms"] is not None]
    ok_loaded = [r["runtime_ms"] for r in loaded if r["runtime_ms"] is not None]
    s_alone, s_loaded = summary(ok_alone), summary(ok_loaded)
    ratio = (s_loaded["median"] / s_alone["median"]) if ok_alone and ok_loaded else None
    env = environment_of([warm])
    busy_runs = sum(1 for r in loaded if r["concurrent_loads"] > 0)
    lines = [f"### Timing noise while others compile ({device}, protocol `{protocol}`)", "",
             f"{env_line(env)}; {time.strftime('%Y-%m-%d')}. Timed: {timed_task.ref} (its reference as a "
             f"candidate), one evaluation at a time. Load: {builds} `load_inline` candidates ({inline_kind}) with "
             f"cold builds, submitted before the loaded runs ({busy_runs} of {len(loaded)} loaded runs were timed "
             f"while other candidates were loading or building; {builds_done} builds had finished by the end).", "",
             "| condition | n | median (ms) | mean (ms) | CV across runs | mean within-run CV |",
             "|---|---|---|---|---|---|"]
    for label, rows, s in (("alone", alone, s_alone), ("while compiling", loaded, s_loaded)):
        within = [r["within_run_cv"] for r in rows if r["within_run_cv"] is not None]
        lines.append(f"| {label} | {s.get('n')} | {fmt(s.get('median'), 4)} | {fmt(s.get('mean'), 4)} | "
                     f"{fmt(100 * s['cv'], 2) + '%' if s.get('cv') is not None else '-'} | "
                     f"{fmt(100 * sum(within) / len(within), 2) + '%' if within else '-'} |")
    lines += ["", f"Ratio of medians (while compiling / alone): {fmt(ratio, 4)}. Targets: CV under 1% in "
                  "both conditions, ratio within 1% of 1."]
    write(args.out, "noise", {"device": device, "protocol": protocol, "task": timed_task.ref, "builds": builds,
                              "inline": inline_kind, "alone": alone, "loaded": loaded, "summary_alone": s_alone,
                              "summary_loaded": s_loaded, "ratio_of_medians": ratio, "scheduler": stats,
                              "environment": env}, "\n".join(lines))


if __name__ == "__main__":
    main()
