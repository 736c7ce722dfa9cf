"""A batch submitted at once, timed end to end, with where its time went: before/after and 1/2/4 GPUs.

The batch (issue 29's "60-set"): every eager reference of ``--suite`` (level3-pike: 30) as a
candidate, plus every solution in ``--solutions`` (PIKE-B's 30 published programs), ``--copies``
times (the multi-GPU measurement doubles it so each GPU has work; a copy differs by a comment, so its
Triton/Inductor caches are its own, while an identical ``load_inline`` build is a build-cache hit).

Each ``--runs`` entry is one ``local`` evaluator, fresh caches, the whole batch submitted at once:
``ORDER@DEVICES`` with ORDER ``longest-first`` (the engine's default) or ``submission`` (the order
before issue 29), DEVICES as ``--device`` takes it; ``ORDER/QUIET`` sets the quiet rule (``stop``,
``cores``, ``off``) and ``+OPTION=VALUE`` one engine option of ``RUN_OPTIONS`` (e.g.
``longest-first+prewarm=all+check_slots=8@cuda:0``), so one call compares settings in one sitting. Runs go one after the other in this process (one
sitting); a run that reaches ``--budget-s`` is aborted and reported with what finished, so its wall
time is a lower bound. Per run: wall time, verdicts (and each one that is not correct, with its check
and reason), candidates per hour, the engine's stage totals, each device's idle time by cause and the
candidate that finished last (``Engine.stats(stages=True)``), and the start-slot figures. Runs in one
sitting are not equal: on 2026-11-29 the first run on a fresh H200 machine took about 40 s (11 %)
longer than the second, whatever each ran, so compare settings in both orders.

Writes ``batch.json`` and ``batch.md`` to ``--out``.

  PYTHONPATH=src:plugins python3 benchmarks/bench_batch.py --out $OUT \\
      --runs longest-first@cuda:0,submission@cuda:0                                # before/after, one GPU
  PYTHONPATH=src:plugins python3 benchmarks/bench_batch.py --out $OUT --copies 2 \\
      --runs longest-first@cuda:0,longest-first@cuda:0,1,longest-first@cuda:0,1,2,3  # scaling (see --runs)
  PYTHONPATH=src:plugins python3 benchmarks/bench_batch.py --device cpu --suite smoke --no-solutions \\
      --warmup-ms 5 --rep-ms 20 --out /tmp/batch                                   # the CPU smoke path
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from host_cpu import CpuSampler, describe, split  # noqa: E402
from perf_common import (  # noqa: E402
    PIKE_B_SOLUTIONS,
    Budget,
    arguments,
    environment_of,
    fmt,
    make_evaluator,
    suite,
    workdir,
    write,
)

from pike_harness.worker.supervise.engine.stage_breakdown import format_breakdown  # noqa: E402

QUIET_MODES = ("stop", "cores")
DEFAULT_SOLUTIONS = PIKE_B_SOLUTIONS


# Engine options a run entry may set with ``+OPTION=VALUE`` (the local evaluator's own names).
RUN_OPTIONS = ("prewarm", "check_slots", "start_slots", "build_slots", "long_slots", "jobs", "max_ready",
               "prestart")


def parse_runs(text: str, device: str) -> list[tuple[str, str]]:
    """``ORDER[/QUIET][+OPTION=VALUE...]@DEVICES`` entries; a comma starts a new entry only before an
    order name, so ``longest-first@cuda:0,1,submission@cuda:0`` is two runs. ``/cores``, ``/stop`` or
    ``/off`` sets the run's quiet rule (default: the engine's), e.g. ``longest-first/cores@cuda:0``."""
    runs: list[tuple[str, str]] = []
    for part in text.split(","):
        spec, at, devices = part.partition("@")
        if spec.partition("/")[0].partition("+")[0] in ("longest-first", "submission"):
            run_settings(spec)  # refuses a bad entry before any run starts
            runs.append((spec, devices if at else device))
        elif runs and not at:
            runs[-1] = (runs[-1][0], f"{runs[-1][1]},{part}")
        else:
            raise SystemExit(f"--runs: {part!r} is not ORDER[/QUIET][+OPTION=VALUE...]@DEVICES")
    return runs


def run_settings(spec: str) -> dict[str, Any]:
    """The evaluator options one run entry stands for: its CPU order, quiet rule and engine options."""
    head, *pairs = spec.split("+")
    cpu_order, _, quiet = head.partition("/")
    if cpu_order not in ("longest-first", "submission") or quiet not in ("", "off", *QUIET_MODES):
        raise SystemExit(f"--runs: {spec!r} is not ORDER[/QUIET][+OPTION=VALUE...]")
    settings: dict[str, Any] = {"cpu_order": cpu_order, **quiet_options(quiet)}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if key not in RUN_OPTIONS or not eq or not value:
            raise SystemExit(f"--runs: {pair!r} in {spec!r} is not OPTION=VALUE with OPTION one of "
                             f"{', '.join(RUN_OPTIONS)}")
        settings[key] = int(value) if value.isdigit() else value
    return settings


def batch_requests(args: Any) -> list[tuple[str, Any]]:
    """(label, request) for every reference and solution, ``--copies`` times."""
    tasks = suite(args.suite)
    items: list[tuple[str, Any]] = []
    folder = None if args.no_solutions else (args.solutions or DEFAULT_SOLUTIONS)
    solutions = sorted(folder.glob("task_*.py")) if folder is not None and folder.is_dir() else []
    for copy in range(args.copies):
        tag = f"\n# copy {copy}\n" if copy else ""
        for task in tasks.tasks():
            items.append((f"eager:{task.id}#{copy}", task.eval_request(
                task.source + tag, baseline_mode="eager")))
        for path in solutions:
            task_id = int(path.stem.split("_")[1])
            task = tasks.task(task_id)
            items.append((f"{path.name}#{copy}", task.eval_request(
                path.read_text(encoding="utf-8") + tag)))
    return items


def run_once(args: Any, order: str, devices: str, items: list[tuple[str, Any]], base: Path,
             budget: Budget) -> dict[str, Any]:
    name = f"{order}@{devices}".replace(",", "+").replace(":", "").replace("/", "-")
    settings = {**({"jobs": args.jobs} if args.jobs else {}), **run_settings(order)}
    evaluator = make_evaluator("ours", devices, args.protocol, base / name / "work", base / name / "cache",
                               protocol_params={"warmup_ms": args.warmup_ms, "rep_ms": args.rep_ms}, **settings)
    sampler = CpuSampler().start()
    try:
        began = time.monotonic()
        # The requests name no device of the evaluator's, so the engine picks the least busy one.
        futures = [(label, evaluator.submit(req)) for label, req in items]
        results, categories, unfinished = [], {}, 0
        # Each result's own stage seconds (the supervisor's: e.g. ``reference``, the reference process
        # computing outputs, and ``reference_wait``, waiting for it while it served others): the check
        # phase's share of the device's idle time is read from these.
        evaluation_stages: dict[str, float] = {}
        stages_by_candidate: dict[str, dict[str, float]] = {}  # label -> its own split (e.g. check parts)
        runtimes: dict[str, float] = {}  # label -> search-time runtime (ms), to compare runs' timings
        # label -> why it was not correct (category, check, the reason's start): a verdict that changes
        # between runs (one drawn from the hidden input sets, or a flaky check) is named, not just counted
        verdicts: dict[str, dict[str, Any]] = {}
        for label, future in futures:
            try:
                left = budget.left()
                if args.run_budget_s:  # each run cut at the same wall time: a fair count of what finished
                    left = min(left, args.run_budget_s - (time.monotonic() - began))
                # Past the cut, only what is already done counts: no wait at all (a minimum wait per
                # unfinished candidate let 67 of them finish late on 2026-11-28 and inflated the count).
                result = future.result(timeout=max(0.0, left))
            except Exception as exc:  # noqa: BLE001 - over budget or an evaluator error: counted, not fatal
                unfinished += 1
                categories[type(exc).__name__] = categories.get(type(exc).__name__, 0) + 1
                continue
            results.append(result)
            if result.runtime_ms:
                runtimes[label] = result.runtime_ms
            categories[result.category] = categories.get(result.category, 0) + 1
            if result.category != "correct":
                verdicts[label] = {"category": result.category, "check": result.check,
                                   "reason": (result.reason or "")[:300]}
            stages_by_candidate[label] = {stage: float(seconds) for stage, seconds in (result.stage_seconds or {}).items()}
            for stage, seconds in stages_by_candidate[label].items():
                evaluation_stages[stage] = evaluation_stages.get(stage, 0.0) + seconds
        wall = time.monotonic() - began
        sampler.stop()
        if unfinished:
            evaluator.engine.abort([f for _, f in futures if not f.done()])
        stats = evaluator.engine.stats(stages=True)
        host_cpu = split(sampler.samples, timing_windows(evaluator.engine.traces))
        figures = stats.pop("stages")
        return {"order": order, "devices": devices, "submitted": len(items), "done": len(results),
                "finished": unfinished == 0, "wall_s": wall, "per_hour": 3600 * len(results) / wall if wall else None,
                "categories": categories, "stage_totals_s": figures["totals_s"],
                "evaluation_stage_totals_s": evaluation_stages, "evaluation_stages_s": stages_by_candidate,
                "runtimes_ms": runtimes, "verdicts": verdicts,
                "device_idle_s": figures["device_idle_s"], "candidates": figures["candidates"],
                "engine": stats, "scheduling": evaluator.describe().get("scheduling"),
                "environment": environment_of(results), "host_cpu": host_cpu,
                "breakdown_text": format_breakdown(figures)}
    finally:
        sampler.stop()
        evaluator.close()


def timing_windows(traces: list[Any]) -> list[tuple[float, float]]:
    """Every timed window (the ordinary timing's and the paired re-timing's) the traces recorded."""
    windows = []
    for trace in traces:
        for start, end in ((trace.timing_start, trace.timing_end), (trace.paired_start, trace.paired_end)):
            if start is not None and end is not None:
                windows.append((start, end))
    return windows


def quiet_options(quiet: str) -> dict[str, Any]:
    """The engine options a run's ``/QUIET`` suffix stands for (none: the engine's defaults)."""
    if quiet == "off":
        return {"quiet_timing": False}
    return {"quiet_mode": quiet} if quiet else {}


def markdown(runs: list[dict[str, Any]], args: Any) -> str:
    lines = [f"### Batch wall time and stage breakdown (`{args.suite}`, protocol `{args.protocol}` "
             f"{args.warmup_ms:g}/{args.rep_ms:g} ms, {args.copies} cop{'y' if args.copies == 1 else 'ies'})", "",
             "| order | devices | done / submitted | wall (s) | candidates/hour | categories |", "|---|---|---|---|---|---|"]
    for run in runs:
        wall = fmt(run["wall_s"], 1) + ("" if run["finished"] else " (budget hit: lower bound)")
        lines.append(f"| {run['order']} | {run['devices']} | {run['done']} / {run['submitted']} | {wall} | "
                     f"{fmt(run['per_hour'], 0)} | {run['categories']} |")
    for run in runs[1:]:
        lines.append(timing_agreement(runs[0], run))
    for run in runs:
        inside = ", ".join(f"{stage} {seconds:.1f}" for stage, seconds in
                           sorted(run.get("evaluation_stage_totals_s", {}).items(), key=lambda item: -item[1]))
        lines += ["", f"**{run['order']} @ {run['devices']}**", "", "```", run["breakdown_text"],
                  f"inside the evaluations (s, all candidates): {inside or '-'}",
                  f"start slots: {run['engine'].get('start_slots')}",
                  *([describe(run["host_cpu"])] if run.get("host_cpu") else []),
                  *(device_phases(name, figures) for name, figures in run["engine"].get("devices", {}).items()),
                  "```"]
    return "\n".join(lines)


def device_phases(name: str, figures: dict[str, Any]) -> str:
    """One device's line: its check phases (how many, checks per phase, seconds per check), its timing
    holds and how long its reference process was busy per request kind: what the device's time per
    candidate is made of."""
    phases, checks = int(figures.get("check_phases") or 0), int(figures.get("checks") or 0)
    check_s, grants = float(figures.get("check_busy_s") or 0.0), int(figures.get("grants") or 0)
    reference = ", ".join(f"{op} {v['requests']} in {v['busy_s']:.1f} s"
                          for op, v in sorted((figures.get("reference") or {}).items()))
    return (f"{name}: {phases} check phases, {checks} checks ({checks / phases if phases else 0:.1f} per phase), "
            f"check phases {check_s:.1f} s ({check_s / checks if checks else 0:.2f} s per check); "
            f"{grants} holds {float(figures.get('busy_s') or 0.0):.1f} s; reference busy: {reference or '-'}")


def timing_agreement(first: dict[str, Any], other: dict[str, Any]) -> str:
    """One line: how the candidates' search-time runtimes of ``other`` compare with ``first``'s (the same
    candidates, another scheduling), so a faster schedule that moves the timings shows it."""
    ratios = [other["runtimes_ms"][label] / first["runtimes_ms"][label]
              for label in first.get("runtimes_ms", {}) if label in other.get("runtimes_ms", {})]
    name = f"{other['order']} @ {other['devices']}"
    if not ratios:
        return f"\nSearch-time runtimes, {name} against the first run: no candidate timed in both."
    within = sum(1 for r in ratios if abs(r - 1) <= 0.10)
    return (f"\nSearch-time runtimes, {name} over the first run: median ratio {statistics.median(ratios):.3f}, "
            f"{within} of {len(ratios)} within 10 %, range {min(ratios):.2f}-{max(ratios):.2f}.")


def main() -> int:
    parser = arguments(__doc__.splitlines()[0], budget_s=540)
    parser.add_argument("--suite", default="level3-pike", help="Suite whose eager references join the batch.")
    parser.add_argument("--solutions", type=Path, default=None, help="Folder of task_<id>.py solutions "
                        "(default: PIKE-B's published level3-pike solutions, where present).")
    parser.add_argument("--no-solutions", action="store_true", help="Only the suite's eager references.")
    parser.add_argument("--copies", type=int, default=1, help="The batch this many times (multi-GPU: 2).")
    parser.add_argument("--runs", default=None, help="ORDER@DEVICES,... (default: longest-first then "
                        "submission on --device).")
    parser.add_argument("--run-budget-s", type=float, default=None, help="Cut each run at this many seconds "
                        "(what finished by then is reported): two runs that fit one call, compared alike.")
    parser.add_argument("--warmup-ms", type=float, default=500.0, help="pike protocol warm-up budget (ms).")
    parser.add_argument("--rep-ms", type=float, default=2000.0, help="pike protocol repetition budget (ms).")
    args = parser.parse_args()
    args.protocol = args.protocol or "pike"
    device = args.device or ("cuda:0" if _cuda() else "cpu")
    runs = parse_runs(args.runs or f"longest-first@{device},submission@{device}", device)
    items = batch_requests(args)
    budget = Budget(args.budget_s)
    base = workdir(args, "batch")
    print(f"[batch] {len(items)} candidates, runs: {runs}", flush=True)
    measured = []
    for order, devices in runs:
        if budget.over(margin=20):
            print(f"[batch] no budget left for {order}@{devices}", flush=True)
            break
        run = run_once(args, order, devices, items, base, budget)
        print(f"[batch] {order}@{devices}: {run['done']}/{run['submitted']} in {run['wall_s']:.1f} s "
              f"{run['categories']}\n{run['breakdown_text']}", flush=True)
        measured.append(run)
        # Written after every run, so a call that ends during a later run keeps the earlier ones.
        write(args.out, "batch", {"suite": args.suite, "copies": args.copies, "protocol": args.protocol,
                                  "warmup_ms": args.warmup_ms, "rep_ms": args.rep_ms, "runs": measured},
              markdown(measured, args))
    return 0 if measured and all(r["finished"] for r in measured) else 1


def _cuda() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except ImportError:
        return False


if __name__ == "__main__":
    raise SystemExit(main())
