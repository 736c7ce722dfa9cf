"""Why launch-bound models read slower in the harness's candidate process: one model, many configurations, in turns.

On an H100 (2026-11-28) launch-bound eager references and solutions read 1.2-3.7x slower in the
harness than in the plain loop, while compute-bound ones agreed within 1-3 %. This times the same
eager reference (``--tasks``, default level3-pike 4 and 20) in each configuration below, each once
per round, rounds interleaved (A B C ... A B C ...) so that drift of the host falls on all alike:

* ``plain``: ``plain_loop.py`` in its own process (do_bench; nothing from pike_harness);
* ``loop``: one process of our own, no engine and no sandbox: do_bench, then our ``TimedLoop`` under
  the pike protocol, on one model object (``timing_overhead.in_process``). ``loop/do_bench`` against
  ``plain`` is the process; ``loop/timed`` against ``loop/do_bench`` is the loop's own code path.
  The process runs both twice and reports the second, warm run, then reads the harness's noise
  canary (the launch-bound probe the harness configurations read in the candidate's process: the
  two readings compare launch latency in and out of the harness directly);
* ``loop-hooks``: the same with the reference guard's audit hook installed first (as the candidate's
  process has it) and a second hook counting the audit events of the reported run (``audit_events``,
  its module load included);
* ``harness``: a ``local`` evaluator alone, sandboxed, defaults (``--protocol pike``, same budgets);
* ``unsandboxed``: the same without bubblewrap (``perf_common.CONFIGS``);
* ``no-seccomp``: sandboxed, the system-call filter off. The product has no switch for it: this
  benchmark makes ``seccomp.supported()`` answer False in its own process (no ``--seccomp`` is passed
  to bwrap); ``seccomp_patched_calls`` in the JSON shows the patch was reached;
* ``no-police``: sandboxed, the supervisor's policing of the candidate off (``Evaluation._police``,
  every 0.25 s while it waits for the candidate, timing included: a scan of /proc and a read of each
  member's ``/proc/PID/smaps_rollup``, which walks the CUDA process's whole address space under its
  mmap lock). No switch either: patched in this process to act only on an abort
  (``police_skipped`` counts the skipped rounds);
* ``no-prestart``: sandboxed, no pre-started processes (two fewer CUDA contexts on the GPU);
* ``helpers-stopped`` / ``helpers-running``: the harness alone beside ``--helpers`` idle processes that
  each hold a context on the same device (torch imported, a small tensor allocated, blocked on a
  pipe), SIGSTOPped for the whole evaluation (the quiet rule's state; they are idle anyway) or not;
* ``batch-stop`` / ``batch-cores``: the harness timing the same references as search-time readings, in
  one batch with ``--batch`` other level3-pike eager references, all submitted at once at the default
  concurrency (as a search or the interleaved benchmark submits them), the quiet rule in its default
  ``stop`` mode or in ``cores`` mode (nothing stopped; the timed process alone on its kept core).
  Against ``harness`` (alone), this is what a busy engine does to a launch-bound reading.

Each evaluator is made and closed around its own measurement, so no configuration's processes
(pre-started ones, the reference process) sit on the GPU during another's. The harness's figure is
the result's ``runtime.mean_ms`` (the pike protocol's mean) and ``runtime.median_ms``. Prints, and
writes to ``--out`` (``diag_launch_overhead.{json,md}``), per task and configuration the median over
the rounds of the means and of the medians, and the ratio of each to ``plain``'s. A diagnosis tool:
it claims nothing, it points at the configuration that carries the slowdown.

  python3 benchmarks/diag_launch_overhead.py --out OUT [--rounds 3] [--helpers 12]
  python3 benchmarks/diag_launch_overhead.py --device cpu --tasks 4 --rounds 1 --helpers 1 --warmup-ms 1 --rep-ms 5
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fidelity_runs import plain_options, run_plain  # noqa: E402
from perf_common import (  # noqa: E402
    Budget,
    arguments,
    default_device,
    fmt,
    make_evaluator,
    suite,
    summary,
    task,
    workdir,
    write,
)

from pike_harness.errors import UserError  # noqa: E402 - after perf_common put src on the path

CONFIGS = ("plain", "loop", "loop-hooks", "harness", "unsandboxed", "no-seccomp", "no-police", "no-prestart",
           "helpers-stopped", "helpers-running", "batch-stop", "batch-cores")
# configuration -> the perf_common.CONFIGS entry its evaluator is made in (the others run no evaluator)
EVALUATOR_CONFIG = {"harness": "ours", "unsandboxed": "unsandboxed", "no-seccomp": "ours", "no-police": "ours",
                    "no-prestart": "no-prestart", "helpers-stopped": "ours", "helpers-running": "ours",
                    "batch-stop": "ours", "batch-cores": "ours"}
# configuration -> engine options it adds to its perf_common entry
EVALUATOR_EXTRA: dict[str, dict[str, Any]] = {"batch-cores": {"quiet_mode": "cores"}}
INNER_MARK = "DIAG_RESULT "
HELPER = ("import sys, torch; keep = torch.ones(16, device=sys.argv[1]); "
          "torch.cuda.synchronize() if keep.is_cuda else None; print('ready', flush=True); sys.stdin.read()")


# -- the in-process figures (loop, loop-hooks), each in a process of its own ----------------------------
def inner(task_ref: str, device: str, warmup_ms: float, rep_ms: float, hooks: bool) -> dict[str, Any]:
    """do_bench and TimedLoop on one model in this process, run twice: the second run's figures, so that
    imports and first-call compiles are behind (``hooks``: under the reference guard's audit hook, and
    a second hook counting the audit events the second run raises: its module load, then the timing).
    Then the harness's noise canary, read here as the candidate's process reads it around a timing."""
    from timing_overhead import in_process

    events, counting = [0], [False]
    if hooks:
        import pike_harness.worker.inside.reference_guard  # noqa: F401 - installs the candidate process's audit hook

        def count(event: str, args: tuple) -> None:
            if counting[0]:
                events[0] += 1

        sys.addaudithook(count)
    in_process(task(task_ref), device, warmup_ms, rep_ms)
    counting[0] = True
    out: dict[str, Any] = dict(in_process(task(task_ref), device, warmup_ms, rep_ms))
    counting[0] = False
    import torch

    from pike_harness.worker.inside.canary import Canary

    canary = Canary(torch.device(device))  # the harness's launch-bound probe, here outside the harness
    out["canary_ms"] = statistics.median(canary.read() for _ in range(5))
    if hooks:
        out["audit_events"] = events[0]
    return out


def plain_times(ref: str, device: str, warmup_ms: float, rep_ms: float, timeout_s: float) -> dict[str, Any]:
    """``plain_loop.py`` on the eager reference alone, in its own process: its mean and median ms."""
    task_obj = task(ref)
    result = run_plain(["--reference", str(task_obj.path), "--repeats", "1", "--warmup-ms", str(warmup_ms),
                        "--rep-ms", str(rep_ms), *plain_options(task_obj, device)], timeout_s, None)
    if not result.get("eager_ms"):
        return {"error": f"{result.get('verdict')}: {result.get('reason', '')}"[:300]}
    return {"mean": result["eager_ms"][0], "median": result["eager_median_ms"][0]}


def run_inner(task_ref: str, device: str, warmup_ms: float, rep_ms: float, hooks: bool, timeout_s: float) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--inner", task_ref, "--device", device, "--warmup-ms", str(warmup_ms),
            "--rep-ms", str(rep_ms)] + (["--hooks"] if hooks else [])
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=max(5.0, timeout_s))
    except subprocess.TimeoutExpired:
        return {"error": "timeout"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(INNER_MARK):
            return json.loads(line[len(INNER_MARK):])
    return {"error": f"exit {done.returncode}: {done.stderr.strip()[-400:]}"}


# -- the helpers: idle processes holding a context on the device ---------------------------------------
@contextlib.contextmanager
def helpers(count: int, device: str, timeout_s: float = 180.0) -> Iterator[list[subprocess.Popen]]:
    """``count`` idle processes, each with a small tensor on ``device``, ready when the block starts;
    ended (stdin closed, then killed if still there) when it ends."""
    procs = [subprocess.Popen([sys.executable, "-c", HELPER, device], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True) for _ in range(count)]
    try:
        deadline = time.monotonic() + timeout_s
        for proc in procs:
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready or proc.stdout.readline().strip() != "ready":  # a line, or end of file when it died
                raise RuntimeError(f"a helper process did not start within {timeout_s:g} s (exit {proc.poll()})")
        yield procs
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
            with contextlib.suppress(OSError):
                assert proc.stdin is not None
                proc.stdin.close()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def process_state(pid: int) -> str | None:
    """The state letter of ``/proc/PID/stat`` (T: stopped), None when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()[0]


@contextlib.contextmanager
def stopped(procs: list[subprocess.Popen]) -> Iterator[None]:
    """SIGSTOP every helper for the block (as the quiet rule stops our other processes), SIGCONT after.
    The block starts once each is seen stopped (a signal is delivered asynchronously)."""
    from pike_harness.worker.supervise import process_tree

    pids = [proc.pid for proc in procs]
    process_tree.signal_trees(pids, signal.SIGSTOP)
    if process_tree.wait_stopped(pids, 30.0):  # the engine's own wait: every thread seen stopped
        raise RuntimeError("a helper process did not stop within 30 s")
    try:
        yield
    finally:
        for proc in procs:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)


@contextlib.contextmanager
def seccomp_off(counter: list[int]) -> Iterator[None]:
    """The sandbox without its system-call filter, from this process only: ``seccomp.supported()``
    answers False (so ``program_fd`` yields None and bwrap gets no ``--seccomp``); ``counter`` counts
    the answers, the proof that the patch was reached."""
    from pike_harness.worker.supervise import seccomp

    original = seccomp.supported

    def patched() -> bool:
        counter[0] += 1
        return False

    seccomp.supported = patched
    try:
        yield
    finally:
        seccomp.supported = original


@contextlib.contextmanager
def police_off(counter: list[int]) -> Iterator[None]:
    """The supervisor without its periodic policing (process, thread, memory and disk limits), from this
    process only; an abort is still acted on. ``counter`` counts the rounds skipped."""
    from pike_harness.worker.supervise.supervisor import Evaluation

    original = Evaluation._police

    def patched(evaluation: Any) -> None:
        if evaluation._aborted.is_set():
            original(evaluation)
            return
        counter[0] += 1

    Evaluation._police = patched  # type: ignore[method-assign]
    try:
        yield
    finally:
        Evaluation._police = original  # type: ignore[method-assign]


# -- the harness's figures -------------------------------------------------------------------------------
def eager_request(ref: str) -> Any:
    """The request that times ``ref``'s eager reference as a candidate (no hidden input sets)."""
    task_obj = task(ref)
    return task_obj.eval_request(task_obj.source, baseline_mode="eager", hidden_input_sets=0)


def figures_of(result: Any) -> dict[str, Any]:
    """One result's timing figures and noise readings, or its category and reason."""
    runtime = result.runtime
    out = ({"mean": runtime.mean_ms, "median": runtime.median_ms, "min": runtime.min_ms, "n": runtime.n,
            "cv": runtime.cv, "flags": list(result.flags or []), **noise_of(result)}
           if runtime is not None else {"error": f"{result.category}: {(result.reason or '')[:300]}"})
    if result.environment and result.environment.get("torch"):
        out["environment"] = {k: result.environment.get(k) for k in ("gpu", "torch", "triton", "cuda")}
    return out


def harness_times(config: str, task_refs: list[str], device: str, params: dict[str, float], folder: Path,
                  timeout_s: float, others: list[str] | None = None) -> dict[str, dict[str, Any]]:
    """One evaluator in ``config``, made for this measurement; task -> its mean and median ms (or the
    category and reason). Without ``others`` each task's eager reference is evaluated alone, one after
    the other; with them, the tasks and ``others`` are submitted at once and only the tasks are read."""
    evaluator = make_evaluator(EVALUATOR_CONFIG[config], device, "pike", folder, None, protocol_params=params,
                               **EVALUATOR_EXTRA.get(config, {}))
    out: dict[str, dict[str, Any]] = {}
    try:
        if others is None:
            for ref in task_refs:
                out[ref] = figures_of(evaluator.submit(eager_request(ref)).result(timeout=max(5.0, timeout_s)))
        else:
            started = time.monotonic()
            futures = {ref: evaluator.submit(eager_request(ref)) for ref in [*task_refs, *others]}
            results = {ref: future.result(timeout=max(5.0, timeout_s - (time.monotonic() - started)))
                       for ref, future in futures.items()}
            wall = round(time.monotonic() - started, 1)
            for ref in task_refs:
                out[ref] = {**figures_of(results[ref]), "batch": len(futures), "batch_wall_s": wall}
    finally:
        evaluator.close()
    return out


def noise_of(result: Any) -> dict[str, Any]:
    """The noise canary (a launch-bound probe timed in the candidate's own process, before and after
    the timing) and the host's steal share: how launch-bound work fared in that process; and the SM
    clock before and after the timing (a GPU idling between launches may clock down)."""
    clocks = (result.environment or {}).get("gpu_clocks") or {}
    out: dict[str, Any] = {"sm_mhz": [(clocks.get(when) or {}).get("sm_mhz") for when in ("before", "after")]}
    noise = getattr(result, "noise", None)
    if noise is not None:
        readings = [v for v in (noise.canary_before_ms, noise.canary_after_ms) if v is not None]
        out.update(canary_ms=statistics.fmean(readings) if readings else None, steal=noise.steal_fraction)
    return out


def measure_round(configs: list[str], task_refs: list[str], device: str, params: dict[str, float], helper_count: int,
                  folder: Path, budget: Budget, patched: dict[str, list[int]],
                  others: list[str] | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """One round: every configuration once, in order; config -> task -> figures. Stops at the budget."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    warmup_ms, rep_ms = params["warmup_ms"], params["rep_ms"]
    held = contextlib.ExitStack()  # the helpers, started for the first helpers-* configuration, ended after the last
    procs: list[subprocess.Popen] = []
    try:
        for config in configs:
            if budget.over(20):
                break
            if not config.startswith("helpers-"):
                held.close()
                procs = []
            if config == "plain":
                out[config] = {ref: plain_times(ref, device, warmup_ms, rep_ms, budget.left()) for ref in task_refs}
            elif config in ("loop", "loop-hooks"):
                out[config] = {ref: run_inner(ref, device, warmup_ms, rep_ms, config == "loop-hooks", budget.left())
                               for ref in task_refs}
            else:
                try:
                    if config.startswith("helpers-") and not procs:
                        procs = held.enter_context(helpers(helper_count, device))
                    with contextlib.ExitStack() as around:
                        if config == "helpers-stopped":
                            around.enter_context(stopped(procs))
                        if config == "no-seccomp":
                            around.enter_context(seccomp_off(patched["seccomp"]))
                        if config == "no-police":
                            around.enter_context(police_off(patched["police"]))
                        out[config] = harness_times(config, task_refs, device, params, folder / config, budget.left(),
                                                    (others or []) if config.startswith("batch-") else None)
                except Exception as exc:  # noqa: BLE001 - one configuration's failure is a row, not the end
                    out[config] = {ref: {"error": f"{type(exc).__name__}: {exc}"[:300]} for ref in task_refs}
    finally:
        held.close()
    return out


# -- the report --------------------------------------------------------------------------------------------
def figures(rounds: list[dict[str, Any]], config: str, ref: str) -> dict[str, list[float]]:
    """Every round's figures of ``config`` on ``ref``, by statistic (``loop*`` give do_bench and timed)."""
    keys = {"loop": ("plain", "loop"), "loop-hooks": ("plain", "loop")}.get(config)
    names = {"plain": "do_bench", "loop": "timed"}
    out: dict[str, list[float]] = {}
    for round_ in rounds:
        cell = round_.get(config, {}).get(ref) or {}
        for key in keys or ("mean", "median"):
            if isinstance(cell.get(key), (int, float)):
                out.setdefault(names[key] if keys else key, []).append(float(cell[key]))
    return out


def rows_of(rounds: list[dict[str, Any]], configs: list[str], task_refs: list[str]) -> list[dict[str, Any]]:
    rows = []
    for ref in task_refs:
        plain = figures(rounds, "plain", ref)
        base = {stat: statistics.median(values) for stat, values in plain.items() if values}
        for config in configs:
            for stat, values in figures(rounds, config, ref).items():
                med = statistics.median(values)
                against = base.get(stat if stat in base else "mean")
                errors = [r.get(config, {}).get(ref, {}).get("error") for r in rounds]
                events = [r.get(config, {}).get(ref, {}).get("audit_events") for r in rounds]
                canary = [r.get(config, {}).get(ref, {}).get("canary_ms") for r in rounds]
                clocks = [mhz for r in rounds for mhz in r.get(config, {}).get(ref, {}).get("sm_mhz") or [] if mhz]
                rows.append({"task": ref, "config": config, "stat": stat, "values": values, "median_ms": med,
                             "spread": summary(values).get("cv"), "ratio_to_plain": med / against if against else None,
                             "errors": [e for e in errors if e], "audit_events": [e for e in events if e is not None],
                             "canary_ms": [c for c in canary if c is not None], "sm_mhz": clocks})
        for config in configs:  # a configuration that never gave a figure still shows, with its errors
            if not any(r["task"] == ref and r["config"] == config for r in rows):
                errors = [r.get(config, {}).get(ref, {}).get("error") for r in rounds]
                rows.append({"task": ref, "config": config, "stat": "-", "values": [], "median_ms": None,
                             "spread": None, "ratio_to_plain": None, "errors": [e for e in errors if e],
                             "audit_events": []})
    return rows


def markdown(rows: list[dict[str, Any]], setup: dict[str, Any]) -> str:
    lines = [f"## Launch overhead, configuration by configuration ({setup['device_name']}, {setup['date']})", "",
             f"Eager references, {setup['rounds_done']} of {setup['rounds']} rounds, each configuration once per round "
             f"in turns; warm-up {setup['warmup_ms']:g} ms, rep {setup['rep_ms']:g} ms; {setup['helpers']} helper "
             "processes. Median over the rounds; ratio to the plain loop's median of the same statistic "
             "(do_bench/timed: to its mean). See benchmarks/diag_launch_overhead.py for what each configuration "
             "changes.", "",
             "| task | configuration | statistic | median ms | ratio to plain | spread (CV) | rounds | notes |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        notes = []
        if row.get("canary_ms"):
            notes.append(f"noise canary {statistics.median(row['canary_ms']):.4g} ms")
        if row.get("sm_mhz"):
            notes.append(f"SM clock {min(row['sm_mhz'])}-{max(row['sm_mhz'])} MHz")
        if row["audit_events"]:
            notes.append(f"audit events in the counted run (module load included): {max(row['audit_events'])}")
        if row["errors"]:
            notes.append(f"errors: {row['errors'][0][:120]}")
        lines.append(f"| {row['task']} | {row['config']} | {row['stat']} | {fmt(row['median_ms'], 4)} | "
                     f"{fmt(row['ratio_to_plain'])} | {fmt(row['spread'])} | {len(row['values'])} | "
                     f"{'; '.join(notes).replace('|', '/')} |")
    if setup.get("seccomp_patched_calls") is not None:
        lines += ["", f"no-seccomp: the filter was asked for {setup['seccomp_patched_calls']} times and withheld."]
    if setup.get("police_skipped") is not None:
        lines += ["", f"no-police: {setup['police_skipped']} policing rounds skipped."]
    return "\n".join(lines) + "\n"


def report(args: argparse.Namespace, device: str, configs: list[str], task_refs: list[str],
           rounds: list[dict[str, Any]], patched: dict[str, list[int]]) -> None:
    """The JSON and markdown of the rounds so far, in ``args.out``."""
    env = next((cell["environment"] for r in rounds for c in r.values() for cell in c.values()
                if isinstance(cell, dict) and cell.get("environment")), {})
    setup = {"device": device, "device_name": env.get("gpu") or device, "environment": env,
             "date": time.strftime("%Y-%m-%d"), "rounds": args.rounds, "rounds_done": len(rounds),
             "helpers": args.helpers, "tasks": task_refs, "configs": configs, "warmup_ms": args.warmup_ms,
             "rep_ms": args.rep_ms,
             "seccomp_patched_calls": patched["seccomp"][0] if "no-seccomp" in configs else None,
             "police_skipped": patched["police"][0] if "no-police" in configs else None}
    rows = rows_of(rounds, configs, task_refs)
    write(args.out, "diag_launch_overhead", {"setup": setup, "rows": rows, "rounds": rounds}, markdown(rows, setup))


def main() -> int:
    parser = arguments(__doc__.split("\n\n")[0], budget_s=480.0)
    parser.add_argument("--tasks", default="level3-pike/4,level3-pike/20",
                        help="suite/id of each eager reference (an id alone means level3-pike).")
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"Which of {', '.join(CONFIGS)}, in round order.")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--helpers", type=int, default=12, help="Idle processes holding a device context (helpers-*).")
    parser.add_argument("--batch", type=int, default=16,
                        help="Other level3-pike eager references submitted with the tasks (batch-*).")
    parser.add_argument("--warmup-ms", type=float, default=50.0)
    parser.add_argument("--rep-ms", type=float, default=150.0)
    parser.add_argument("--inner", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--hooks", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    device = args.device or default_device()
    if args.inner:
        print(INNER_MARK + json.dumps(inner(args.inner, device, args.warmup_ms, args.rep_ms, args.hooks)), flush=True)
        return 0
    task_refs = [ref if "/" in ref else f"level3-pike/{ref}" for ref in args.tasks.split(",") if ref]
    configs = [c for c in args.configs.split(",") if c]
    unknown = sorted(set(configs) - set(CONFIGS))
    if unknown:
        parser.error(f"unknown configuration(s) {', '.join(unknown)}; known: {', '.join(CONFIGS)}")
    try:
        for ref in task_refs:
            task(ref)
    except (UserError, ValueError) as exc:  # an unknown suite or id, or an id that is no number
        parser.error(f"--tasks: {exc}")
    if args.batch < 0:
        parser.error("--batch must be at least 0")
    taken = {ref.rpartition("/")[2] for ref in task_refs if ref.startswith("level3-pike/")}
    others = [f"level3-pike/{t.id}" for t in suite("level3-pike").tasks() if str(t.id) not in taken][:args.batch]
    budget = Budget(args.budget_s)
    params = {"warmup_ms": args.warmup_ms, "rep_ms": args.rep_ms}
    base = workdir(args, "diag").resolve()
    patched: dict[str, list[int]] = {"seccomp": [0], "police": [0]}
    rounds: list[dict[str, Any]] = []
    for index in range(args.rounds):
        if budget.over(30):
            print(f"[diag] stopped at the budget after {index} round(s)", flush=True)
            break
        rounds.append(measure_round(configs, task_refs, device, params, args.helpers, base, budget, patched, others))
        print(f"[diag] round {index + 1}: {json.dumps(rounds[-1], default=str)[:2000]}", flush=True)
        report(args, device, configs, task_refs, rounds, patched)  # after every round: a kill keeps what ended
    if not rounds:
        report(args, device, configs, task_refs, rounds, patched)
    return 0


if __name__ == "__main__":
    sys.exit(main())
