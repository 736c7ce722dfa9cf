"""Where a model's speed is decided: by its process, by the CPU core it runs on, by our timing loop, or
by the harness around it. A diagnosis tool for two findings the interleaved fidelity runs left open.

On an H200 (2026-11-29, ``reports/timing/h200-2026-11-29-5tasks/``) some models ran at one of two
speeds fixed for the life of a process (level3-pike 27's published solution: 1.03 ms in one plain
process, 0.53 ms in the next; 30's eager reference: 21-22 ms, then 10-11 ms), and some read 4-6 %
slower in the harness's paired blocks than in the plain ``do_bench`` loop, in both rounds (26's
eager reference, 31's solution). Each round here, task by task:

* ``plain``: a fresh process with nothing of the harness's process around it (plain_loop's loaders,
  torch, triton) loads the eager reference and the solution, calls each once, then times each
  - ``unpinned``: ``do_bench`` 50/150 ms as the plain loop does, recording the CPU core the main
    thread ran on before and after;
  - ``pinned``: the same with the main thread pinned to one core (``--pin-core``, the same in every
    process). If the unpinned speeds differ between processes and the pinned ones do not, the core
    decides; if the pinned ones differ too, something drawn in the process does (autotuning, a
    library's heuristics, where its memory landed);
  - ``timed`` and ``blocks`` (pinned): our ``TimedLoop`` under the pike protocol 50/150 ms, then in
    paired-length blocks (``--block-ms``, each with the engine's own short warm-up) alternating the
    two sides as the paired re-timing does, but in one process and without stopping either side.
    Against ``pinned`` do_bench these separate the loop and the block length from the process;
  - ``sweep``: a short ``do_bench`` on every core the process may use, in turn, to see which cores are
    slow and whether the same ones are slow in every process;
  - the Triton autotuner's choices of the solution's kernels, if it autotunes.
* ``harness``: the product's paired re-timing of the solution against the reference (an engine with
  the default quiet rule ``stop``, sandboxed, ``--protocol pike`` 50/150 ms), each side in its own
  process: the block medians of each side against the plain process of the same round. With
  ``--variants`` the harness runs once per variant each round, each with one thing changed
  (``VARIANTS``: the quiet rule's ``cores`` mode, 400 ms blocks, no sandbox, no policing, no
  system-call filter), so the part of the harness that holds a speed the plain process does not
  read shows as the variant that reads like the plain process.

A task given as ``N:eager`` has only its reference: the plain process times the reference alone and
the harness pairs the reference with itself (the true ratio is 1.0; a process drawn slower than the
other shows as a ratio away from 1).

Writes ``diag_process_speed.{json,md}`` to ``--out`` after every measurement (a call cut short keeps
what ended). It claims nothing; it shows which of the four holds the speed.

  python3 benchmarks/diag_process_speed.py --out OUT --solutions .fidelity/pike-b-level3 [--tasks 27,30:eager,26,31] [--rounds 2]
  python3 benchmarks/diag_process_speed.py --device cpu --suite smoke --solutions DIR --tasks 1 --rounds 1 --block-ms 5 \\
      --warmup-ms 2 --rep-ms 10 --out OUT   # the CPU path
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from perf_common import REPO, Budget, diagnosis_arguments, fmt, run_inner, spread, suite, write  # noqa: E402

MARK = "DIAG_RESULT "
SIDES = ("eager", "solution")


# ---------------------------------------------------------------- inside the plain process

def current_core() -> int | None:
    """The core this thread last ran on (field 39 of /proc/thread-self/stat), None where unreadable."""
    try:
        text = Path("/proc/thread-self/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[36]) if len(fields) > 36 else None


def autotune_choices(module: Any) -> dict[str, list[str]]:
    """Each Triton autotuner of the module: the configurations it chose, one per key it tuned for."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return {}
    found: dict[str, list[str]] = {}
    for name, value in vars(module).items():
        seen, item = 0, value
        while item is not None and seen < 4:  # an autotuner may sit under a heuristics wrapper
            if isinstance(item, Autotuner):
                found[name] = sorted(str(config) for config in getattr(item, "cache", {}).values())
                break
            item, seen = getattr(item, "fn", None), seen + 1
    return found


def inner(spec: dict[str, Any]) -> dict[str, Any]:
    """One plain process: load, call, then every timing of the module docstring, for each side."""
    import plain_loop
    import torch

    from pike_harness.worker.inside.protocols import get_protocol
    from pike_harness.worker.inside.timing import TimedLoop
    from pike_harness.worker.records import PairedSpec
    from pike_harness.worker.supervise.engine.paired import block_params

    dev = torch.device(spec["device"])
    warmup_ms, rep_ms = spec["warmup_ms"], spec["rep_ms"]
    allowed = sorted(os.sched_getaffinity(0))
    pin = spec["pin_core"] if spec["pin_core"] in allowed else allowed[-1]
    out: dict[str, Any] = {"pid": os.getpid(), "pin_core": pin, "cores": allowed, "torch": torch.__version__,
                           "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None}
    ref_module = plain_loop.load_module(Path(spec["reference"]), "diag_reference")
    init = ref_module.get_init_inputs()
    x = plain_loop.inputs(ref_module, dev)
    sol_module = None
    with torch.no_grad():
        models = {"eager": plain_loop.build(ref_module.Model, init, dev)}
        if spec.get("solution"):
            sol_module = plain_loop.load_module(Path(spec["solution"]), "diag_solution")
            models["solution"] = plain_loop.build(plain_loop.model_factory(sol_module), init, dev)
        expected = {}
        for side, model in models.items():
            expected[side] = plain_loop.flatten(model(*x))
            plain_loop.synchronize(dev)

        def bench(side: str, warm: float = warmup_ms, rep: float = rep_ms) -> float:
            return plain_loop.bench(lambda: models[side](*x), dev, warm, rep)[1]

        def timed(side: str, params: dict[str, Any]) -> float:
            run = TimedLoop(models[side], [x], [expected[side]], device=dev, protocol=get_protocol("pike", params),
                            atol=math.inf, rtol=math.inf).run()
            return statistics.median(run.samples_ms)

        for side in models:  # JIT, autotuning and cuDNN's first choices happen here, before anything counts
            bench(side)
        rows: dict[str, dict[str, Any]] = {side: {} for side in models}
        for side in models:
            before = current_core()
            rows[side]["unpinned_ms"] = bench(side)
            rows[side]["unpinned_cores"] = [before, current_core()]
        os.sched_setaffinity(0, {pin})
        try:
            pike = {"warmup_ms": warmup_ms, "rep_ms": rep_ms}
            for side in models:
                rows[side]["pinned_ms"] = bench(side)
                rows[side]["timed_ms"] = timed(side, pike)
            block = block_params(pike, PairedSpec(block_ms=spec["block_ms"]))
            for pair in range(spec["pairs"] if len(models) == 2 else 0):
                for side in SIDES if pair % 2 == 0 else SIDES[::-1]:  # R C, C R, ... as the engine orders them
                    rows[side].setdefault("blocks_ms", []).append(timed(side, block))
            for core in allowed:
                os.sched_setaffinity(0, {core})
                for side in models:
                    rows[side].setdefault("sweep_ms", {})[str(core)] = bench(side, spec["sweep_ms"] / 3, spec["sweep_ms"])
        finally:
            os.sched_setaffinity(0, set(allowed))
    out["sides"] = rows
    if sol_module is not None:
        out["autotune"] = autotune_choices(sol_module)
    return out


# ---------------------------------------------------------------- the driver

def run_plain(spec: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    began = time.monotonic()
    result = run_inner(__file__, spec, MARK, timeout_s)
    return result if "error" in result else {**result, "seconds": round(time.monotonic() - began, 1)}


# variant -> (engine options, a patch of this process, paired-spec overrides): the product's paired
# re-timing with one thing changed, to find what part of it holds a speed the plain process does not read.
VARIANTS: dict[str, tuple[dict[str, Any], str | None, dict[str, Any]]] = {
    "stock": ({}, None, {}),  # the defaults (paired_cores "rotate" since 2026-11-29)
    "free": ({"paired_cores": "free"}, None, {}),  # each side where the scheduler puts it
    "rotate": ({"paired_cores": "rotate"}, None, {}),  # both sides of a pair on one core, pairs over the cores
    "cores": ({"quiet_mode": "cores", "pin_cpus": True}, None, {}),  # nothing stopped; the timed side on the kept core
    "long-blocks": ({}, None, {"block_ms": 400.0}),  # a transient after each switch of sides weighs 4x less
    "unsandboxed": ({"unsafe_no_sandbox": True}, None, {}),
    "no-police": ({}, "police_off", {}),  # diag_launch_overhead.police_off: no /proc scans while it runs
    "no-seccomp": ({}, "seccomp_off", {}),  # diag_launch_overhead.seccomp_off: bwrap without the filter
}


def run_harness(task: Any, solution: str, device: str, args: argparse.Namespace, workdir: Path,
                variant: str = "stock", tag: str = "") -> dict[str, Any]:
    """One engine, one paired re-timing of ``solution`` against the task's reference, closed after."""
    import contextlib

    import diag_launch_overhead

    from pike_harness.contracts.model import Limits
    from pike_harness.worker.records import PairedSpec
    from pike_harness.worker.supervise.engine import Engine, EngineConfig

    options, patch, overrides = VARIANTS[variant]
    spec = PairedSpec(**{"block_ms": args.block_ms, "min_pairs": args.pairs, "max_pairs": args.pairs,
                         "max_seconds": 60.0, "target_halfwidth": 0.0, **overrides})
    request = task.eval_request(solution, protocol="pike", paired=spec,
                                protocol_params={"warmup_ms": args.warmup_ms, "rep_ms": args.rep_ms},
                                limits=Limits(compile_timeout_s=600, run_timeout_s=300))
    counter = [0]
    began = time.monotonic()
    with getattr(diag_launch_overhead, patch)(counter) if patch else contextlib.nullcontext():
        engine = Engine(EngineConfig(**{"device": device, "jobs": 2, "prestart": 1, "build_cache": str(workdir / "builds"),
                                        "workdir": workdir / f"engine-{variant}{tag}", "quiet_mode": "stop", **options}))
        try:
            result = engine.submit(request).result(900)
        finally:
            engine.close()
    row: dict[str, Any] = {"variant": variant, "category": result.category, "reason": (result.reason or "")[:300],
                           "seconds": round(time.monotonic() - began, 1), "patched": counter[0] if patch else None,
                           "gpu_clocks": (result.environment or {}).get("gpu_clocks")}
    if result.runtime is not None:
        row["search_ms"] = {"mean": result.runtime.mean_ms, "median": result.runtime.median_ms}
    paired = result.paired
    if paired is None:
        row["paired"] = (result.environment or {}).get("paired")
        return row
    blocks = paired.pairs  # the engine's warm-up pair is not among them
    row.update(speedup=paired.speedup, ci=[paired.ci_low, paired.ci_high], effective_pairs=paired.effective_pairs,
               cores=list(getattr(paired, "cores", []) or []),
               blocks_ms={"eager": [p[0] for p in paired.pairs], "solution": [p[1] for p in paired.pairs]},
               median_ms={"eager": statistics.median(p[0] for p in blocks),
                          "solution": statistics.median(p[1] for p in blocks)})
    return row


def parse_tasks(text: str) -> list[tuple[int, bool]]:
    """``26,30:eager`` -> [(26, True), (30, False)]: the task and whether its solution takes part."""
    out = []
    for item in (part.strip() for part in text.split(",")):
        if item:
            number, _, only = item.partition(":")
            if only not in ("", "eager"):
                raise SystemExit(f"--tasks: {item!r}: the only qualifier is ':eager'")
            out.append((int(number), only != "eager"))
    return out


# ---------------------------------------------------------------- the analysis (pure)

def core_effect(sweeps: list[dict[str, float]]) -> dict[str, Any] | None:
    """How much of the per-core spread is the core's own, across processes.

    Each sweep is one process's ``core -> ms``. Log times are split into a process level (the sweep's
    mean), a core effect (the core's mean residual over sweeps) and what is left. ``core_share`` is
    the core effects' variance over the residuals' total: near 1, the same cores are slow in every
    process; near 0, which core is slow changes (or no core is)."""
    cores = sorted(set.intersection(*(set(s) for s in sweeps)), key=int) if sweeps else []
    if len(sweeps) < 2 or len(cores) < 2:
        return None
    logs = [[math.log(s[c]) for c in cores] for s in sweeps]
    resid = [[v - statistics.fmean(row) for v in row] for row in logs]
    effect = [statistics.fmean(row[j] for row in resid) for j in range(len(cores))]
    left = [row[j] - effect[j] for row in resid for j in range(len(cores))]
    total = sum(v * v for row in resid for v in row)
    explained = len(sweeps) * sum(e * e for e in effect)
    ranked = sorted(zip(effect, cores, strict=True))
    return {"core_share": explained / total if total > 0 else 0.0,
            "slowest_over_fastest": math.exp(ranked[-1][0] - ranked[0][0]),
            "residual_sd": statistics.pstdev(left), "fastest": ranked[0][1], "slowest": ranked[-1][1],
            "within_sweep_spread": statistics.median(max(s[c] for c in cores) / min(s[c] for c in cores)
                                                      for s in sweeps)}


def side_summary(plains: list[dict[str, Any]], harnesses: list[dict[str, Any]], side: str) -> dict[str, Any]:
    """One task side over the rounds: the process-to-process spread unpinned and pinned, the loop's and
    the blocks' ratios to do_bench in one process, and the harness's blocks against the plain process."""
    rows = [p["sides"][side] for p in plains if side in p.get("sides", {})]
    unpinned = [r["unpinned_ms"] for r in rows]
    pinned = [r["pinned_ms"] for r in rows]
    timed = [r["timed_ms"] / r["pinned_ms"] for r in rows]
    blocks = [statistics.median(r["blocks_ms"][1:] or r["blocks_ms"]) / r["pinned_ms"] for r in rows if r.get("blocks_ms")]
    harness = [h["median_ms"][side] for h in harnesses if "median_ms" in h and h.get("variant", "stock") == "stock"]
    plain_ms = statistics.median(unpinned) if unpinned else None
    variants = {}
    for name in dict.fromkeys(h.get("variant", "stock") for h in harnesses):
        values = [h["median_ms"][side] for h in harnesses if "median_ms" in h and h.get("variant", "stock") == name]
        if values and plain_ms:
            variants[name] = {"blocks_ms": values, "over_plain": statistics.median(values) / plain_ms}
    return {"processes": len(rows), "unpinned_ms": unpinned, "pinned_ms": pinned,
            "unpinned_spread": spread(unpinned), "pinned_spread": spread(pinned),
            "timed_over_do_bench": statistics.median(timed) if timed else None,
            "blocks_over_do_bench": statistics.median(blocks) if blocks else None,
            "harness_blocks_ms": harness,
            "harness_over_plain": (statistics.median(harness) / statistics.median(unpinned)) if harness and unpinned else None,
            "cores": core_effect([r["sweep_ms"] for r in rows if r.get("sweep_ms")]), "variants": variants}


def self_pairs(rows: list[dict[str, Any]], tasks: list[tuple[int, bool]]) -> list[dict[str, Any]]:
    """Per self-paired task (``N:eager``) and variant: how many intervals held the true ratio 1.0, and
    how far the estimates lay from it (the median of |log speedup|, as a percentage)."""
    out = []
    for number in (n for n, with_solution in tasks if not with_solution):
        runs = [r for r in rows if r["task"] == number and r["kind"] == "harness" and "speedup" in r]
        for name in dict.fromkeys(r.get("variant", "stock") for r in runs):
            mine = [r for r in runs if r.get("variant", "stock") == name]
            out.append({"task": number, "variant": name, "runs": len(mine),
                        "hold_one": sum(r["ci"][0] <= 1.0 <= r["ci"][1] for r in mine),
                        "median_off": statistics.median(abs(math.log(r["speedup"])) for r in mine),
                        "median_halfwidth": statistics.median((r["ci"][1] - r["ci"][0]) / 2 / r["speedup"] for r in mine)})
    return out


def analyse(rows: list[dict[str, Any]], tasks: list[tuple[int, bool]]) -> list[dict[str, Any]]:
    out = []
    for number, with_solution in tasks:
        plains = [r for r in rows if r["task"] == number and r["kind"] == "plain" and "sides" in r]
        harnesses = [r for r in rows if r["task"] == number and r["kind"] == "harness"]
        for side in SIDES if with_solution else ("eager",):
            out.append({"task": number, "side": side, **side_summary(plains, harnesses, side)})
    return out


def markdown(summaries: list[dict[str, Any]], rows: list[dict[str, Any]], setup: dict[str, Any],
             selfs: list[dict[str, Any]] | None = None) -> str:
    lines = [f"## Where the speed is decided ({setup.get('gpu') or setup['device']}, {setup['date']})", "",
             f"Rounds {setup['rounds']}; do_bench {setup['warmup_ms']:g}/{setup['rep_ms']:g} ms; blocks "
             f"{setup['block_ms']:g} ms, {setup['pairs']} pairs; pinned core {setup['pin_core']}. Ratios are "
             "medians over the plain processes.", "",
             "| task | side | processes | unpinned ms per process | spread | pinned ms per process | spread | "
             "timed/do_bench | blocks/do_bench | harness blocks ms | harness/plain | core share | slowest/fastest core |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in (s for s in summaries if s["processes"]):
        cores = s["cores"] or {}
        lines.append(
            f"| {s['task']} | {s['side']} | {s['processes']} | {', '.join(fmt(v, 4) for v in s['unpinned_ms'])} | "
            f"{fmt(s['unpinned_spread'])} | {', '.join(fmt(v, 4) for v in s['pinned_ms'])} | {fmt(s['pinned_spread'])} | "
            f"{fmt(s['timed_over_do_bench'])} | {fmt(s['blocks_over_do_bench'])} | "
            f"{', '.join(fmt(v, 4) for v in s['harness_blocks_ms'])} | {fmt(s['harness_over_plain'])} | "
            f"{fmt(cores.get('core_share'))} | {fmt(cores.get('slowest_over_fastest'))} |")
    named = list(dict.fromkeys(v for s in summaries for v in s["variants"]))
    if named != ["stock"] and named:
        lines += ["", "Harness variants: each side's median block over the rounds, over the plain process's "
                  "unpinned do_bench (median over its rounds):", "",
                  "| task | side | " + " | ".join(named) + " |", "|---|---|" + "---|" * len(named)]
        for s in summaries:
            cells = [fmt((s["variants"].get(v) or {}).get("over_plain")) for v in named]
            lines.append(f"| {s['task']} | {s['side']} | " + " | ".join(cells) + " |")
    if selfs:
        lines += ["", "Self-pairs (the reference against itself; the true ratio is 1.0):", "",
                  "| task | variant | runs | intervals holding 1.0 | median distance from 1.0 | median half-width |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {x['task']} | {x['variant']} | {x['runs']} | {x['hold_one']} of {x['runs']} | "
                  f"{x['median_off']:.1%} | {x['median_halfwidth']:.1%} |" for x in selfs]
    lines += ["", "| round | task | kind | what it read |", "|---|---|---|---|"]
    for r in rows:
        if r["kind"] == "plain":
            what = "; ".join(f"{side} {fmt(v.get('unpinned_ms'), 4)} ms on cores {v.get('unpinned_cores')}"
                             for side, v in r.get("sides", {}).items()) or r.get("error", "")
            if r.get("autotune"):
                what += f"; autotune {json.dumps(r['autotune'])[:400]}"
        else:
            what = r["error"] if "error" in r else (f"{fmt(r.get('speedup'))}x [{fmt((r.get('ci') or [None])[0])}, {fmt((r.get('ci') or [None, None])[1])}], "
                    f"medians {r.get('median_ms')}, cores {r.get('cores') or 'free'}" if "speedup" in r else f"{r.get('category')}: {r.get('paired') or r.get('reason')}")
        kind = r["kind"] if r["kind"] == "plain" else f"harness ({r.get('variant', 'stock')})"
        lines.append(f"| {r['round']} | {r['task']} | {kind} | {what} |")
    return "\n".join(lines)


def main() -> int:
    parser = diagnosis_arguments(__doc__ or "", "Folder of task_N.py solutions.")
    parser.add_argument("--tasks", default="27,30:eager,26,31")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup-ms", type=float, default=50.0)
    parser.add_argument("--rep-ms", type=float, default=150.0)
    parser.add_argument("--block-ms", type=float, default=100.0)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--sweep-ms", type=float, default=60.0, help="do_bench repetitions per core in the sweep")
    parser.add_argument("--pin-core", type=int, default=3)
    parser.add_argument("--no-harness", action="store_true", help="Only the plain processes.")
    parser.add_argument("--no-plain", action="store_true", help="Only the harness (self-pairs need no plain process).")
    parser.add_argument("--variants", default="stock", help=f"Harness variants per round, of {', '.join(VARIANTS)}.")
    parser.add_argument("--budget-s", type=float, default=480.0, help="No new measurement starts after this.")
    args = parser.parse_args()
    if args.inner is not None:
        print(MARK + json.dumps(inner(json.loads(args.inner))), flush=True)
        return 0
    tasks = parse_tasks(args.tasks)
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"--variants: unknown {', '.join(unknown)} (known: {', '.join(VARIANTS)})")
    chosen = suite(args.suite)
    budget = Budget(args.budget_s)
    setup = {"device": args.device, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "rounds": args.rounds,
             "warmup_ms": args.warmup_ms, "rep_ms": args.rep_ms, "block_ms": args.block_ms, "pairs": args.pairs,
             "pin_core": args.pin_core, "tasks": args.tasks}
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(dir=REPO, prefix=".diag-process-speed-") as scratch:
        for rnd in range(1, args.rounds + 1):
            for number, with_solution in tasks:
                task = chosen.task(number)
                solution = args.solutions / f"task_{number}.py" if with_solution and args.solutions else None
                if with_solution and (solution is None or not solution.is_file()):
                    raise SystemExit(f"no solution for task {number} (--solutions {args.solutions})")
                kinds = [*([] if args.no_plain else ["plain"]), *([] if args.no_harness else [f"harness:{v}" for v in variants])]
                for kind in kinds if rnd % 2 else kinds[::-1]:  # ABBA over the rounds
                    if budget.over():
                        break
                    print(f"[diag] round {rnd} task {number} {kind} ({budget.left():.0f} s left)", flush=True)
                    if kind == "plain":
                        spec = {"device": args.device, "reference": str(task.path), "warmup_ms": args.warmup_ms,
                                "rep_ms": args.rep_ms, "block_ms": args.block_ms, "pairs": args.pairs,
                                "sweep_ms": args.sweep_ms, "pin_core": args.pin_core,
                                "solution": str(solution) if solution else None}
                        row = run_plain(spec, timeout_s=max(30.0, budget.left() + 60))
                    else:
                        source = solution.read_text() if solution else task.source.replace("class Model(", "class ModelNew(")
                        try:
                            row = run_harness(task, source, args.device, args, Path(scratch) / f"t{number}",
                                              variant=kind.partition(":")[2], tag=f"-r{rnd}")
                        except Exception as exc:  # noqa: BLE001 - one variant that cannot run does not end the rest
                            row = {"variant": kind.partition(":")[2], "error": f"{type(exc).__name__}: {exc}"[:400]}
                    rows.append({"round": rnd, "task": number, "kind": kind.partition(":")[0], **row})
                    setup["gpu"] = setup.get("gpu") or row.get("gpu")
                    setup["pin_core"] = row.get("pin_core", setup["pin_core"])  # the inner process's choice
                    summaries = analyse(rows, tasks)
                    selfs = self_pairs(rows, tasks)
                    write(args.out, "diag_process_speed", {"setup": setup, "summaries": summaries, "self_pairs": selfs,
                                                           "rows": rows}, markdown(summaries, rows, setup, selfs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
