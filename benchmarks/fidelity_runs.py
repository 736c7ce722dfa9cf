"""The two sides of the fidelity benchmark, resumable: the harness and the independent plain loop.

Every finished measurement is one line of ``fidelity.jsonl`` in the state folder, appended and
flushed as it ends, keyed by what it measured (``harness|pike|all|task_2.py``,
``harness|pike|all|eager:2``, ``plain|2``, ``plainwarm|task_2.py``). A later call with the same
state folder skips what is there, so a run cut into 10-minute calls finishes where it stopped.
``pike_audit.py`` reads the same lines.
"""

from __future__ import annotations

import concurrent.futures
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from perf_common import REPO, Budget, JsonlState, md_cell, request

from pike_harness.contracts.evaluation import EvaluatorError, EvaluatorOptions

PLAIN_LOOP = Path(__file__).resolve().parent / "plain_loop.py"
STATE_FILE = "fidelity.jsonl"
TOLERANCE = {"pike": 0.05, "robust": 0.03}  # issue 16: pike means within 5 %, robust medians within 3 %
STAT = {"pike": "mean_ms", "robust": "median_ms"}  # what each protocol's figure is compared with


class State(JsonlState):
    """The fidelity measurements finished so far (``fidelity.jsonl``)."""

    def __init__(self, folder: Path):
        super().__init__(folder, STATE_FILE)


def cache_token(cache: Path | None) -> str | None:
    """The identity of a build/JIT cache folder (a random token written into it once). Warming rows carry
    it: the state travels between device calls, the caches do not (a fresh machine starts empty), so a
    solution warmed on another machine must be warmed again, or its plain timing run pays the builds."""
    if cache is None:
        return None
    marker = cache / ".cache-token"
    if not marker.exists():
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(os.urandom(8).hex(), encoding="utf-8")
    return marker.read_text(encoding="utf-8").strip()


def warmed_here(state: State, key: str, token: str | None) -> bool:
    """Whether ``key`` (a warm or precompile row) filled the cache this call uses."""
    row = state.get(key)
    return row is not None and row.get("cache") == token


def cache_environment(cache: Path | None, solution: str) -> dict[str, str]:
    """Extension, Triton and Inductor caches of the plain loop's processes (kept between calls). Each
    solution builds its extensions in a folder of its own: two files may use one extension name."""
    if cache is None:
        return {}
    return {"TORCH_EXTENSIONS_DIR": str(cache / "plain" / "torch_extensions" / Path(solution).stem),
            "TRITON_CACHE_DIR": str(cache / "plain" / "triton"),
            "TORCHINDUCTOR_CACHE_DIR": str(cache / "plain" / "inductor")}


def run_plain(args: list[str], timeout_s: float, cache: Path | None, script: Path = PLAIN_LOOP) -> dict[str, Any]:
    """One plain-loop (or ``pike_probes``) process; its ``PLAIN_RESULT`` line, or what went wrong with it."""
    solution = args[args.index("--solution") + 1] if "--solution" in args else "none"
    env = {**os.environ, **cache_environment(cache, solution)}
    ours = {str(REPO / "src"), str(REPO / "plugins"), "src", "plugins"}  # the independent side never sees pike_harness
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p.rstrip("/") not in ours
             and Path(p).resolve() not in {REPO / "src", REPO / "plugins"}]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    began = time.monotonic()
    try:
        done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                              timeout=max(1.0, timeout_s), env=env, cwd=str(REPO))
    except subprocess.TimeoutExpired:
        return {"verdict": "timeout", "seconds": time.monotonic() - began}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("PLAIN_RESULT "):
            return {**json.loads(line[len("PLAIN_RESULT "):]), "seconds": time.monotonic() - began}
    return {"verdict": "crashed", "reason": f"exit {done.returncode}: {done.stderr[-600:]}",
            "seconds": time.monotonic() - began}


def run_plain_within(args: list[str], budget: Budget, margin_s: float, cache: Path | None,
                     script: Path = PLAIN_LOOP) -> dict[str, Any]:
    """run_plain from a pool: its limit is what the budget leaves when it starts, not when it was queued
    (and it does not start at all with less than ``margin_s`` left)."""
    left = budget.left() - margin_s
    if left <= 0:
        return {"verdict": "timeout", "reason": "not started: the budget is spent"}
    return run_plain(args, left, cache, script)


def plain_phase(work: list[tuple[Any, Path]], state: State, device: str, settings: dict[str, Any],
                budget: Budget, cache: Path | None, warm_jobs: int, margin_s: float, log: Any = print,
                eager_only: bool = False) -> bool:
    """Warm every solution in parallel (builds), then check and time each task in its own process, one
    at a time (``eager_only``: the references alone, no solution imported). Returns False when the
    budget stopped it."""
    if not eager_only:
        warm_solutions([(t, p) for t, p in work if not state.done(f"plain|{t.id}")], state, device, budget, cache,
                       warm_jobs, margin_s, log)
    for task, path in work:
        key = f"plain|{task.id}"
        if state.done(key):
            continue
        if budget.left() < margin_s:
            log("[fidelity] plain loop: stopped at the budget")
            return False
        solution = [] if eager_only else ["--solution", str(path)]
        result = run_plain(["--reference", str(task.path), *solution, "--repeats",
                            str(settings["repeats"]), "--warmup-ms", str(settings["warmup_ms"]), "--rep-ms",
                            str(settings["rep_ms"]), *plain_options(task, device)], min(600.0, budget.left() - 5), cache)
        if result.get("verdict") == "timeout":
            log(f"[fidelity] plain loop: task {task.id} ran past the budget")
            return False
        log(f"[fidelity] plain {task.id}: {result.get('verdict')} eager {result.get('eager_ms')} "
            f"solution {result.get('solution_ms')}")
        state.add({"key": key, "kind": "plain", "file": path.name, "task": task.id, "settings": settings, **result})
    return True


def plain_options(task: Any, device: str) -> list[str]:
    """The plain loop's device and the task's tolerances, as the harness uses (level3-pike: PIKE's 1e-2)."""
    return ["--device", device, "--atol", str(task.meta.atol), "--rtol", str(task.meta.rtol)]


def warm_solutions(work: list[tuple[Any, Path]], state: Any, device: str, budget: Budget, cache: Path | None,
                   warm_jobs: int, margin_s: float, log: Any = print) -> None:
    """Import, build and call each solution once in a plain-loop process, ``warm_jobs`` at a time, so its
    extension and JIT builds are cached before any timing (skipping those this cache already holds)."""
    token = cache_token(cache)
    to_warm = [(task, path) for task, path in work if not warmed_here(state, f"plainwarm|{path.name}", token)]
    if not to_warm or warm_jobs <= 0:
        return
    log(f"[fidelity] plain loop: warming {len(to_warm)} solutions, {warm_jobs} at a time")
    with concurrent.futures.ThreadPoolExecutor(warm_jobs) as pool:
        futures = {pool.submit(run_plain_within, ["--reference", str(task.path), "--solution", str(path),
                                                  "--warm-only", *plain_options(task, device)], budget, margin_s,
                               cache): (task, path) for task, path in to_warm}
        for future in concurrent.futures.as_completed(futures):
            task, path = futures[future]
            result = future.result()
            if result.get("verdict") != "timeout":  # a timeout is the budget: warm it next call
                state.add({"key": f"plainwarm|{path.name}", "kind": "plainwarm", "file": path.name,
                           "task": task.id, "cache": token, **result})


def harness_requests(work: list[tuple[Any, Path]], protocol: str, concurrency: str, state: State,
                     modes: list[str] | None = None, device: str = "cuda",
                     eager_only: bool = False) -> list[tuple[str, Any, Any]]:
    """(key, task, request) of each eager reference and solution not yet measured this way; with
    ``modes``, of each reference in those baseline modes instead (``pikeh baselines``'s requests). A
    mode that cannot run here (TensorRT not installed) is recorded as ``unavailable`` with the reason."""
    from pike_harness.worker.inside.baseline_modes import unavailable

    todo = []
    for task, _path in work if modes else []:
        for mode in modes:
            key = f"harness|{protocol}|{concurrency}|mode:{mode}:{task.id}"
            why = unavailable(mode, device)
            if why and not state.done(key):
                state.add({"key": key, "kind": "harness", "task": task.id, "category": "unavailable", "reason": why})
            elif not state.done(key):
                todo.append((key, task, task.eval_request(task.source, baseline_mode=mode, hidden_input_sets=0)))
    for task, path in [] if modes else work:
        eager_key = f"harness|{protocol}|{concurrency}|eager:{task.id}"
        if not state.done(eager_key):
            todo.append((eager_key, task, task.eval_request(task.source, baseline_mode="eager",
                                                             hidden_input_sets=0)))
        key = f"harness|{protocol}|{concurrency}|{path.name}"
        if not eager_only and not state.done(key):
            todo.append((key, task, request(task, path.read_text(encoding="utf-8"))))
    return todo


def harness_row(key: str, task: Any, result: Any, together: int) -> dict[str, Any]:
    runtime = result.runtime
    return {"key": key, "kind": "harness", "task": task.id, "category": result.category, "check": result.check,
            "reason": (result.reason or "")[:400], "flags": list(result.flags or []),
            "runtime_ms": result.runtime_ms, "mean_ms": runtime.mean_ms if runtime else None,
            "median_ms": runtime.median_ms if runtime else None, "cv": runtime.cv if runtime else None,
            "n": runtime.n if runtime else None, "submitted_together": together,
            "environment": {k: result.environment.get(k) for k in ("gpu", "torch", "triton", "cuda", "host")}}


def harness_phase(work: list[tuple[Any, Path]], state: State, device: str, protocol: str, concurrency: str,
                  settings: dict[str, Any], budget: Budget, cache: Path | None, workdir: Path, jobs: int | None,
                  margin_s: float, log: Any = print, modes: list[str] | None = None, precompile_jobs: int = 8,
                  jit_margin_s: float = 240.0, eager_only: bool = False) -> bool:
    """The harness (a LocalEvaluator) on the eager references and the solutions (or, with ``modes``, on
    the references in those baseline modes): all submitted at once (``all``, as a run does) or one at a
    time (``serial``). Returns False when the budget stopped it."""
    from pikeh_local import LocalEvaluator

    todo = harness_requests(work, protocol, concurrency, state, modes, device, eager_only)
    if not todo:
        return True
    if budget.left() < margin_s:
        return False
    params = {"warmup_ms": settings["warmup_ms"], "rep_ms": settings["rep_ms"]} if protocol == "pike" else {}
    extra: dict[str, Any] = {"build_cache": str((cache or workdir) / "harness-cache")}
    if jobs:
        extra["jobs"] = jobs
    evaluator = LocalEvaluator(EvaluatorOptions(device=device, protocol=protocol, protocol_params=params,
                                                workdir=workdir / f"harness-{protocol}-{concurrency}",
                                                config=LocalEvaluator.Config(**extra)))
    what = f"baseline modes {','.join(modes)}" if modes else "eager references and solutions"
    log(f"[fidelity] harness {protocol}/{concurrency}: {len(todo)} evaluations ({what})")
    finished = True
    try:
        if modes and not precompile(evaluator, todo, state, budget, precompile_jobs, jit_margin_s, log):
            return False
        if concurrency == "all":
            futures = {evaluator.submit(req): (key, task) for key, task, req in todo}
            try:
                for future in concurrent.futures.as_completed(futures, timeout=max(1.0, budget.left() - 10)):
                    key, task = futures[future]
                    _record(state, key, task, future, len(todo), log)
            except concurrent.futures.TimeoutError:
                finished = False
                evaluator.abort([f for f in futures if not f.done()])
        else:
            for key, task, req in todo:
                if budget.left() < margin_s:
                    finished = False
                    break
                future = evaluator.submit(req)
                try:
                    future.result(timeout=max(1.0, budget.left() - 10))
                except concurrent.futures.TimeoutError:
                    evaluator.abort([future])
                    finished = False
                    break
                except Exception:  # noqa: BLE001 - recorded by _record
                    pass
                _record(state, key, task, future, 1, log)
    finally:
        evaluator.close()
    if not finished:
        log(f"[fidelity] harness {protocol}/{concurrency}: stopped at the budget")
    return finished


def precompile(evaluator: Any, todo: list[tuple[str, Any, Any]], state: State, budget: Budget, jobs: int,
               margin_s: float, log: Any = print) -> bool:
    """Compile the torch.compile/TensorRT baselines in parallel before anything is timed, as ``pikeh
    baselines`` does: max-autotune benchmarks kernels on the GPU while it compiles, which must not
    overlap a timing. Fills the evaluator's shared JIT cache, so the timed evaluations hit it. No new
    compile starts with less than ``margin_s`` left (one compile cannot be stopped halfway); each one
    finished is recorded, so a later call compiles only the rest. False when the budget stopped it."""
    from pike_harness.worker.inside.baseline_modes import JIT_MODES

    token = cache_token(Path(evaluator.options.config.build_cache))
    jit = [(key, req) for key, _task, req in todo
           if req.baseline_mode in JIT_MODES and not warmed_here(state, f"precompiled|{key}", token)]
    if not jit:
        return True
    log(f"[fidelity] precompiling {len(jit)} baselines, {jobs} at a time")
    pool = concurrent.futures.ThreadPoolExecutor(max(1, jobs))
    running: dict[Any, str] = {}
    stopped = False
    try:
        while jit or running:
            while jit and len(running) < jobs and not stopped:
                if budget.left() < margin_s:
                    stopped = True
                    break
                key, req = jit.pop(0)
                running[pool.submit(evaluator.precompile, [req], jobs=1)] = key
            if not running:
                break
            done, _ = concurrent.futures.wait(list(running), return_when=concurrent.futures.FIRST_COMPLETED)
            for future in done:
                key = running.pop(future)
                try:
                    warmed = future.result()
                except Exception as exc:  # noqa: BLE001 - the timed evaluation will report it
                    warmed = f"{type(exc).__name__}: {exc}"[:200]
                state.add({"key": f"precompiled|{key}", "kind": "precompiled", "warmed": warmed, "cache": token})
                log(f"[fidelity] precompiled {key}: {warmed}")
    finally:
        pool.shutdown(wait=True)
    return not stopped


def _record(state: State, key: str, task: Any, future: Any, together: int, log: Any) -> None:
    try:
        result = future.result(timeout=0)
    except Exception as exc:  # noqa: BLE001 - EvaluatorError or a killed evaluation: recorded, not fatal
        category = "evaluator_error" if isinstance(exc, EvaluatorError) else type(exc).__name__
        state.add({"key": key, "kind": "harness", "task": task.id, "category": category,
                   "reason": str(exc)[:400], "submitted_together": together})
        return
    row = harness_row(key, task, result, together)
    log(f"[fidelity] {key}: {row['category']} {row['runtime_ms']}")
    state.add(row)


# -- comparison -----------------------------------------------------------------------------------

def _plain_stats(times: list[float] | None, medians: list[float] | None = None) -> dict[str, Any] | None:
    """The plain loop's repeats: mean of their means (and of their medians, where do_bench gave them)."""
    if not times:
        return None
    known = [m for m in medians or [] if m == m]  # NaN: a Triton that returned the mean only
    return {"mean_ms": sum(times) / len(times), "min_ms": min(times), "max_ms": max(times), "repeats": times,
            "median_ms": sum(known) / len(known) if known else None}


def verdict(row: dict[str, Any] | None) -> str:
    if row is None:
        return "-"
    if row.get("kind") == "plain":
        return row.get("verdict", "-")
    return row["category"] + (f"/{row['check']}" if row.get("check") else "")


def compare(work: list[tuple[Any, Path]], state: State, protocol: str, concurrency: str) -> dict[str, Any]:
    """Per task: both verdicts, runtimes, speedups and harness/plain ratios; the summary."""
    tol, stat = TOLERANCE.get(protocol, 0.05), STAT.get(protocol, "mean_ms")
    rows = []
    for task, path in work:
        plain = state.get(f"plain|{task.id}")
        eager_h = state.get(f"harness|{protocol}|{concurrency}|eager:{task.id}")
        sol_h = state.get(f"harness|{protocol}|{concurrency}|{path.name}")
        eager_p = _plain_stats(*((plain.get("eager_ms"), plain.get("eager_median_ms")) if plain else (None,)))
        sol_p = _plain_stats(*((plain.get("solution_ms"), plain.get("solution_median_ms")) if plain else (None,)))
        row: dict[str, Any] = {"task": task.id, "name": task.name, "file": path.name, "harness": verdict(sol_h),
                               "plain": verdict(plain), "eager_harness": _timing(eager_h), "eager_plain": eager_p,
                               "solution_harness": _timing(sol_h), "solution_plain": sol_p}
        row["eager_ratio"] = _ratio(row["eager_harness"], eager_p, stat)
        row["solution_ratio"] = _ratio(row["solution_harness"], sol_p, stat)
        row["speedup_harness"] = _speedup(row["eager_harness"], row["solution_harness"], stat)
        row["speedup_plain"] = _speedup(eager_p, sol_p, stat if eager_p and eager_p.get(stat) else "mean_ms")
        row["misses"] = miss_reasons(row, tol)
        rows.append(row)
    ratios = [r for row in rows for r in (row["eager_ratio"], row["solution_ratio"]) if r is not None]
    summary = {"protocol": protocol, "concurrency": concurrency, "tolerance": tol, "statistic": stat,
               "tasks": len(rows), "verdicts_agree": sum(_agree(r) for r in rows if _both(r)),
               "verdicts_compared": sum(_both(r) for r in rows),
               "timed_in_both": len(ratios), "within_tolerance": sum(abs(r - 1) <= tol for r in ratios),
               "misses_explained": sum(bool(why) for r in rows for why in r["misses"].values()),
               "misses_unexplained": sum(not why for r in rows for why in r["misses"].values()),
               "geomean_harness_clamped": geomean([clamp(r["speedup_harness"]) for r in rows]),
               "geomean_plain_clamped": geomean([clamp(r["speedup_plain"]) for r in rows]),
               "geomean_harness_raw": geomean([r["speedup_harness"] for r in rows if r["speedup_harness"]]),
               "geomean_plain_raw": geomean([r["speedup_plain"] for r in rows if r["speedup_plain"]]),
               "missing": sum(r["harness"] == "-" or r["plain"] == "-" or not r["eager_harness"]
                              or not r["eager_plain"] for r in rows)}
    return {"summary": summary, "rows": rows}


HARNESS_CV_LIMIT = 0.10  # the bracket report's bound: calls spreading more were disturbed within the evaluation
UNEXPLAINED = "not explained by this measurement"


def measured_reasons(plain_move: float | None, plain_limit: float, plain_words: str,
                     harness_cv: float | None) -> list[str]:
    """What the same measurement shows that can put the harness off the plain loop: the plain loop moving
    against itself by more than ``plain_limit`` (``plain_words`` formats the fraction), or the harness's
    calls spreading with CV above 0.10 within one evaluation. Empty: neither, the miss stays unexplained.
    The fidelity table and the bracket table both name their misses with it, so a reason reads alike."""
    reasons = []
    if plain_move is not None and plain_move > plain_limit:
        reasons.append(plain_words.format(plain_move))
    if harness_cv is not None and harness_cv > HARNESS_CV_LIMIT:
        digits = 2 if round(harness_cv, 2) > HARNESS_CV_LIMIT else 4  # 0.1001 must not read "CV 0.10"
        reasons.append(f"the harness's calls spread with CV {harness_cv:.{digits}f} within one evaluation")
    return reasons


def plain_spread(plain: dict[str, Any] | None) -> float | None:
    """(max - min) / mean of the plain loop's repeats: how far it moves against itself in one sitting."""
    if not plain or not plain.get("mean_ms"):
        return None
    return (plain["max_ms"] - plain["min_ms"]) / plain["mean_ms"]


def miss_reasons(row: dict[str, Any], tol: float) -> dict[str, list[str]]:
    """For the eager and solution runtimes of a ``compare`` row whose ratio lies outside ``tol``: the
    measured reasons (an empty list: unexplained). The issue asks each miss to be named with its reason,
    not only marked."""
    out: dict[str, list[str]] = {}
    for side in ("eager", "solution"):
        ratio = row[f"{side}_ratio"]
        if ratio is None or abs(ratio - 1) <= tol:
            continue
        out[side] = measured_reasons(plain_spread(row[f"{side}_plain"]), tol,
                                     "the plain loop's own repeats spread {:.1%}",
                                     (row[f"{side}_harness"] or {}).get("cv"))
    return out


def miss_text(misses: dict[str, list[str]]) -> str:
    """The table cell: ``eager: ...; solution: ...``, each side's reasons joined by "and"."""
    return "; ".join(f"{side}: {' and '.join(why) or UNEXPLAINED}" for side, why in misses.items())


def _timing(row: dict[str, Any] | None) -> dict[str, Any] | None:
    if not row or row.get("category") != "correct" or row.get("mean_ms") is None:
        return None
    return {"mean_ms": row["mean_ms"], "median_ms": row["median_ms"], "cv": row.get("cv")}


def _ratio(harness: dict[str, Any] | None, plain: dict[str, Any] | None, stat: str) -> float | None:
    """Harness / plain, each side's statistic of the protocol (pike: means; robust: medians, the plain
    one from the same do_bench samples; its mean where the median is unknown)."""
    if not harness or not plain:
        return None
    return harness[stat] / (plain.get(stat) or plain["mean_ms"])


def _speedup(eager: dict[str, Any] | None, solution: dict[str, Any] | None, stat: str) -> float | None:
    return eager[stat] / solution[stat] if eager and solution else None


def _both(row: dict[str, Any]) -> bool:
    return "-" not in (row["harness"], row["plain"])


def _agree(row: dict[str, Any]) -> bool:
    return (row["harness"] == "correct") == (row["plain"] == "correct")


def clamp(speedup: float | None) -> float:
    """PIKE's suite score per task: max(1, s), and 1.0 when the solution is not correct."""
    return max(1.0, speedup) if speedup else 1.0


def geomean(values: list[float]) -> float | None:
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def triton_version() -> str | None:
    try:
        import triton

        return triton.__version__
    except ImportError:
        return None


def gpu_name(device: str, state: State) -> str:
    """The GPU's name from torch, or (rendering elsewhere, e.g. ``--sides none`` on a laptop) the one the
    plain loop recorded in the state; "cpu" for a CPU run."""
    import torch

    if device.startswith("cuda") and torch.cuda.is_available():
        return torch.cuda.get_device_name(torch.device(device))
    return recorded(state, "gpu") or ("unknown GPU" if device.startswith("cuda") else "cpu")


def torch_version(state: State) -> str:
    """The torch the measurements used, else this process's."""
    import torch

    return recorded(state, "torch") or torch.__version__


def recorded(state: State, name: str) -> Any:
    """The first value of ``name`` the measurements recorded: a plain-loop row has it at the top, a harness
    row in its ``environment``. Rendering on another machine must state what was measured there."""
    for row in state.rows.values():
        value = row.get(name) or (row.get("environment") or {}).get(name)
        if value:
            return value
    return None


def recorded_settings(state: State, kind: str, ids: set[int] | None = None) -> dict[str, Any] | None:
    """The warm-up/repetition settings the ``kind`` rows (of tasks ``ids``) were measured with; an error
    when they differ, since one report states one set."""
    found = {json.dumps(row["settings"], sort_keys=True) for row in state.rows.values()
             if row.get("kind") == kind and row.get("settings") and (ids is None or row.get("task") in ids)}
    if len(found) > 1:
        raise SystemExit(f"the state mixes {kind} settings {sorted(found)}: render them apart (--tasks)")
    return json.loads(found.pop()) if found else None


def gpu_slug(name: str) -> str:
    slug = "".join(c if c.isalnum() else "-" for c in name.lower())
    while "--" in slug:
        slug = slug.replace("--", "-")
    return slug.strip("-") or "cpu"


def markdown(comparisons: list[dict[str, Any]], setup: dict[str, Any]) -> str:
    def ms(value: float | None) -> str:
        return f"{value:.4g}" if value is not None else "-"

    def cell(timing: dict[str, Any] | None, stat: str) -> str:
        if not timing:
            return "-"
        if "cv" in timing:
            return f"{ms(timing[stat])} (mean {ms(timing['mean_ms'])}, CV {ms(timing['cv'])})"
        spread = "" if timing["min_ms"] == timing["max_ms"] else f" [{ms(timing['min_ms'])}-{ms(timing['max_ms'])}]"
        if stat == "median_ms" and timing.get("median_ms") is not None:
            return f"{ms(timing['median_ms'])} (mean {ms(timing['mean_ms'])}{spread})"
        return f"{ms(timing['mean_ms'])}{spread}"

    def ratio(value: float | None, tol: float) -> str:
        if value is None:
            return "-"
        return f"{value:.3f}" + ("" if abs(value - 1) <= tol else " **!**")

    lines = [f"# Fidelity: pike-harness against a plain do_bench loop ({setup['gpu']})", "",
             f"{setup['date']}; {setup['tasks']} solutions from `{setup['solutions']}` (suite {setup['suite']}); "
             f"torch {setup['torch']}, triton {setup['triton']}; device {setup['device']}.", "",
             "Plain loop: `benchmarks/plain_loop.py`, one process per task, PIKE's protocol (seed 1 for weights, "
             "seed 0 for inputs, `.eval()`, `no_grad`, `allclose` atol=rtol=1e-2, `triton.testing.do_bench` of "
             f"`model(*x); torch.cuda.synchronize()`, warm-up {setup['warmup_ms']:g} ms, rep {setup['rep_ms']:g} ms, "
             f"mean), {setup['repeats']} repeats of each model ([min-max] when they differ); the eager reference is "
             "timed before the solution is imported. Harness: `LocalEvaluator` with the named protocol (pike with "
             "the same warm-up and rep budgets), eager references through `baseline_mode=eager`.", "",
             "Ratios are harness / plain (pike: means; robust: medians; plain: averaged over its repeats); "
             "**!** marks one outside the tolerance. Speedup = eager / solution, each side timed its own way.", ""]
    for comparison in comparisons:
        s = comparison["summary"]
        stat = s["statistic"]
        lines += [f"## Protocol {s['protocol']}, {'all submitted at once' if s['concurrency'] == 'all' else 'one at a time'}",
                  "", "| task | harness verdict | plain verdict | eager ms, harness | eager ms, plain | eager ratio | "
                  "solution ms, harness | solution ms, plain | solution ratio | speedup, harness | speedup, plain | "
                  "outside tolerance: measured reason |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for row in comparison["rows"]:
            differs = "" if _agree(row) or not _both(row) else " **(differs)**"
            lines.append(f"| {row['task']} {row['name'].split('_', 1)[-1]} | {md_cell(row['harness'])}{differs} | "
                         f"{md_cell(row['plain'])} | "
                         f"{cell(row['eager_harness'], stat)} | {cell(row['eager_plain'], stat)} | "
                         f"{ratio(row['eager_ratio'], s['tolerance'])} | {cell(row['solution_harness'], stat)} | "
                         f"{cell(row['solution_plain'], stat)} | {ratio(row['solution_ratio'], s['tolerance'])} | "
                         f"{ms(row['speedup_harness'])} | {ms(row['speedup_plain'])} | "
                         f"{miss_text(row.get('misses') or {})} |")
        lines += ["", f"- Verdicts agree (correct or not) on {s['verdicts_agree']} of the {s['verdicts_compared']} "
                  f"solutions both sides judged ({s['tasks']} in all).",
                  f"- {s['within_tolerance']} of {s['timed_in_both']} runtimes timed by both sides are within "
                  f"{s['tolerance']:.0%} ({'means' if stat == 'mean_ms' else 'medians'}).",
                  f"- Outside the tolerance: {s['misses_explained'] + s['misses_unexplained']}; explained by what "
                  f"the same measurement shows (the plain loop's own repeats spread more than {s['tolerance']:.0%}, "
                  f"or the harness's calls spread with CV above {HARNESS_CV_LIMIT:.2f} within one evaluation): "
                  f"{s['misses_explained']}; {UNEXPLAINED}: {s['misses_unexplained']}.",
                  f"- Suite geomean speedup, PIKE-clamped (max(1, s); 1.0 when not correct): harness "
                  f"{ms(s['geomean_harness_clamped'])}x, plain loop {ms(s['geomean_plain_clamped'])}x; raw over the "
                  f"correct ones: harness {ms(s['geomean_harness_raw'])}x, plain {ms(s['geomean_plain_raw'])}x.",
                  f"- Tasks missing a measurement on either side: {s['missing']}.", ""]
    return "\n".join(lines)


# -- baselines (issue 16 item 7) ------------------------------------------------------------------

PAPER_BASELINES = {"compile-max-autotune": 1.64, "tensorrt": 1.41}  # PIKE, over eager, H100, torch 2.8


def baselines_markdown(work: list[tuple[Any, Path]], state: State, modes: list[str], setup: dict[str, Any],
                       protocol: str = "pike", concurrency: str = "all") -> str:
    """The references in each mode against eager, same evaluator, protocol and sitting as the fidelity
    table; geomeans raw and PIKE-clamped next to the paper's figures."""
    def ms(value: float | None) -> str:
        return f"{value:.4g}" if value is not None else "-"

    prefix = f"harness|{protocol}|{concurrency}|"
    lines = [f"# Baselines: level3-pike references in each mode ({setup['gpu']})", "",
             f"{setup['date']}; torch {setup['torch']}, triton {setup['triton']}; harness protocol {protocol} "
             f"(warm-up {setup['warmup_ms']:g} ms, rep {setup['rep_ms']:g} ms, mean), every request submitted at once "
             "to one `LocalEvaluator` (timing one at a time on the GPU); the eager column and every mode come from one "
             "`--state`, so from one sitting when measured in one call. "
             "Each mode wraps the task's own reference (`worker/inside/baseline_modes.py`): cudagraphs copies each "
             "call's inputs into the captured buffers and replays. Eager plain = the plain do_bench loop.", "",
             "| task | eager ms (harness) | eager ms (plain) | " + " | ".join(f"{m} ms (speedup)" for m in modes) + " |",
             "|---|---|---|" + "---|" * len(modes)]
    raw: dict[str, list[float]] = {m: [] for m in modes}
    clamped: dict[str, list[float]] = {m: [] for m in modes}
    notes: dict[str, str] = {}
    for task, _ in work:
        eager = _timing(state.get(f"{prefix}eager:{task.id}"))
        plain = _plain_stats((state.get(f"plain|{task.id}") or {}).get("eager_ms"))
        cells = []
        for mode in modes:
            row = state.get(f"{prefix}mode:{mode}:{task.id}")
            timing = _timing(row)
            if row is None:
                cells.append("-")
                continue
            if row.get("category") == "unavailable":
                notes[mode] = row.get("reason") or "unavailable"
                cells.append("not installed" if "not installed" in notes[mode] else "unavailable")
                continue
            if eager:
                speedup = eager["mean_ms"] / timing["mean_ms"] if timing else None
                clamped[mode].append(clamp(speedup))
                if speedup:
                    raw[mode].append(speedup)
            cells.append(f"{ms(timing['mean_ms'])} ({eager['mean_ms'] / timing['mean_ms']:.2f}x)" if timing and eager
                         else (ms(timing["mean_ms"]) if timing else md_cell(verdict(row))))
        lines.append(f"| {task.id} {task.name.split('_', 1)[-1]} | {ms(eager['mean_ms']) if eager else '-'} | "
                     f"{ms(plain['mean_ms']) if plain else '-'} | " + " | ".join(cells) + " |")
    lines += ["", "| mode | geomean over eager, raw (correct in both) | PIKE-clamped (max(1, s); 1.0 if not correct) "
              "| PIKE published (H100, torch 2.8) |", "|---|---|---|---|"]
    for mode in modes:
        paper = PAPER_BASELINES.get(mode)
        if mode in notes:
            lines.append(f"| {mode} | not measured: {notes[mode]} | - | {f'{paper:.2f}x' if paper else '-'} |")
            continue
        lines.append(f"| {mode} | {ms(geomean(raw[mode]))}x ({len(raw[mode])} tasks) | "
                     f"{ms(geomean(clamped[mode]))}x ({len(clamped[mode])} tasks) | "
                     f"{f'{paper:.2f}x' if paper else 'not published'} |")
    return "\n".join(lines) + "\n"


# -- bracketed eager timing: plain, harness, plain again, task by task -----------------------------

def bracket_phase(work: list[tuple[Any, Path]], state: State, device: str, settings: dict[str, Any],
                  budget: Budget, workdir: Path, margin_s: float, log: Any = print) -> bool:
    """Each eager reference timed by the plain loop, then by the harness (one evaluation at a time, nothing
    else loaded), then by the plain loop again, before the next task starts: the two sides a minute apart
    at most, and the plain loop's own drift over that minute measured. On a machine whose launch-bound
    timings wander between processes, a harness figure inside the two plain ones is as close as that
    machine can show. Returns False when the budget stopped it."""
    from pikeh_local import LocalEvaluator

    params = {"warmup_ms": settings["warmup_ms"], "rep_ms": settings["rep_ms"]}
    evaluator = LocalEvaluator(EvaluatorOptions(device=device, protocol="pike", protocol_params=params,
                                                workdir=workdir / "harness-bracket"))
    plain_args = ["--device", device, "--repeats", "1", "--warmup-ms", str(settings["warmup_ms"]),
                  "--rep-ms", str(settings["rep_ms"])]
    try:
        for task, _path in work:
            keys = [f"bracket|plain-before|{task.id}", f"bracket|harness|{task.id}", f"bracket|plain-after|{task.id}"]
            if all(state.done(k) for k in keys):
                continue
            if budget.left() < margin_s:
                log("[fidelity] bracket: stopped at the budget")
                return False
            rows = []
            for key in keys:
                if key.startswith("bracket|plain"):
                    rows.append({"key": key, "kind": "bracket", "task": task.id,
                                 **run_plain(["--reference", str(task.path), *plain_args], min(300.0, budget.left()),
                                             None)})
                    continue
                future = evaluator.submit(task.eval_request(task.source, baseline_mode="eager", hidden_input_sets=0))
                try:
                    result = future.result(timeout=max(1.0, min(300.0, budget.left() - 5)))
                except Exception as exc:  # noqa: BLE001 - recorded, the next task goes on
                    rows.append({"key": key, "kind": "bracket", "task": task.id, "category": type(exc).__name__,
                                 "reason": str(exc)[:300]})
                    continue
                rows.append({**harness_row(key, task, result, 1), "kind": "bracket"})
            for row in rows:  # a task's three rows land together: a cut call measures the whole bracket again
                state.add({**row, "settings": settings})
            log(f"[fidelity] bracket {task.id}: plain {rows[0].get('eager_ms')} harness {rows[1].get('mean_ms')} "
                f"plain {rows[2].get('eager_ms')}")
    finally:
        evaluator.close()
    return True


def bracket_rows(work: list[tuple[Any, Path]], state: State) -> list[dict[str, Any]]:
    """Per task: the harness's mean and median against the two plain runs around it (mean of their means and
    medians), and the plain loop's drift, |before - after| / their mean."""
    out = []
    for task, _path in work:
        before, harness, after = (state.get(f"bracket|{side}|{task.id}")
                                  for side in ("plain-before", "harness", "plain-after"))
        if not (before and harness and after and before.get("eager_ms") and after.get("eager_ms")
                and harness.get("mean_ms")):
            continue
        means = [before["eager_ms"][0], after["eager_ms"][0]]
        medians = [m for m in (before.get("eager_median_ms") or [None])[:1] + (after.get("eager_median_ms")
                                                                               or [None])[:1] if m == m and m]
        plain_mean = sum(means) / 2
        plain_median = sum(medians) / len(medians) if medians else None
        row = {"task": task.id, "name": task.name, "plain_before_ms": means[0], "plain_after_ms": means[1],
               "harness_mean_ms": harness["mean_ms"], "harness_median_ms": harness["median_ms"],
               "harness_cv": harness["cv"], "plain_drift": abs(means[0] - means[1]) / plain_mean,
               "ratio_mean": harness["mean_ms"] / plain_mean,
               "ratio_median": harness["median_ms"] / plain_median if plain_median else None}
        low, high = min(means), max(means)
        row["inside"] = low * 0.95 <= harness["mean_ms"] <= high * 1.05
        out.append(row)
    return out


def _bracket_reason(row: dict[str, Any]) -> str:
    """For a harness mean more than 5 % from the plain loop's: what the same bracket measured that explains it."""
    if abs(row["ratio_mean"] - 1) <= 0.05:
        return ""
    reasons = measured_reasons(row["plain_drift"], 0.05, "the plain loop itself moved {:.0%} within the bracket",
                               row["harness_cv"])
    return "; ".join(reasons) or f"neither: {UNEXPLAINED}"


def bracket_markdown(rows: list[dict[str, Any]], setup: dict[str, Any]) -> str:
    lines = [f"## Eager references, bracketed: plain, harness, plain again ({setup['gpu']})", "",
             f"{setup['date']}; protocol pike (warm-up {setup['warmup_ms']:g} ms, rep {setup['rep_ms']:g} ms), one "
             "evaluation at a time, nothing else loaded; each plain run is one do_bench call in a fresh process. "
             "Drift: the plain loop against itself a minute later. Inside: the harness mean lies within the two "
             "plain means, widened by 5%.", "",
             "| task | plain before (ms) | harness mean (ms) | harness median (ms) | CV | plain after (ms) | "
             "plain drift | harness / plain (means) | (medians) | inside | outside 5 %: measured reason |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['task']} {r['name'].split('_', 1)[-1]} | {r['plain_before_ms']:.4g} | "
                     f"{r['harness_mean_ms']:.4g} | {r['harness_median_ms']:.4g} | {r['harness_cv']:.2f} | "
                     f"{r['plain_after_ms']:.4g} | {r['plain_drift']:.1%} | {r['ratio_mean']:.3f} | "
                     f"{r['ratio_median']:.3f} | {'yes' if r['inside'] else '**no**'} | {_bracket_reason(r)} |")
    if rows:
        within = sum(abs(r["ratio_mean"] - 1) <= 0.05 for r in rows)
        inside = sum(r["inside"] for r in rows)
        steady = [r for r in rows if r["plain_drift"] <= 0.05]
        lines += ["", f"- {within} of {len(rows)} harness means within 5% of the plain loop's; {inside} of {len(rows)} "
                  "inside the bracket.",
                  f"- Where the plain loop held still (drift at most 5%, {len(steady)} tasks): "
                  f"{sum(abs(r['ratio_mean'] - 1) <= 0.05 for r in steady)} within 5%."]
    return "\n".join(lines) + "\n"
