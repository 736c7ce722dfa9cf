"""Evaluator fidelity: the harness against an independent plain do_bench loop, in one sitting on one GPU.

By default (``--compare plain``, issue 16) a folder of solutions (PIKE-B's 30 published best
programs, in the ignored folder ``.fidelity/pike-b-level3`` of the checkout) and the suite's eager references go
through two sides: the harness (``LocalEvaluator``, ``--protocols pike`` and optionally ``robust``;
all submitted at once and/or one at a time, ``--concurrency all,serial``) and the plain loop of
``plain_loop.py`` (PIKE's protocol written plainly, one process per task, nothing from pike_harness).
Per task: both verdicts, runtimes (harness mean/median/CV, plain mean of ``--plain-repeats``),
speedups both ways and the ratios harness/plain; summary: how many runtimes are within 5 % (pike) /
3 % (robust), the suite's clamped geomean both ways. Writes ``fidelity.json`` and ``fidelity.md`` to
``--out`` and ``reports/fidelity-<gpu>.md`` under ``--reports``.

Resumable: each finished measurement is appended to ``fidelity.jsonl`` in ``--state`` (default
``--out``); the next call with the same state folder continues. ``--budget-s`` stops starting work
before the limit. ``--cache DIR`` keeps build/JIT caches (both sides) between calls on a warm machine.

``--interleaved`` (issue 28) alternates rounds of the plain loop and of the harness, which re-times each
solution paired against its eager reference: per-task speedups with 95% intervals on both sides, the
canary and steal (``fidelity_interleaved.py``).

``--compare evaluators`` is the older check (issue 14): the same solutions through ``--evaluator
local`` and ``--evaluator queue``, whose verdicts must agree and runtimes match within 3 %.

  PYTHONPATH=src:plugins python3 benchmarks/fidelity.py --out $OUT --state .fidelity/state \
      --cache .fidelity/cache --budget-s 540                                       # GPU, level3-pike
  PYTHONPATH=src:plugins python3 benchmarks/fidelity.py --suite smoke --solutions DIR --device cpu \
      --warmup-ms 5 --rep-ms 20 --out /tmp/fidelity                                 # a quick CPU check
"""

from __future__ import annotations

import os
import re
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perf_common import (  # noqa: E402
    PIKE_B_SOLUTIONS,
    REPO,
    Budget,
    arguments,
    default_device,
    environment_of,
    md_cell,
    request,
    workdir,
    write,
)

from pike_harness.contracts.evaluation import EvaluatorError, EvaluatorOptions  # noqa: E402
from pike_harness.contracts.suite import Suite
from pike_harness.host.tasks import load_suite  # noqa: E402

DEFAULT_SOLUTIONS = PIKE_B_SOLUTIONS
NAME = re.compile(r"^(?:task_)?(\d+)(?:_.*)?\.py$")
TOLERANCE = 0.03  # issue 14: queue runtimes within 3 % of local's on a GPU


def solutions(folder: Path, suite: Suite, wanted: set[int] | None) -> list[tuple[Any, Path]]:
    """(task, file) for each solution file whose name gives a task id of ``suite``."""
    found = []
    for path in sorted(folder.glob("*.py"), key=lambda p: (len(p.name), p.name)):
        match = NAME.match(path.name)
        if match is None:
            print(f"[fidelity] skipped {path.name}: no task id in its name", file=sys.stderr)
            continue
        task_id = int(match.group(1))
        if wanted is not None and task_id not in wanted:
            continue
        try:
            found.append((suite.task(task_id), path))
        except Exception as exc:  # noqa: BLE001 - a file for a task this suite lacks: say so, go on
            print(f"[fidelity] skipped {path.name}: {exc}", file=sys.stderr)
    return found


def evaluate_all(evaluator: Any, work: list[tuple[Any, Path]], timeout_s: float | None,
                 budget: Budget) -> dict[str, dict[str, Any]]:
    """Every solution submitted at once; file name -> task, verdict, runtime and the result record."""
    futures = {}
    for task, path in work:
        req = request(task, path.read_text(encoding="utf-8"))
        if timeout_s is not None:
            req = replace(req, limits=replace(req.limits, compile_timeout_s=timeout_s, run_timeout_s=timeout_s))
        futures[path.name] = (task.ref, evaluator.submit(req))
    out: dict[str, dict[str, Any]] = {}
    for name, (ref, future) in futures.items():
        try:
            result = future.result(timeout=max(1.0, budget.left()))
        except EvaluatorError as exc:
            out[name] = {"task": ref, "category": "evaluator_error", "check": None, "reason": str(exc)[:500],
                         "runtime_ms": None}
            continue
        except Exception as exc:  # noqa: BLE001 - the budget ran out: record it, keep the rest
            out[name] = {"task": ref, "category": "not_finished", "check": None, "reason": type(exc).__name__,
                         "runtime_ms": None}
            continue
        cv = result.runtime.cv if result.runtime is not None else None
        out[name] = {"task": ref, "category": result.category, "check": result.check, "reason": (result.reason or "")[:300],
                     "runtime_ms": result.runtime_ms, "cv": cv, "device": result.environment.get("device"),
                     "result": result}
    return out


def cache_dir(args: Any, base: Path, evaluator: str) -> Path:
    return args.cache if args.cache is not None else base / f"{evaluator}-cache"


def run_local(args: Any, base: Path, work: list, budget: Budget) -> tuple[dict, dict, dict]:
    from pikeh_local import LocalEvaluator

    evaluator = LocalEvaluator(EvaluatorOptions(device=args.device, protocol=args.protocol, workdir=base / "local",
                                                config=LocalEvaluator.Config(build_cache=str(cache_dir(args, base, "local")))))
    try:
        results = evaluate_all(evaluator, work, args.timeout, budget)
        return results, evaluator.describe().get("scheduling", {}), evaluator.stats()
    finally:
        evaluator.close()


class Worker:
    """``pikeh worker`` (``python -m pike_harness worker``) on a private queue folder, as users run it."""

    def __init__(self, io_dir: Path, device: str, base: Path, cache: Path, unsandboxed: bool = False):
        self.io_dir, self.worker_id = io_dir, "fidelity"
        env = {**os.environ, "PIKEH_CACHE_DIR": str(cache),
               "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
        self.log_path = base / "worker.log"
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen([sys.executable, "-m", "pike_harness", "worker", "--io-dir", str(io_dir),
                                           "--device", device, "--worker-id", self.worker_id, "--workdir",
                                           str(base / "worker"), *(["--unsafe-no-sandbox"] if unsandboxed else [])],
                                          stdout=log, stderr=subprocess.STDOUT, env=env)

    def wait_ready(self, timeout: float = 300.0) -> None:
        beat = self.io_dir / "workers" / f"{self.worker_id}.json"
        deadline = time.monotonic() + timeout
        while not beat.exists():
            if self.popen.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the worker did not start; its log:\n{self.log_path.read_text()[-3000:]}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


def run_queue(args: Any, base: Path, work: list, budget: Budget) -> tuple[dict, dict, dict]:
    from pikeh_queue import QueueEvaluator

    io_dir = base / "io"
    worker = Worker(io_dir, args.device, base, cache_dir(args, base, "queue"), unsandboxed=args.unsandboxed_queue)
    try:
        worker.wait_ready()
        evaluator = QueueEvaluator(EvaluatorOptions(protocol=args.protocol,
                                                         config=QueueEvaluator.Config(io_dir=str(io_dir))))
        try:
            results = evaluate_all(evaluator, work, args.timeout, budget)
            engine = evaluator.stats().get("workers", {}).get(worker.worker_id, {})
        finally:
            evaluator.close()
        return results, engine.get("engine", {}), engine.get("stats", {})
    finally:
        worker.stop()


def compare(local: dict, queue: dict) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    rows, ratios = [], []
    for name in local:
        a, b = local[name], queue.get(name, {})
        same = (a.get("category"), a.get("check")) == (b.get("category"), b.get("check"))
        ratio = (b["runtime_ms"] / a["runtime_ms"]) if a.get("runtime_ms") and b.get("runtime_ms") else None
        if ratio is not None:
            ratios.append(ratio)
        rows.append({"file": name, "task": a.get("task"), "local": _verdict(a), "queue": _verdict(b), "agree": same,
                     "local_ms": a.get("runtime_ms"), "queue_ms": b.get("runtime_ms"), "ratio": ratio,
                     "local_cv": a.get("cv"), "queue_cv": b.get("cv")})
    deviations = [abs(r - 1.0) for r in ratios]
    summary = {"solutions": len(rows), "verdicts_agree": sum(r["agree"] for r in rows),
               "timed_in_both": len(ratios),
               "median_ratio": statistics.median(ratios) if ratios else None,
               "max_ratio": max(ratios) if ratios else None, "min_ratio": min(ratios) if ratios else None,
               "max_deviation": max(deviations) if deviations else None,
               "within_tolerance": sum(d <= TOLERANCE for d in deviations), "tolerance": TOLERANCE}
    return rows, summary


def _verdict(entry: dict[str, Any]) -> str:
    if not entry:
        return "-"
    return entry["category"] + (f"/{entry['check']}" if entry.get("check") else "")


def markdown(rows: list[dict], summary: dict, setup: dict) -> str:
    def ms(value: float | None) -> str:
        return f"{value:.4g}" if value is not None else "-"

    lines = [f"## Evaluator fidelity: local vs queue ({setup['suite']}, {setup['device']}, {setup['protocol']})", "",
             f"{setup['gpu'] or setup['cpu']}; {summary['solutions']} solutions from `{setup['solutions']}`; "
             f"{setup['date']}. Candidate isolation: local {setup['isolation']['local']}, "
             f"queue {setup['isolation']['queue']}.", "",
             "| file | task | local | queue | local ms | queue ms | queue/local |", "|---|---|---|---|---|---|---|"]
    for row in rows:
        ratio = f"{row['ratio']:.3f}" if row["ratio"] is not None else "-"
        mark = "" if row["agree"] else " **(differs)**"
        lines.append(f"| {md_cell(row['file'])} | {md_cell(row['task'])} | {md_cell(row['local'])} | "
                     f"{md_cell(row['queue'])}{mark} | {ms(row['local_ms'])} | "
                     f"{ms(row['queue_ms'])} | {ratio} |")
    median = summary["median_ratio"]
    lines += ["", f"Verdicts agree on {summary['verdicts_agree']} of {summary['solutions']}. "
              f"Runtime ratio queue/local over {summary['timed_in_both']} timed in both: median "
              f"{ms(median)}, min {ms(summary['min_ratio'])}, max {ms(summary['max_ratio'])}; "
              f"{summary['within_tolerance']} within {summary['tolerance']:.0%}."]
    return "\n".join(lines)


def _isolation(results: dict[str, dict[str, Any]]) -> str | None:
    return next((e["result"].isolation for e in results.values() if "result" in e), None)


def _records(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {name: ({k: v for k, v in entry.items() if k != "result"}
                   | ({"record": entry["result"].to_dict()} if "result" in entry else {}))
            for name, entry in results.items()}


def compare_evaluators(args: Any, folder: Path, work: list[tuple[Any, Path]]) -> int:
    """``--compare evaluators``: local against queue (issue 14)."""
    args.protocol = args.protocol or "robust"
    budget = Budget(args.budget_s)
    base = workdir(args, "fidelity")
    began = time.monotonic()
    local, local_engine, local_stats = run_local(args, base, work, budget)
    local_s = time.monotonic() - began
    began = time.monotonic()
    queue, queue_engine, queue_stats = run_queue(args, base, work, budget)
    queue_s = time.monotonic() - began
    rows, summary = compare(local, queue)
    environment = environment_of([e["result"] for e in local.values() if "result" in e])
    setup = {"suite": args.suite, "device": args.device, "protocol": args.protocol, "solutions": str(folder),
             "isolation": {"local": _isolation(local), "queue": _isolation(queue)},
             "gpu": environment.get("gpu"), "cpu": environment.get("cpu"), "date": time.strftime("%Y-%m-%d")}
    payload = {"setup": setup, "environment": environment, "summary": summary, "rows": rows,
               "seconds": {"local": local_s, "queue": queue_s},
               "engines": {"local": {"settings": local_engine, "stats": local_stats},
                           "queue": {"settings": queue_engine, "stats": queue_stats}},
               "results": {"local": _records(local), "queue": _records(queue)}}
    write(args.out, "fidelity", payload, markdown(rows, summary, setup))
    return 0 if summary["verdicts_agree"] == summary["solutions"] else 1


def compare_plain(args: Any, folder: Path, work: list[tuple[Any, Path]]) -> int:
    """The default: the harness against the plain loop, resumable through ``--state``."""
    import fidelity_runs as runs

    budget = Budget(args.budget_s)
    base = workdir(args, "fidelity")
    state = runs.State(args.state or args.out)
    cache = args.cache.resolve() if args.cache else None
    protocols = [p.strip() for p in args.protocols.split(",") if p.strip()]
    concurrencies = [c.strip() for c in args.concurrency.split(",") if c.strip()]
    if any(c not in ("all", "serial") for c in concurrencies):
        raise SystemExit("--concurrency takes all, serial or both")
    settings = {"warmup_ms": args.warmup_ms, "rep_ms": args.rep_ms, "repeats": args.plain_repeats}
    sides = {s.strip() for s in args.sides.split(",")}
    finished = True
    if args.bracket:
        return bracket(args, work, state, settings, budget, base)
    if "plain" in sides:
        finished = runs.plain_phase(work, state, args.device, settings, budget, cache, args.warm_jobs, args.margin_s,
                                    eager_only=args.eager_only)
    for protocol in protocols if "harness" in sides else []:
        for concurrency in concurrencies:
            if finished:
                finished = runs.harness_phase(work, state, args.device, protocol, concurrency, settings, budget, cache,
                                              base, args.jobs, args.margin_s, eager_only=args.eager_only)
    modes = [m.strip() for m in args.baselines.split(",") if m.strip() not in ("", "eager")]
    if modes and finished and "harness" in sides:  # after the solutions: the fidelity table comes first
        finished = runs.harness_phase(work, state, args.device, "pike", "all", settings, budget, cache, base,
                                      args.jobs, args.margin_s, modes=modes, precompile_jobs=args.precompile_jobs,
                                      jit_margin_s=args.jit_margin_s)
    gpu = runs.gpu_name(args.device, state)
    comparisons = [runs.compare(work, state, p, c) for p in protocols for c in concurrencies]
    # the report states what was measured, not this call's defaults (--sides none renders elsewhere)
    settings = runs.recorded_settings(state, "plain", {task.id for task, _ in work}) or settings
    setup = {"suite": args.suite, "device": args.device, "solutions": str(folder), "tasks": len(work), "gpu": gpu,
             "torch": runs.torch_version(state), "date": time.strftime("%Y-%m-%d"),
             "triton": runs.recorded(state, "triton") or runs.triton_version(), "protocols": protocols, "concurrency": concurrencies, "finished": finished, **settings}
    text = runs.markdown(comparisons, setup)
    if not finished:
        text += ("\n**Partial**: the budget stopped this call; run the same command with the same --state "
                 "to continue.\n")
    write(args.out, "fidelity", {"setup": setup, "comparisons": comparisons}, text)
    reports = args.reports or args.out / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    (reports / f"fidelity-{runs.gpu_slug(gpu)}.md").write_text(text)
    if modes:
        (reports / f"baselines-{runs.gpu_slug(gpu)}.md").write_text(runs.baselines_markdown(work, state, modes, setup))
    if (args.state or args.out).resolve() != args.out.resolve():  # the state travels back with --out
        (args.out / "fidelity.jsonl").write_bytes(state.path.read_bytes())
    print(f"[fidelity] {'finished' if finished else 'stopped at the budget: run again to continue'}; "
          f"report {reports / f'fidelity-{runs.gpu_slug(gpu)}.md'}", flush=True)
    return 0 if finished else 3


def bracket(args: Any, work: list[tuple[Any, Path]], state: Any, settings: dict[str, Any], budget: Budget,
            base: Path) -> int:
    """``--bracket``: the eager references, plain / harness / plain, task by task (fidelity_runs.bracket_phase)."""
    import fidelity_runs as runs

    finished = "harness" not in args.sides or runs.bracket_phase(work, state, args.device, settings, budget, base,
                                                                 args.margin_s)
    rows = runs.bracket_rows(work, state)
    setup = {"gpu": runs.gpu_name(args.device, state), "date": time.strftime("%Y-%m-%d"),
             **(runs.recorded_settings(state, "bracket") or settings)}
    text = runs.bracket_markdown(rows, setup)
    write(args.out, "bracket", {"setup": setup, "rows": rows, "finished": finished}, text)
    reports = args.reports or args.out / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    (reports / f"fidelity-bracket-{runs.gpu_slug(setup['gpu'])}.md").write_text(text)
    if (args.state or args.out).resolve() != args.out.resolve():
        (args.out / "fidelity.jsonl").write_bytes(state.path.read_bytes())
    print(f"[fidelity] bracket {'finished' if finished else 'stopped at the budget'}: {len(rows)} tasks", flush=True)
    return 0 if finished else 3


def main() -> int:
    parser = arguments(__doc__.split("\n\n")[0], budget_s=3600.0)
    parser.add_argument("--compare", choices=("plain", "evaluators"), default="plain",
                        help="plain: harness against the plain do_bench loop (default); evaluators: local vs queue.")
    parser.add_argument("--suite", default="level3-pike", help="Task suite of the solutions (default level3-pike).")
    parser.add_argument("--solutions", type=Path, default=None,
                        help=f"Folder of solution files (default: {DEFAULT_SOLUTIONS} when present).")
    parser.add_argument("--tasks", default=None, help="Only these task ids, e.g. 1,2,9.")
    parser.add_argument("--timeout", type=float, default=None,
                        help="evaluators: per-stage limit in seconds (default: the request's).")
    parser.add_argument("--cache", type=Path, default=None,
                        help="Build/JIT cache folder, reused between calls (default: a fresh one in the workdir).")
    parser.add_argument("--unsandboxed-queue", action="store_true",
                        help="evaluators: run the queue worker with --unsafe-no-sandbox: the queue column is then "
                             "the candidate sandbox off, local's on (the two transports agree otherwise).")
    parser.add_argument("--state", type=Path, default=None,
                        help="plain: folder of fidelity.jsonl, the finished measurements (default: --out).")
    parser.add_argument("--reports", type=Path, default=None,
                        help="plain: folder for fidelity-<gpu>.md (default: OUT/reports).")
    parser.add_argument("--protocols", default="pike", help="plain: harness protocols, e.g. pike,robust.")
    parser.add_argument("--concurrency", default="all",
                        help="plain: all (every request submitted at once), serial (one at a time) or all,serial.")
    parser.add_argument("--baselines", default="",
                        help="plain: also time the references in these pikeh-baselines modes (pike, all at once), "
                             "e.g. compile,compile-max-autotune,cudagraphs,tensorrt; writes reports/baselines-<gpu>.md.")
    parser.add_argument("--precompile-jobs", type=int, default=8,
                        help="plain: --baselines compiles (torch.compile, TensorRT) run this many at a time first.")
    parser.add_argument("--jit-margin-s", type=float, default=240.0,
                        help="plain: start no --baselines compile with less than this left of --budget-s.")
    parser.add_argument("--sides", default="plain,harness", help="plain: which sides to measure this call (none: only render the reports from --state).")
    parser.add_argument("--bracket", action="store_true",
                        help="plain: the eager references only, task by task: plain loop, harness (one at a time), "
                             "plain loop again; writes reports/fidelity-bracket-<gpu>.md. Use its own --state.")
    parser.add_argument("--eager-only", action="store_true",
                        help="plain: the eager references alone on both sides (no solution imported or built): "
                             "separates the timing loop from the load of concurrent builds; use its own --state.")
    parser.add_argument("--interleaved", action="store_true",
                        help="plain: the plain loop and the harness in alternating rounds, the harness re-timing "
                             "each solution paired against its eager reference; per-task speedups with 95%% "
                             "intervals, canary and steal (fidelity_interleaved.py). Use its own --state.")
    parser.add_argument("--report-only", action="store_true",
                        help="interleaved: no device; rebuild the report from --state's measurements with "
                             "today's statistics.")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved: rounds of both sides.")
    parser.add_argument("--block-ms", type=float, default=100.0, help="interleaved: paired block length (ms).")
    parser.add_argument("--target-halfwidth", type=float, default=0.02,
                        help="interleaved: paired sampling stops once the 95%% interval is within this.")
    parser.add_argument("--min-pairs", type=int, default=5, help="interleaved: paired pairs at least.")
    parser.add_argument("--max-pairs", type=int, default=60, help="interleaved: paired pairs at most.")
    parser.add_argument("--paired-max-s", type=float, default=60.0,
                        help="interleaved: seconds of paired blocks per solution at most.")
    parser.add_argument("--plain-repeats", type=int, default=2, help="plain: do_bench calls per model.")
    parser.add_argument("--warmup-ms", type=float, default=500.0, help="plain and pike: warm-up budget (ms).")
    parser.add_argument("--rep-ms", type=float, default=2000.0, help="plain and pike: repetition budget (ms).")
    parser.add_argument("--warm-jobs", type=int, default=8,
                        help="plain: solutions built in parallel before any timing (0: build while timing).")
    parser.add_argument("--margin-s", type=float, default=45.0,
                        help="plain: start no new measurement with less than this left of --budget-s.")
    args = parser.parse_args()
    args.device = args.device or default_device()
    folder = args.solutions or DEFAULT_SOLUTIONS
    if not folder.is_dir():
        parser.error(f"no solutions folder {folder}: give --solutions DIR")
    suite = load_suite(REPO / "tasks" / args.suite, origin="benchmarks")
    wanted = {int(t) for t in args.tasks.split(",")} if args.tasks else None
    work = solutions(folder, suite, wanted)
    if not work:
        parser.error(f"no solution in {folder} names a task of {args.suite}")
    if args.device == "cpu":  # small tensors on a few shared cores: threads only contend
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    if args.compare == "evaluators":
        return compare_evaluators(args, folder, work)
    if args.interleaved:
        import fidelity_interleaved

        return fidelity_interleaved.run(args, work, workdir(args, "fidelity"))
    return compare_plain(args, folder, work)


if __name__ == "__main__":
    sys.exit(main())
