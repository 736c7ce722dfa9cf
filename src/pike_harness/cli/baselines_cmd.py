"""``pikeh baselines``: time each task's reference in several modes, with a candidate's protocol.

Speedups mean "faster than what PyTorch already does", so the same reference is timed eager, under
``torch.compile`` (default and max-autotune), replayed as a CUDA graph and (when installed) through
TensorRT, each by the same evaluator, checks and protocol as a candidate (the worker applies the
mode to the trusted reference: ``EvalRequest.baseline_mode``). Results go to a *baseline set*
folder that `pikeh report` reads:

  DIR/baselines.jsonl  one line per (task, mode): {"type": "baseline", "task", "mode", "device",
                       "protocol", "result": EvalResult, "time"}, appended and fsync'ed as each ends
  DIR/meta.json        the host, GPU, driver and versions the set was measured on

Runtimes depend on the host as much as on the GPU, so a folder belongs to one host: resuming on
another host is refused. Finished entries are skipped on resume. torch.compile modes are first
compiled in parallel (``--precompile``), which fills the per-source Inductor/Triton caches, so the
timed evaluations, one at a time per GPU, find their compiled kernels on disk.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import click

from pike_harness.cli import get_app
from pike_harness.cli.config_options import finite_float
from pike_harness.cli.evaluator_options import (
    EvaluatorCommand,
    build_evaluator,
    evaluator_options,
    pop_evaluator_values,
)
from pike_harness.contracts.evaluation import Evaluator, EvaluatorError
from pike_harness.contracts.journal import Baseline
from pike_harness.contracts.model import Task
from pike_harness.errors import UserError
from pike_harness.host import terminal
from pike_harness.host.baseline_sets import BASELINES_FILE, append_entry, entries, read_meta, save_meta
from pike_harness.host.store import now

DEFAULT_MODES = "eager,compile"
ENVIRONMENT_KEYS = ("host", "cpu", "cpu_count", "platform", "python", "gpu", "gpu_capability", "gpu_memory_mb",
                    "gpu_multiprocessors", "driver", "torch", "cuda", "triton", "cudnn")


@click.command("baselines", cls=EvaluatorCommand)
@click.option("--suite", required=True, help="The suite whose references to time, e.g. level3-pike.")
@click.option("--tasks", "tasks_spec", metavar="IDS", help="Only these task ids, e.g. 1-5,9 (default: all).")
@click.option("--modes", default=DEFAULT_MODES, show_default=True,
              help="Comma-separated: eager, compile, compile-max-autotune, cudagraphs, tensorrt.")
@click.option("--output-dir", required=True, type=click.Path(path_type=Path),
              help="The baseline-set folder (created; an existing one is resumed).")
@click.option("--precompile/--no-precompile", default=True, show_default=True,
              help="Compile torch.compile/TensorRT modes in parallel first, filling the JIT caches.")
@click.option("--precompile-jobs", type=click.IntRange(min=1), default=None,
              help="Parallel compiles in the precompile pass (default: the evaluator's CPU slots, at most 8).")
@click.option("--retry-failed", is_flag=True, help="Time again the entries whose verdict was not correct.")
@click.option("--microbench/--no-microbench", default=True, show_default=True,
              help="On a GPU, measure a large copy and large matmuls first (a few seconds) and record them in "
                   "meta.json beside the datasheet peaks (docs/report.md, speed of light).")
@click.option("--budget", "budget_s", type=finite_float(min=0, min_open=True), default=None, metavar="SECONDS",
              help="Start no new entry after SECONDS (the run can be resumed with the same command).")
@evaluator_options
def baselines(suite: str, tasks_spec: str | None, modes: str, output_dir: Path, precompile: bool,
              precompile_jobs: int | None, retry_failed: bool, microbench: bool, budget_s: float | None,
              **kwargs: Any) -> None:
    """Time the references of a suite in each mode (eager, torch.compile, ...) on this host, one at a
    time per GPU, with the same protocol and checks as candidates; resumable.

    \b
    Example:
      pikeh baselines --suite level3-pike --modes eager,compile --protocol pike --device cuda \\
          --output-dir baselines/h100
    """

    from pike_harness.host.output_paths import check_output_dir
    from pike_harness.worker.inside.baseline_modes import MODES

    started = time.monotonic()
    values = pop_evaluator_values(kwargs)
    console = terminal.console(stderr=True)
    tasks = get_app().catalog.select(suite, tasks_spec)
    wanted = [m.strip() for m in modes.split(",") if m.strip()]
    unknown = [m for m in wanted if m not in MODES]
    if unknown or not wanted:
        raise UserError(f"unknown mode(s) {', '.join(unknown) or '(none given)'}: choose from {', '.join(MODES)}")
    protocol = values.get("protocol") or "robust"
    check_output_dir(output_dir, "--output-dir")
    output_dir.mkdir(parents=True, exist_ok=True)
    _check_host(output_dir)
    done = _finished(output_dir, protocol, retry_failed)

    with build_evaluator(values) as evaluator:
        device_kind = _device_kind(evaluator, values.get("device") or "auto")
        requested, wanted = wanted, _available_modes(wanted, device_kind, console)
        cannot = {mode: _why_unavailable(mode, device_kind) for mode in requested if mode not in wanted}
        todo = [(task, mode) for task in tasks for mode in wanted
                if (task.ref, mode, device_kind) not in done]
        skipped = len(tasks) * len(wanted) - len(todo)
        if skipped:
            console.print(f"{skipped} entries already in {output_dir / BASELINES_FILE}: skipped")
        _write_meta(output_dir, suite, protocol, wanted, evaluator, None, unavailable=cannot)
        if microbench and device_kind == "cuda" and todo:
            _record_microbench(output_dir, (_devices(evaluator) or ["cuda"])[0], console)
        if not todo:
            console.print("nothing to do")
            return
        if precompile:
            _precompile(evaluator, todo, precompile_jobs, console)
        deadline = started + budget_s if budget_s else None
        finished, stopped = _time_all(evaluator, todo, output_dir, protocol, wanted, deadline, console)
    _print_summary(output_dir, protocol, device_kind, console)
    if stopped:
        console.print(f"[yellow]stopped at the --budget after {finished} of {len(todo)} entries; run the same "
                      "command again to continue[/yellow]")


def _devices(evaluator: Evaluator) -> list[str]:
    """The devices the evaluator says it times on (``describe()``); empty when it cannot tell."""
    return [str(d) for d in evaluator.describe().get("devices") or []]


def _device_kind(evaluator: Evaluator, device: str) -> str:
    devices = _devices(evaluator) or [device]
    return "cuda" if str(devices[0]).startswith("cuda") else "cpu"


def _available_modes(wanted: list[str], device_kind: str, console: Any) -> list[str]:
    from pike_harness.worker.inside.baseline_modes import unavailable

    kept = []
    for mode in wanted:
        why = unavailable(mode, device_kind)
        if why:
            console.print(f"skipping mode {mode}: {why}")
        else:
            kept.append(mode)
    if not kept:
        raise UserError("none of the requested modes can run here")
    return kept


def _finished(folder: Path, protocol: str, retry_failed: bool) -> set[tuple[str, str, str]]:
    """(task, mode, device kind) of the entries already measured with this protocol."""
    finished = set()
    for event in entries(folder):
        if event.get("protocol") != protocol:
            continue
        result = event.get("result") or {}
        if retry_failed and result.get("category") != "correct":
            continue
        kind = "cuda" if str(event.get("device", "")).startswith("cuda") else "cpu"
        finished.add((str(event.get("task")), str(event.get("mode")), kind))
    return finished


def _why_unavailable(mode: str, device_kind: str) -> str:
    from pike_harness.worker.inside.baseline_modes import unavailable

    return unavailable(mode, device_kind) or ""


def _check_host(folder: Path) -> None:
    """A baseline set belongs to one host: launch-bound runtimes differ up to 2x between hosts."""
    from pike_harness.worker.environment import host_info

    meta = read_meta(folder)
    recorded = meta.get("environment") or {}
    here = host_info()
    for key in ("host", "cpu"):
        if recorded.get(key) and recorded[key] != here[key]:
            raise UserError(f"{folder} holds baselines measured on {key} {recorded[key]!r}, not this host's "
                            f"{here[key]!r}: use another --output-dir (never mix hosts in one set)")



def _write_meta(folder: Path, suite: str, protocol: str, modes: list[str], evaluator: Evaluator,
                environment: dict[str, Any] | None, unavailable: dict[str, str] | None = None) -> None:
    """``unavailable``: requested modes that cannot run on this host, with why (the report shows them)."""
    from pike_harness import __version__
    from pike_harness.worker.environment import host_info

    meta = read_meta(folder)
    env = dict(meta.get("environment") or host_info())
    if environment:
        recorded_gpu, new_gpu = env.get("gpu"), environment.get("gpu")
        if recorded_gpu and new_gpu and recorded_gpu != new_gpu:
            raise UserError(f"{folder} holds baselines measured on {recorded_gpu}, not {new_gpu}: use another "
                            "--output-dir")
        env.update({k: environment[k] for k in ENVIRONMENT_KEYS if environment.get(k) is not None})
    env["date"] = time.strftime("%Y-%m-%d")
    meta.update({"name": meta.get("name") or folder.name, "created": meta.get("created") or now(),
                 "updated": now(), "suite": suite, "protocol": protocol,
                 "modes": sorted(set(meta.get("modes") or []) | set(modes)), "pikeh": __version__,
                 "evaluator": evaluator.describe(), "environment": env})
    if unavailable is not None:
        meta["unavailable"] = {m: why for m, why in {**(meta.get("unavailable") or {}), **unavailable}.items()
                               if m not in meta["modes"]}
    save_meta(folder, meta)



def _record_microbench(folder: Path, device: str, console: Any) -> None:
    """The device's measured copy bandwidth and matmul rates (worker/microbench.py), in meta.json, measured
    in a process of its own before any timing; a host that cannot see the GPU (a remote evaluator) skips it."""
    import subprocess
    import sys

    from pike_harness.worker.supervise.spawn import visible_devices

    env = {**os.environ, "CUDA_VISIBLE_DEVICES": visible_devices(device if device.startswith("cuda") else "cuda")}
    try:
        done = subprocess.run([sys.executable, "-m", "pike_harness.worker.microbench", "--device", "cuda"],
                              capture_output=True, text=True, timeout=300, env=env, check=False)
        measured = json.loads(done.stdout.strip().splitlines()[-1]) if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        measured = None
    if measured is None:
        console.print("microbenchmark skipped: this host cannot run it on the GPU (see --no-microbench)")
        return
    meta = read_meta(folder)
    meta["microbenchmark"] = {**measured, "time": now()}
    save_meta(folder, meta)
    rates = ", ".join(f"{k} {v:.1f}" for k, v in measured.get("matmul_tflops", {}).items())
    console.print(f"microbenchmark: copy {measured['copy_gbs']:.0f} GB/s; matmul TFLOP/s {rates}")



def _request(task: Task, mode: str):
    # The reference is trusted: no hidden input sets are needed to catch specialisation, nor fresh ones
    # to catch a cache, and one set keeps the correctness stage of the big tasks (1 GB outputs) short.
    # The timing protocol is the same.
    return task.eval_request(task.source, baseline_mode=mode, hidden_input_sets=0, fresh_input_sets=0)


def _progress(console: Any):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=False, disable=not console.is_terminal)


def _precompile(evaluator: Evaluator, todo: list[tuple[Task, str]], jobs: int | None, console: Any) -> None:
    from pike_harness.worker.inside.baseline_modes import JIT_MODES

    jit = [(task, mode) for task, mode in todo if mode in JIT_MODES]
    if not jit:
        return
    jobs = jobs or min(8, int(evaluator.describe().get("jobs") or 1))
    began = time.monotonic()
    with _progress(console) as progress:
        bar = progress.add_task(f"compiling {len(jit)} entries ({jobs} at a time)", total=len(jit))

        def on_done(_request: Any, ok: bool) -> None:
            progress.advance(bar)

        warmed = evaluator.precompile([_request(task, mode) for task, mode in jit], jobs=jobs, on_done=on_done)
    if warmed is None:
        console.print("precompile skipped: this evaluator has no shared JIT cache")
        return
    console.print(f"precompiled {warmed} of {len(jit)} entries in {time.monotonic() - began:.0f} s")


def _time_all(evaluator: Evaluator, todo: list[tuple[Task, str]], folder: Path, protocol: str, modes: list[str],
              deadline: float | None, console: Any) -> tuple[int, bool]:
    """Submit the entries a few at a time (the evaluator times one at a time per device) and record
    each as it ends; past ``deadline`` no new entry starts."""
    from concurrent.futures import FIRST_COMPLETED, wait

    window = 2 * len(_devices(evaluator) or [1]) + 2
    pending = list(todo)
    in_flight: dict[Any, tuple[Task, str]] = {}
    finished = 0
    stopped = False
    wrote_meta = False
    with _progress(console) as progress:
        bar = progress.add_task(f"timing {len(todo)} entries", total=len(todo))
        while pending or in_flight:
            while pending and len(in_flight) < window and not stopped:
                if deadline is not None and time.monotonic() > deadline:
                    stopped = True
                    break
                task, mode = pending.pop(0)
                in_flight[evaluator.submit(_request(task, mode))] = (task, mode)
            if not in_flight:
                break
            ready, _ = wait(list(in_flight), return_when=FIRST_COMPLETED)
            for future in ready:
                task, mode = in_flight.pop(future)
                try:
                    result = future.result()
                except EvaluatorError as exc:
                    console.print(f"[red]{task.ref} {mode}: the evaluation could not run: {terminal.literal(exc)}[/red]")
                    progress.advance(bar)
                    continue
                device = str(result.environment.get("device") or "")
                append_entry(folder, {**Baseline(task=task.ref, mode=mode, device=device, protocol=protocol,
                                                             result=result.to_dict()).to_dict(), "time": now()})
                if not wrote_meta and result.environment.get("torch"):
                    _write_meta(folder, task.suite, protocol, modes, evaluator, result.environment)
                    wrote_meta = True
                finished += 1
                runtime = f"{result.runtime_ms:.4f} ms" if result.runtime_ms is not None else result.category
                progress.update(bar, advance=1, description=f"{task.ref} {mode}: {runtime}")
                if not console.is_terminal:
                    console.print(f"{task.ref} {mode}: {runtime}", highlight=False)
    return finished, stopped


def _print_summary(folder: Path, protocol: str, device_kind: str, console: Any) -> None:
    """Per task: each mode's runtime (or verdict) and its speedup over eager; geomean per mode."""
    from rich.table import Table

    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for event in entries(folder):
        kind = "cuda" if str(event.get("device", "")).startswith("cuda") else "cpu"
        if event.get("protocol") == protocol and kind == device_kind:
            latest[(str(event["task"]), str(event["mode"]))] = event.get("result") or {}
    modes = sorted({mode for _, mode in latest}, key=lambda m: (m != "eager", m))
    tasks = sorted({task for task, _ in latest}, key=lambda ref: (ref.rpartition("/")[0],
                                                                   int(ref.rpartition("/")[2] or 0)))
    table = Table(title=f"baselines in {folder} ({protocol}, {device_kind})")
    table.add_column("task")
    for mode in modes:
        table.add_column(mode, justify="right")
    raw: dict[str, list[float]] = {mode: [] for mode in modes}
    clamped: dict[str, list[float]] = {mode: [] for mode in modes}
    for task in tasks:
        eager = (latest.get((task, "eager")) or {}).get("runtime_ms")
        cells = []
        for mode in modes:
            result = latest.get((task, mode))
            if eager and mode != "eager" and result is not None:
                # PIKE's rule: max(1, s), and 1.0 when the mode gave no correct result
                ms = result.get("runtime_ms")
                clamped[mode].append(max(1.0, eager / ms) if ms else 1.0)
            if result is None:
                cells.append("-")
            elif result.get("runtime_ms") is None:
                cells.append(str(result.get("category")))
            else:
                ms = float(result["runtime_ms"])
                text = f"{ms:.4g} ms"
                if eager and mode != "eager":
                    raw[mode].append(eager / ms)
                    text += f" ({eager / ms:.2f}x)"
                cells.append(text)
        table.add_row(task, *cells)
    console.print(table)
    for mode in modes:
        if raw[mode] or clamped[mode]:
            console.print(f"{mode} over eager: geomean {_geomean(raw[mode]):.3f}x over {len(raw[mode])} tasks "
                          f"correct in both; PIKE-clamped {_geomean(clamped[mode]):.3f}x over "
                          f"{len(clamped[mode])} tasks")


def _geomean(values: list[float]) -> float:
    import math

    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")
