"""Timing noise: task references timed alone, and while other candidates build and load in parallel.

One evaluator (the default configuration). Each timed candidate is a task's reference submitted as a
candidate (default level3-pike/9, ResNet-18: launch-bound, so the most sensitive to a busy host;
``--tasks level3-pike`` times every reference of the suite). Per task, in this order:

1. ``--warmup-runs`` evaluations whose timings are dropped (reference outputs, caches, allocator);
2. ``alone`` (before): the first half of ``--reps-alone`` (rounded up), nothing else running;
3. ``loaded``: ``--reps`` evaluations while a feeder keeps ``--builds`` candidates with one-kernel
   ``load_inline`` extensions (fresh sources, so cold builds) loading: each one that ends its load
   (built, or failed) is replaced by a fresh one at once, so the CPU slots stay busy for the whole
   loaded phase instead of emptying as one batch of builds finishes (``--builds`` defaults to the CPU
   slots minus one: 13 on a 16-core host with one GPU, which with the timed reference's own load are
   the 14 builds and loads of the goal below);
4. ``alone`` (after): the rest of ``--reps-alone``, after the feeder's candidates were aborted.

Why this order: a task's alone and loaded runs lie within a minute or two of each other, so drift of
the host or the GPU over a long run (clocks, temperature, a neighbour) cannot pass for load, and
bracketing the loaded runs by alone runs shows such drift where it happens (the two alone runs
differ). Timing all tasks alone first and loaded later would put them up to an hour, and several
device calls (possibly other machines), apart. One feeder serves every task (a continuing stream of
fresh nonces), started for each loaded phase and stopped for the alone runs.

Goal (the open issue): every reference timed while 14 builds and loads run keeps a CV across the
loaded runs' headline runtimes of at most 3 % (protocol ``robust``), and its loaded median stays
within 2 % of its alone median; each task that misses is named with the reason this measurement
shows, in the spirit of ``fidelity_runs.measured_reasons``: the alone runs differing among themselves
by more than 2 % (then they cannot vouch for a 2 % ratio), a mean within-run CV above 5 % (loaded,
and whether alone too), failed runs, no load overlapping the loaded timings; else "not explained by
this measurement".

Resumable: each finished task is appended as one line to ``noise.jsonl`` in ``--state`` (default
``--out``, mirrored into ``--out`` after each task); a rerun with the same state skips the tasks
(with the same settings) already there, and the report covers all of them. ``--budget-s`` starts no
task that would not fit (the longest task so far, this call's or the state's, times 1.25, plus
``--margin-s``) and no evaluation that would not (the longest one so far); a task cut by the budget is
not recorded, since its alone and loaded runs must come from one sitting on one machine (a later call
may get another): it runs whole next time, and its runs so far are shown, marked partial. Exit status
3 while tasks remain, else 0.

Reported per task: alone and loaded medians, their ratio, the CV across loaded runs, the alone runs'
spread, mean within-run CVs, the loads running during each loaded timing, pass/fail and the reason
of a miss; a summary of how many tasks meet the goal. With one task, the per-condition table of
earlier versions follows the one-row table.

  PYTHONPATH=src:plugins python benchmarks/bench_noise.py --out $OUT [--device cuda:0]
  PYTHONPATH=src:plugins python benchmarks/bench_noise.py --tasks level3-pike --state S --out $OUT --budget-s 540
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import re
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

from perf_common import (
    Budget,
    JsonlState,
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
    suite,
    summary,
    task,
    workdir,
    write,
)

from pike_harness.contracts.model import Task  # noqa: E402 - perf_common put src/ on the path
from pike_harness.worker.supervise.engine import default_cpu_slots  # noqa: E402

STATE_FILE = "noise.jsonl"
GOAL_CV = 0.03  # CV across the loaded runs' headline runtimes
GOAL_RATIO = 0.02  # |loaded median / alone median - 1|
ALONE_SPREAD_LIMIT = 0.02  # alone runs differing by more than the ratio goal cannot vouch for a ratio
WITHIN_CV_LIMIT = 0.05  # samples within one run spreading this much move a median by about the CV goal
UNEXPLAINED = "not explained by this measurement"  # the words of fidelity_runs.measured_reasons
ESTIMATE_FACTOR = 1.25  # a task may take this much longer than the longest one so far


def concurrent_loads(traces: list, timed: Any) -> int:
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


def parse_tasks(spec: str) -> list[Task]:
    """Tasks from a comma list: ``suite`` (all its tasks), ``suite/ids`` (``1-5,9``: ranges take the ids
    that exist) and bare ids or ranges, which continue the suite named before them, so
    ``level3-pike/1,2,9`` is three tasks of level3-pike. Order kept, duplicates dropped."""
    chosen: list[Task] = []
    current: str | None = None
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        if "/" in item:
            current, _, ids = item.rpartition("/")
            found = suite(current).select(ids)
        elif re.fullmatch(r"\d+(-\d+)?", item):
            if current is None:
                raise SystemExit(f"--tasks: {item!r} names ids but no suite before it (write suite/{item})")
            found = suite(current).select(item)
        else:
            current = item
            found = suite(item).tasks()
        chosen.extend(t for t in found if t.ref not in {c.ref for c in chosen})
    if not chosen:
        raise SystemExit(f"--tasks {spec!r} names no task")
    return chosen


class State(JsonlState):
    """The tasks finished so far (``noise.jsonl``), one line each."""

    def __init__(self, folder: Path):
        super().__init__(folder, STATE_FILE)


def submit_traced(evaluator: Any, req: Any, lock: threading.Lock) -> tuple[concurrent.futures.Future, Any]:
    """Submit and return the future with its engine trace (appended by ``submit``; the lock keeps the
    feeder's and the main thread's submissions from swapping traces)."""
    with lock:
        future = evaluator.submit(req)
        return future, evaluator.engine.traces[-1]


class Feeder:
    """Keeps ``builds`` cold ``load_inline`` candidates loading while it runs: a candidate that ends its
    load (built and warmed, or failed) is replaced at once by one with a fresh nonce, so the CPU slots
    stay busy however long the loaded phase lasts. Built candidates go on to be checked and timed on
    the device like any candidate (part of the load). At most ``cap`` of them are alive at once, so the
    engine always has a thread and a slot left for the timed reference."""

    def __init__(self, evaluator: Any, lock: threading.Lock, builds: int, kind: str, cap: int):
        self.evaluator, self.lock, self.builds, self.kind, self.cap = evaluator, lock, builds, kind, cap
        self.gelu = task("smoke/5")  # the build candidates' task: a GELU with a one-kernel extension
        self.jobs: list[tuple[concurrent.futures.Future, Any]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.submitted = 0
        self.error: BaseException | None = None

    def start(self) -> None:
        self._stop.clear()
        self.jobs, self.submitted = [], 0
        self._thread = threading.Thread(target=self._loop, name="noise-feeder", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self._fill()
                self._stop.wait(0.2)
        except BaseException as exc:  # noqa: BLE001 - told to the main thread by stop()
            self.error = exc

    def _fill(self) -> None:
        alive = [(f, t) for f, t in self.jobs if not f.done()]
        loading = sum(1 for _, t in alive if t.loaded is None)
        while loading < self.builds and len(alive) < self.cap and not self._stop.is_set():
            job = submit_traced(self.evaluator, request(self.gelu, inline_source(self.kind, fresh_nonce())),
                                self.lock)
            self.jobs.append(job)
            alive.append(job)
            loading += 1
            self.submitted += 1

    def stop(self, wait_s: float) -> dict[str, int]:
        """Stop feeding and abort every candidate still alive, waiting up to ``wait_s`` for them to end
        ("alone" must mean alone). Returns what this loaded phase submitted and saw loaded."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        loaded = sum(1 for _, t in self.jobs if t.loaded is not None)
        futures = [f for f, _ in self.jobs if not f.done()]
        self.evaluator.abort(futures)
        deadline = time.monotonic() + wait_s
        for future in futures:
            with contextlib.suppress(Exception):
                future.result(timeout=max(0.1, deadline - time.monotonic()))
        if self.error is not None:
            raise RuntimeError(f"the build feeder failed: {self.error!r}") from self.error
        return {"submitted": self.submitted, "loaded": loaded, "aborted": len(futures)}


class OutOfBudget(Exception):
    """The budget would not hold the next evaluation: the task stops and is not recorded."""


class Runner:
    """Times one task's reference at a time, with the shared evaluator and feeder."""

    def __init__(self, evaluator: Any, feeder: Feeder, lock: threading.Lock, budget: Budget, margin_s: float):
        self.evaluator, self.feeder, self.lock, self.budget, self.margin_s = evaluator, feeder, lock, budget, margin_s
        self.longest_eval = 0.0  # seconds: no evaluation starts unless this much (and the margin) is left
        self.partial: dict[str, Any] | None = None  # the task under way
        self.environment: dict[str, Any] = {}

    def evaluate(self, task_obj: Task, label: str) -> dict[str, Any]:
        if self.budget.left() < self.margin_s + self.longest_eval:
            raise OutOfBudget(label)
        started = time.monotonic()
        future, trace = submit_traced(self.evaluator, request(task_obj, task_obj.source), self.lock)
        try:
            result = future.result(timeout=max(1.0, self.budget.left() - self.margin_s / 2))
        except concurrent.futures.TimeoutError:
            self.evaluator.abort([future])
            raise OutOfBudget(label) from None
        except Exception as exc:  # noqa: BLE001 - an evaluator error is a measured failure of this run
            row = {"phase": label, "category": "error", "runtime_ms": None, "within_run_cv": None, "n": None,
                   "concurrent_loads": None, "reason": str(exc)[:300], "wall_s": time.monotonic() - started}
            print(f"[noise] {task_obj.ref} {label}: error {exc}", flush=True)
            return row
        wall = time.monotonic() - started
        self.longest_eval = max(self.longest_eval, wall)
        if not self.environment:
            self.environment = environment_of([result])
        row = {"phase": label, "category": result.category, "runtime_ms": result.runtime_ms,
               "within_run_cv": result.runtime.cv if result.runtime else None,
               "n": result.runtime.n if result.runtime else None,
               "concurrent_loads": concurrent_loads(list(self.evaluator.engine.traces), trace),
               "reason": result.reason, "wall_s": wall}
        print(f"[noise] {task_obj.ref} {label}: {fmt(result.runtime_ms, 4)} ms ({result.category}), "
              f"{row['concurrent_loads']} loads meanwhile, {wall:.1f} s", flush=True)
        return row

    def run_task(self, task_obj: Task, settings: dict[str, Any]) -> dict[str, Any]:
        """warm-up, alone (before), loaded x reps, alone (after). Raises OutOfBudget if cut; the runs
        made until then stay in ``self.partial`` (reported as such, never recorded in the state)."""
        started = time.monotonic()
        before = (settings["reps_alone"] + 1) // 2
        row: dict[str, Any] = {"task": task_obj.ref, "name": task_obj.name, "warm": [], "alone": [], "loaded": [],
                               "feeder": {}, "duration_s": None}
        self.partial = row
        for _ in range(settings["warmup_runs"]):
            row["warm"].append(self.evaluate(task_obj, "warm-up")["category"])
        for _ in range(before):
            row["alone"].append(self.evaluate(task_obj, "alone (before)"))
        self.feeder.start()
        try:
            time.sleep(settings["ramp_s"])  # the feeder's builders get going before the first timing
            for _ in range(settings["reps"]):
                row["loaded"].append(self.evaluate(task_obj, "loaded"))
        finally:
            row["feeder"] = self.feeder.stop(wait_s=max(1.0, min(60.0, self.budget.left() - self.margin_s / 2)))
        for _ in range(settings["reps_alone"] - before):
            row["alone"].append(self.evaluate(task_obj, "alone (after)"))
        row["duration_s"] = time.monotonic() - started
        self.partial = None
        return row


def spread(values: list[float]) -> float | None:
    """(max - min) / median: how far runs of one condition lie apart."""
    return (max(values) - min(values)) / statistics.median(values) if len(values) > 1 else None


def mean_or_none(values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.fmean(kept) if kept else None


def miss_reasons(alone_ms: list[float], loaded_ms: list[float], within_alone: float | None,
                 within_loaded: float | None, failed: list[dict[str, Any]], loads: list[int]) -> list[str]:
    """What this measurement shows that can put a task off the goal (empty: nothing, the miss stays
    unexplained). Like ``fidelity_runs.measured_reasons``: measured facts, not guesses."""
    reasons = []
    if failed:
        first = failed[0]
        reasons.append(f"{len(failed)} run(s) not timed ({first['category']}: {(first.get('reason') or '')[:80]})")
    if len(loaded_ms) < 2:
        reasons.append(f"{len(loaded_ms)} loaded run(s) timed: no CV")
    if not alone_ms:
        reasons.append("no alone run timed: no ratio")
    alone_spread = spread(alone_ms)
    if alone_spread is not None and alone_spread > ALONE_SPREAD_LIMIT:
        reasons.append(f"alone runs themselves differ by {alone_spread:.1%}")
    if within_loaded is not None and within_loaded > WITHIN_CV_LIMIT:
        if within_alone is not None and within_alone > WITHIN_CV_LIMIT:
            reasons.append(f"within-run CV {within_loaded:.1%} loaded, {within_alone:.1%} even alone")
        else:
            reasons.append(f"within-run CV {within_loaded:.1%} loaded against {fmt_pct(within_alone)} alone")
    if loads and max(loads) == 0:
        reasons.append("no other load overlapped its loaded timings")
    return reasons


def fmt_pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def task_summary(row: dict[str, Any]) -> dict[str, Any]:
    """The figures of one task's row and its verdict against the goal."""
    alone_ms = [r["runtime_ms"] for r in row["alone"] if r["runtime_ms"] is not None]
    loaded_ms = [r["runtime_ms"] for r in row["loaded"] if r["runtime_ms"] is not None]
    failed = [r for r in row["alone"] + row["loaded"] if r["runtime_ms"] is None]
    s_alone, s_loaded = summary(alone_ms), summary(loaded_ms)
    ratio = s_loaded["median"] / s_alone["median"] if alone_ms and loaded_ms else None
    cv = s_loaded.get("cv") if len(loaded_ms) > 1 else None
    within_alone = mean_or_none([r["within_run_cv"] for r in row["alone"]])
    within_loaded = mean_or_none([r["within_run_cv"] for r in row["loaded"]])
    loads = [r["concurrent_loads"] for r in row["loaded"] if r["concurrent_loads"] is not None]
    meets = (not failed and cv is not None and cv <= GOAL_CV and ratio is not None
             and abs(ratio - 1) <= GOAL_RATIO)
    reasons = [] if meets else miss_reasons(alone_ms, loaded_ms, within_alone, within_loaded, failed, loads)
    misses = []  # which half of the goal a task misses
    if cv is None or cv > GOAL_CV:
        misses.append(f"CV {fmt_pct(cv)}")
    if ratio is None or abs(ratio - 1) > GOAL_RATIO:
        misses.append(f"ratio {fmt(ratio, 3)}")
    if failed and not misses:
        misses.append("failed runs")
    return {"task": row["task"], "name": row.get("name"), "alone": s_alone, "loaded": s_loaded,
            "ratio": ratio, "cv_loaded": cv, "alone_spread": spread(alone_ms), "within_cv_alone": within_alone,
            "within_cv_loaded": within_loaded, "loads": loads, "meets": meets, "misses": misses,
            "reasons": reasons, "gpu": (row.get("environment") or {}).get("gpu")}


def loads_text(loads: list[int]) -> str:
    if not loads:
        return "-"
    return str(loads[0]) if min(loads) == max(loads) else f"{min(loads)}-{max(loads)}"


def table_row(s: dict[str, Any], label: str) -> str:
    verdict = "met" if s["meets"] else "missed: " + ", ".join(s["misses"])
    reason = "" if s["meets"] else ("; ".join(s["reasons"]) or UNEXPLAINED)
    return (f"| {label} | {fmt(s['alone'].get('median'), 4)} | {fmt(s['loaded'].get('median'), 4)} | "
            f"{fmt(s['ratio'], 4)} | {fmt_pct(s['cv_loaded'], 2)} | {fmt_pct(s['alone_spread'], 2)} | "
            f"{fmt_pct(s['within_cv_alone'], 2)} / {fmt_pct(s['within_cv_loaded'], 2)} | {loads_text(s['loads'])} | "
            f"{verdict} | {reason} |")


def markdown(rows: list[dict[str, Any]], settings: dict[str, Any], missing: list[str],
             partial: dict[str, Any] | None = None) -> str:
    """The fragment for docs/performance.md: one row per task (a task cut by the budget last, marked and
    not counted), then, for a single task, the per-condition table of earlier versions."""
    summaries = [task_summary(r) for r in rows]
    env = next((r["environment"] for r in reversed(rows + [partial or {}]) if r.get("environment")), {})
    gpus = sorted({s["gpu"] for s in summaries if s["gpu"]})
    met = sum(1 for s in summaries if s["meets"])
    lines = [f"### Timing noise while others compile ({settings['device']}, protocol `{settings['protocol']}`)", "",
             f"{env_line(env)}; {time.strftime('%Y-%m-%d')}" + (f" (GPUs across calls: {', '.join(gpus)})"
                                                               if len(gpus) > 1 else "") + ". "
             f"Each task's reference timed as a candidate, one evaluation at a time: {settings['reps_alone']} "
             f"alone (half before, half after) around {settings['reps']} while a feeder keeps "
             f"{settings['builds']} cold `load_inline` candidates ({settings['inline']}) loading. Goal: CV across "
             f"the loaded runs at most {GOAL_CV:.0%} and loaded median within {GOAL_RATIO:.0%} of the alone median.",
             "", f"**{met} of {len(summaries)} tasks meet the goal**" + (
                 f"; {len(missing)} not measured yet ({', '.join(missing)}): run again with the same --state."
                 if missing else "."), "",
             "| task | alone median (ms) | loaded median (ms) | loaded / alone | CV loaded | alone runs differ | "
             "within-run CV alone / loaded | loads meanwhile | goal | reason of a miss |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [table_row(s, s["name"] or s["task"]) for s in summaries]
    if partial is not None and (partial["alone"] or partial["loaded"]):
        s = task_summary(partial)
        lines.append(table_row(s, f"{s['name'] or s['task']} (cut by the budget: partial, not counted)"))
    single = rows[0] if len(rows) == 1 and partial is None else (partial if not rows else None)
    if single is not None:  # the single-task report of earlier versions: one line per condition
        lines += ["", "| condition | n | median (ms) | mean (ms) | CV across runs | mean within-run CV |",
                  "|---|---|---|---|---|---|"]
        for label, runs in (("alone", single["alone"]), ("while compiling", single["loaded"])):
            stats = summary([r["runtime_ms"] for r in runs if r["runtime_ms"] is not None])
            within = mean_or_none([r["within_run_cv"] for r in runs])
            lines.append(f"| {label} | {stats.get('n')} | {fmt(stats.get('median'), 4)} | "
                         f"{fmt(stats.get('mean'), 4)} | {fmt_pct(stats.get('cv') if stats['n'] > 1 else None, 2)} | "
                         f"{fmt_pct(within, 2)} |")
    return "\n".join(lines)


def main() -> int:
    parser = arguments(__doc__.splitlines()[0], budget_s=150)
    parser.add_argument("--task", default=None, help="One timed task (default level3-pike/9 on CUDA, smoke/1 on CPU).")
    parser.add_argument("--tasks", default=None,
                        help="Timed tasks: a comma list of suite/id, suite/1,2,9 or a whole suite (level3-pike).")
    parser.add_argument("--reps", type=int, default=3, help="Loaded runs per task (default 3).")
    parser.add_argument("--reps-alone", type=int, default=2,
                        help="Alone runs per task, half before and half after the loaded ones (default 2).")
    parser.add_argument("--warmup-runs", type=int, default=1,
                        help="Untimed evaluations per task before its alone runs (default 1).")
    parser.add_argument("--builds", type=int, default=None, help="Candidates kept loading (default: CPU slots - 1).")
    parser.add_argument("--ramp-s", type=float, default=3.0,
                        help="Seconds the feeder runs before the first loaded evaluation (default 3).")
    parser.add_argument("--inline", default=None, choices=["cuda", "cpp", "tiny", "compile"],
                        help="Kind of candidate compiling meanwhile (default: a load_inline build, cuda on GPUs, "
                             "cpp on CPU; a torch.compile candidate where ninja is missing).")
    parser.add_argument("--state", type=Path, default=None,
                        help=f"Folder of {STATE_FILE}, the finished tasks (default: --out).")
    parser.add_argument("--margin-s", type=float, default=20.0,
                        help="Seconds kept free of --budget-s for stopping and writing (default 20).")
    args = parser.parse_args()
    budget = Budget(args.budget_s)
    device = args.device or default_device()
    cuda = device.startswith("cuda")
    protocol = args.protocol or "robust"
    inline_kind = args.inline or (("cuda" if cuda else "cpp") if have_ninja() else "compile")
    if args.task and args.tasks:
        parser.error("give --task or --tasks, not both")
    tasks = parse_tasks(args.tasks or args.task or ("level3-pike/9" if cuda else "smoke/1"))
    state = State(args.state or args.out)
    # the engine's CPU slots, resolved as it will (no evaluator is started when every task is done)
    slots = args.jobs or default_cpu_slots(device.split(","))
    builds = args.builds if args.builds is not None else max(1, slots - 1)
    settings = {"device": device, "protocol": protocol, "builds": builds, "inline": inline_kind, "reps": args.reps,
                "reps_alone": args.reps_alone, "warmup_runs": args.warmup_runs, "ramp_s": args.ramp_s}
    key_of = {t.ref: "|".join(str(v) for v in (t.ref, device, protocol, builds, inline_kind, args.reps_alone,
                                                 args.reps)) for t in tasks}
    todo = [t for t in tasks if key_of[t.ref] not in state.rows]
    durations = [r["duration_s"] for r in state.rows.values() if r.get("settings") == settings]
    print(f"[noise] {len(tasks) - len(todo)} of {len(tasks)} tasks already in {state.path}; {builds} builds "
          f"({inline_kind}), {args.reps_alone} alone + {args.reps} loaded runs per task", flush=True)
    if not todo:
        return report(args.out, tasks, key_of, state, settings, {}, {}, None)
    base = workdir(args, "noise")
    evaluator = make_evaluator("ours", device, protocol, base / "work", base / "cache", **extra_options(args))
    if builds >= evaluator.engine.jobs:
        print(f"[noise] warning: {builds} builds fill all {evaluator.engine.jobs} CPU slots; the timed reference "
              "waits for a slot whenever it loads", flush=True)
    lock = threading.Lock()
    cap = max(1, evaluator.engine.capacity - 1)  # a pool thread and a slot always left for the timed reference
    feeder = Feeder(evaluator, lock, builds, inline_kind, cap)
    runner = Runner(evaluator, feeder, lock, budget, args.margin_s)
    stats: dict[str, Any] = {}
    partial: dict[str, Any] | None = None
    try:
        for task_obj in todo:
            estimate = ESTIMATE_FACTOR * max(durations) if durations else 0.0
            if budget.left() < estimate + args.margin_s:
                print(f"[noise] budget: {budget.left():.0f} s left, a task takes up to {estimate:.0f} s; "
                      f"stopping before {task_obj.ref}", flush=True)
                break
            try:
                row = runner.run_task(task_obj, settings)
            except OutOfBudget as exc:
                print(f"[noise] budget spent during {task_obj.ref} ({exc}); it is not recorded", flush=True)
                partial = runner.partial
                break
            row.update(key=key_of[task_obj.ref], settings=settings, environment=runner.environment,
                       time=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
            state.add(row)
            durations.append(row["duration_s"])
            mirror(state, args.out)  # after each task: a call killed later still brings it back
        stats = evaluator.stats()
    finally:
        evaluator.close()  # aborts builds still running
    if partial is not None:
        partial["environment"] = runner.environment
    return report(args.out, tasks, key_of, state, settings, stats, runner.environment, partial)


def mirror(state: State, out: Path) -> None:
    """Copy the state file into ``out`` (where it is elsewhere): on a device machine only ``$OUT`` comes
    back, and the next call needs the state to skip what is done."""
    if state.path.exists() and state.path.parent.resolve() != out.resolve():
        out.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(state.path, out / STATE_FILE)


def report(out: Path, tasks: list[Task], key_of: dict[str, str], state: State, settings: dict[str, Any],
           stats: dict[str, Any], environment: dict[str, Any], partial: dict[str, Any] | None) -> int:
    """noise.{json,md} over every requested task in the state (this call's and earlier calls'), plus the
    runs of a task the budget cut (``partial``: shown, marked, not counted); 3 while tasks are left."""
    rows = [state.rows[key_of[t.ref]] for t in tasks if key_of[t.ref] in state.rows]
    missing = [t.ref for t in tasks if key_of[t.ref] not in state.rows]
    text = markdown(rows, settings, missing, partial)
    write(out, "noise", {**settings, "goal": {"cv": GOAL_CV, "ratio": GOAL_RATIO},
                         "tasks": [task_summary(r) for r in rows], "rows": rows, "missing": missing,
                         "partial": partial, "finished": not missing, "scheduler": stats,
                         "environment": environment, "state": str(state.path)}, text)
    mirror(state, out)
    print(f"[noise] {'finished' if not missing else f'{len(missing)} tasks left: run again with the same --state'}",
          flush=True)
    return 0 if not missing else 3


if __name__ == "__main__":
    sys.exit(main())
