"""Is a model's slow stretch the GPU's clock, the CPU, or the other model's work before it?

level3-pike 14's published solution (autotuned Triton GEMMs, fp16 tensor cores) read 7-11 % slower in
the harness's paired blocks than in the plain ``do_bench`` loop in four sittings on an H200, while its
eager reference agreed within 1 %. ``diag_process_speed`` (2026-11-30) showed the slowness inside a
plain process too: its 100 ms windows read either about 1.69 ms or 1.88-2.0 ms, the slow ones coming
and going within one process and on every core, while the first ``do_bench`` of each process read fast.
A compute-bound kernel slows when the SM clock drops (power or heat), a launch-bound one when its CPU
thread does; and a clock may drop after a heavy neighbour (the eager side, in paired blocks) ran.

One process per task (as the plain loop, main thread unpinned) times, in 100 ms windows of
``do_bench``: the solution alone, then the two sides alternating as paired blocks do, then the solution
alone again, then the reference alone. Each window records its median, the core before and after, and
how long the CPU takes to queue one call (``enqueue_ms``: ten calls queued without a synchronize). A
separate ``nvidia-smi`` sampler (its own process, every 20 ms) logs the SM clock, power draw,
temperature and the driver's clock-event reasons; each window gets the samples taken during it. The
summary splits each side's windows into fast and slow (over 1.05x its fastest) and shows their clocks,
power, reasons and queueing time side by side. It claims nothing; it shows which moves with the time.

  python3 benchmarks/diag_gpu_clock.py --out OUT --solutions .fidelity/pike-b-level3 --tasks 14,31,6
  python3 benchmarks/diag_gpu_clock.py --device cpu --suite smoke --solutions DIR --tasks 1 --windows 3 \\
      --window-ms 5 --out OUT   # the CPU path (no sampler: clocks are blank)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from diag_process_speed import current_core  # noqa: E402
from perf_common import REPO, Budget, diagnosis_arguments, fmt, run_inner, suite, write  # noqa: E402

MARK = "CLOCK_RESULT "
SLOW = 1.05  # a window over this many times its side's fastest counts as slow
SAMPLE_MS = 20
QUERY = "timestamp,clocks.sm,power.draw,temperature.gpu,{reasons}"
# nvidia-smi's clock-event reason bits (the driver's "throttle reasons" before 535)
REASONS = {0x1: "idle", 0x2: "app_clocks", 0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x10: "sync_boost",
           0x20: "sw_thermal", 0x40: "hw_thermal", 0x80: "hw_power_brake", 0x100: "display_clocks"}


# ---------------------------------------------------------------- inside the timed process

def inner(spec: dict[str, Any]) -> dict[str, Any]:
    """Load both sides, warm them, then time the phases of the module docstring, window by window."""
    import plain_loop
    import torch

    dev = torch.device(spec["device"])
    ref_module = plain_loop.load_module(Path(spec["reference"]), "clock_reference")
    sol_module = plain_loop.load_module(Path(spec["solution"]), "clock_solution")
    init = ref_module.get_init_inputs()
    x = plain_loop.inputs(ref_module, dev)
    window_ms, n = spec["window_ms"], spec["windows"]
    windows: list[dict[str, Any]] = []
    with torch.no_grad():
        models = {"eager": plain_loop.build(ref_module.Model, init, dev),
                  "solution": plain_loop.build(plain_loop.model_factory(sol_module), init, dev)}
        for side in models:  # JIT, autotuning and cuDNN's first choices, before anything counts
            plain_loop.bench(lambda side=side: models[side](*x), dev, window_ms, window_ms)

        def window(phase: str, side: str) -> None:
            def call() -> Any:
                return models[side](*x)

            began, core = time.time(), current_core()
            _, median = plain_loop.bench(call, dev, window_ms / 10, window_ms)
            ended, after = time.time(), current_core()
            queued = time.perf_counter()
            for _ in range(10):
                call()
            enqueue_ms = (time.perf_counter() - queued) * 100  # per call: x1000 ms / 10 calls
            plain_loop.synchronize(dev)
            windows.append({"phase": phase, "side": side, "t0": began, "t1": ended, "ms": median,
                            "cores": [core, after], "enqueue_ms": enqueue_ms})

        for _ in range(n):
            window("alone", "solution")
        for _ in range(n):
            window("alternating", "eager")
            window("alternating", "solution")
        for _ in range(n):
            window("alone_again", "solution")
        for _ in range(max(1, n // 2)):
            window("alone", "eager")
    return {"pid": os.getpid(), "torch": torch.__version__,
            "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None, "windows": windows}


# ---------------------------------------------------------------- the sampler and the join

def reasons_field() -> str | None:
    """The name this driver gives the clock-event reasons, None without nvidia-smi or either name."""
    smi = shutil.which("nvidia-smi")
    for name in ("clocks_event_reasons.active", "clocks_throttle_reasons.active"):
        if smi and subprocess.run([smi, f"--query-gpu={name}", "--format=csv,noheader"], capture_output=True,
                                  check=False).returncode == 0:
            return name
    return None


def start_sampler(index: int, log: Path) -> subprocess.Popen[bytes] | None:
    """``nvidia-smi`` in loop mode writing to ``log``, line-buffered (``stdbuf``) so that every sample is in
    the file when it is stopped; None where there is no nvidia-smi."""
    field = reasons_field()
    if field is None:
        return None
    command = ["nvidia-smi", f"--id={index}", f"--query-gpu={QUERY.format(reasons=field)}",
               "--format=csv,noheader,nounits", f"--loop-ms={SAMPLE_MS}"]
    if shutil.which("stdbuf"):
        command = ["stdbuf", "-oL", *command]
    with log.open("wb") as sink:
        return subprocess.Popen(command, stdout=sink, stderr=subprocess.DEVNULL)


def stop_sampler(sampler: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM, not SIGINT: a process started from a background job inherits SIGINT ignored. Killed if
    it has not ended after ``grace_s``."""
    sampler.send_signal(signal.SIGTERM)
    try:
        sampler.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        sampler.kill()
        sampler.wait()


def sampler_check(device: str, scratch: Path) -> int | None:
    """How many samples the sampler wrote in one second (None on a CPU): a blank clock column in the
    report then says whether the sampler or the join failed."""
    if not device.startswith("cuda"):
        return None
    log = scratch / "smi-check.csv"
    sampler = start_sampler(int(device.partition(":")[2] or 0), log)
    if sampler is None:
        return 0
    time.sleep(1.0)
    stop_sampler(sampler)
    return len(parse_samples(log.read_text()))


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"


def parse_samples(text: str) -> list[dict[str, Any]]:
    """``timestamp, sm MHz, power W, temperature C, reasons`` lines -> samples (local time, as
    ``time.time()`` counts it); a field the card does not report is None, a line without a time or an
    SM clock is skipped."""
    samples = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 5:
            continue
        stamp, _, fraction = parts[0].partition(".")
        try:
            when = time.mktime(time.strptime(stamp, "%Y/%m/%d %H:%M:%S")) + float(f"0.{fraction or 0}")
            mask = int(parts[4], 16)
        except ValueError:
            continue
        sm = _number(parts[1])
        if sm is not None:
            samples.append({"t": when, "sm_mhz": sm, "power_w": _number(parts[2]),
                            "temperature_c": _number(parts[3]), "reasons": mask})
    return samples


def reason_names(mask: int) -> list[str]:
    return [name for bit, name in REASONS.items() if mask & bit]


def join(windows: list[dict[str, Any]], samples: list[dict[str, Any]]) -> None:
    """Give each window the mean SM clock, the largest power draw and the reasons of its samples."""
    for w in windows:
        inside = [s for s in samples if w["t0"] <= s["t"] <= w["t1"]]
        w["samples"] = len(inside)
        if inside:
            w["sm_mhz"] = statistics.fmean(s["sm_mhz"] for s in inside)
            w["power_w"] = max((s["power_w"] for s in inside if s["power_w"] is not None), default=None)
            w["temperature_c"] = max((s["temperature_c"] for s in inside if s["temperature_c"] is not None),
                                     default=None)
            mask = 0
            for s in inside:
                mask |= s["reasons"]
            w["reasons"] = reason_names(mask)


# ---------------------------------------------------------------- the summary

def mean_of(rows: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in rows if r.get(key) is not None]
    return statistics.fmean(values) if values else None


def summarise(task: int, windows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per side and phase: the median window, how many were slow, and fast against slow windows'
    SM clock, power, queueing time and reasons."""
    out = []
    for side in ("solution", "eager"):
        mine = [w for w in windows if w["side"] == side]
        if not mine:
            continue
        fastest = min(w["ms"] for w in mine)
        for phase in dict.fromkeys(w["phase"] for w in mine):
            rows = [w for w in mine if w["phase"] == phase]
            slow = [w for w in rows if w["ms"] > SLOW * fastest]
            fast = [w for w in rows if w["ms"] <= SLOW * fastest]
            out.append({"task": task, "side": side, "phase": phase, "windows": len(rows), "slow": len(slow),
                        "median_ms": statistics.median(w["ms"] for w in rows), "fastest_ms": fastest,
                        "sm_fast": mean_of(fast, "sm_mhz"), "sm_slow": mean_of(slow, "sm_mhz"),
                        "power_fast": mean_of(fast, "power_w"), "power_slow": mean_of(slow, "power_w"),
                        "enqueue_fast": mean_of(fast, "enqueue_ms"), "enqueue_slow": mean_of(slow, "enqueue_ms"),
                        "reasons_slow": sorted({r for w in slow for r in w.get("reasons", [])}),
                        "reasons_fast": sorted({r for w in fast for r in w.get("reasons", [])})})
    return out


def markdown(summaries: list[dict[str, Any]], setup: dict[str, Any]) -> str:
    lines = [f"## Slow windows against the GPU's clock ({setup.get('gpu') or setup['device']}, {setup['date']})", "",
             f"Windows of {setup['window_ms']:g} ms of do_bench, {setup['windows']} per phase; slow: over "
             f"{SLOW}x the side's fastest window; nvidia-smi sampled every {SAMPLE_MS} ms in its own process "
             f"(its check: {fmt(setup.get('sampler_check'))} samples in 1 s).", "",
             "| task | side | phase | windows | slow | median ms | fastest ms | SM MHz fast / slow | "
             "power W fast / slow | enqueue ms fast / slow | reasons in slow windows | in fast |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        lines.append(
            f"| {s['task']} | {s['side']} | {s['phase']} | {s['windows']} | {s['slow']} | {fmt(s['median_ms'], 4)} | "
            f"{fmt(s['fastest_ms'], 4)} | {fmt(s['sm_fast'], 0)} / {fmt(s['sm_slow'], 0)} | "
            f"{fmt(s['power_fast'], 0)} / {fmt(s['power_slow'], 0)} | {fmt(s['enqueue_fast'], 4)} / "
            f"{fmt(s['enqueue_slow'], 4)} | {', '.join(s['reasons_slow']) or '-'} | {', '.join(s['reasons_fast']) or '-'} |")
    return "\n".join(lines)


# ---------------------------------------------------------------- the driver

def run_task(spec: dict[str, Any], log: Path, timeout_s: float) -> dict[str, Any]:
    """One timed process for one task, with the sampler running around it; its windows joined."""
    device = spec["device"]
    sampler = start_sampler(int(device.partition(":")[2] or 0), log) if device.startswith("cuda") else None
    try:
        result = run_inner(__file__, spec, MARK, timeout_s)
    finally:
        if sampler is not None:
            stop_sampler(sampler)
    if "windows" in result:
        join(result["windows"], parse_samples(log.read_text()) if log.is_file() else [])
    return result


def main() -> int:
    parser = diagnosis_arguments(__doc__ or "", "Folder of task_N.py solutions (required).")
    parser.add_argument("--tasks", default="14,31,6", help="Comma-separated task numbers with a published solution.")
    parser.add_argument("--windows", type=int, default=30, help="Windows per phase (the reference alone: half).")
    parser.add_argument("--window-ms", type=float, default=100.0)
    parser.add_argument("--budget-s", type=float, default=420.0, help="No new task starts after this.")
    args = parser.parse_args()
    if args.inner is not None:
        print(MARK + json.dumps(inner(json.loads(args.inner))), flush=True)
        return 0
    if args.solutions is None:
        raise SystemExit("--solutions is required")
    chosen, budget = suite(args.suite), Budget(args.budget_s)
    setup: dict[str, Any] = {"device": args.device, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                             "windows": args.windows, "window_ms": args.window_ms, "tasks": args.tasks}
    summaries: list[dict[str, Any]] = []
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=REPO, prefix=".diag-gpu-clock-") as scratch:
        setup["sampler_check"] = sampler_check(args.device, Path(scratch))
        for number in [int(t) for t in args.tasks.split(",") if t.strip()]:
            if budget.over(60):
                break
            solution = args.solutions / f"task_{number}.py"
            if not solution.is_file():
                raise SystemExit(f"no solution for task {number} in {args.solutions}")
            print(f"[clock] task {number} ({budget.left():.0f} s left)", flush=True)
            spec = {"device": args.device, "reference": str(chosen.task(number).path), "solution": str(solution),
                    "windows": args.windows, "window_ms": args.window_ms}
            result = run_task(spec, Path(scratch) / f"smi-{number}.csv", timeout_s=max(60.0, budget.left() + 60))
            rows.append({"task": number, **result})
            setup["gpu"] = setup.get("gpu") or result.get("gpu")
            setup["torch"] = setup.get("torch") or result.get("torch")
            if "windows" in result:
                summaries += summarise(number, result["windows"])
            write(args.out, "diag_gpu_clock", {"setup": setup, "summaries": summaries, "rows": rows},
                  markdown(summaries, setup))
    return 0


if __name__ == "__main__":
    sys.exit(main())
