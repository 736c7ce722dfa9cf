"""How many candidate processes can start at once before each one slows down (the --start-slots default).

A candidate process's start is Python, torch's import and the device's initialisation, in the
evaluator's sandbox: what ``--start-slots`` admits a few at a time. For each concurrency in
``--levels`` this starts that many processes together (exactly as the engine does: ``spawn_child``
with the engine's settings, waiting for each to say ready), and records each one's start time.
Per level: mean and max seconds per process, and starts per second (level / slowest); the
suggested default is the smallest level whose rate is within ``--within`` of the best one (more
admitted at once only makes each start slower).

Writes ``admission.json`` and ``admission.md`` to ``--out``.

  PYTHONPATH=src:plugins python3 benchmarks/bench_admission.py --out $OUT [--levels 1,2,4,8,16]
  PYTHONPATH=src:plugins python3 benchmarks/bench_admission.py --device cpu --levels 1,2 --out /tmp/adm
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perf_common import Budget, arguments, fmt, workdir, write  # noqa: E402

from pike_harness.worker.supervise.engine import Engine, EngineConfig  # noqa: E402
from pike_harness.worker.supervise.prestart import poll_ready  # noqa: E402
from pike_harness.worker.supervise.spawn import spawn_child  # noqa: E402


def start_together(engine: Engine, device: str, count: int, budget: Budget) -> list[float | None]:
    """Start ``count`` processes at once; each one's seconds until ready (None: died or over budget)."""
    began = time.monotonic()
    spawned = [spawn_child(engine.settings, device, prestart=True, cpus=engine.load_cpus) for _ in range(count)]
    seconds: list[float | None] = [None] * count
    try:
        while any(s is None for s in seconds) and not budget.over():
            for i, process in enumerate(spawned):
                if seconds[i] is None:
                    state = poll_ready(process)
                    if state is not None:
                        seconds[i] = time.monotonic() - began if state else float("nan")
            time.sleep(0.01)
    finally:
        for process in spawned:
            process.discard()
    return [s if s is None or s == s else None for s in seconds]


def suggest(rows: list[dict[str, Any]], within: float) -> int | None:
    rated = [r for r in rows if r.get("starts_per_s")]
    if not rated:
        return None
    best = max(r["starts_per_s"] for r in rated)
    return min(r["level"] for r in rated if r["starts_per_s"] >= (1 - within) * best)


def main() -> int:
    parser = arguments(__doc__.splitlines()[0], budget_s=150)
    parser.add_argument("--levels", default="1,2,4,8,16", help="Concurrencies to measure.")
    parser.add_argument("--within", type=float, default=0.10,
                        help="Suggest the smallest level within this fraction of the best start rate.")
    args = parser.parse_args()
    device = args.device or "cuda:0"
    budget = Budget(args.budget_s)
    base = workdir(args, "admission")
    engine = Engine(EngineConfig(device=device, prestart=0, build_cache="off", workdir=base / "work"))
    rows = []
    try:
        start_together(engine, device, 1, budget)  # unrecorded: the first start reads torch from disk
        for level in [int(x) for x in args.levels.split(",")]:
            if budget.over(margin=5):
                break
            seconds = start_together(engine, device, level, budget)
            ok = [s for s in seconds if s is not None]
            rows.append({"level": level, "started": len(ok), "seconds": ok,
                         "mean_s": statistics.fmean(ok) if ok else None, "max_s": max(ok) if ok else None,
                         "starts_per_s": len(ok) / max(ok) if ok else None})
            print(f"[admission] {rows[-1]}", flush=True)
        scheduling = engine.describe()
    finally:
        engine.close()
    chosen = suggest(rows, args.within)
    lines = [f"### Candidate process starts at once ({device}, {scheduling['host'].get('cpu_count')} cores)", "",
             "| at once | started | mean s/process | slowest (s) | starts/s |", "|---|---|---|---|---|"]
    lines += [f"| {r['level']} | {r['started']} | {fmt(r['mean_s'], 2)} | {fmt(r['max_s'], 2)} | "
              f"{fmt(r['starts_per_s'], 2)} |" for r in rows]
    lines += ["", f"Suggested --start-slots: {chosen} (the smallest level within {100 * args.within:.0f}% of the "
                  "best start rate)."]
    write(args.out, "admission", {"device": device, "rows": rows, "suggested": chosen,
                                  "host": scheduling.get("host")}, "\n".join(lines))
    return 0 if rows else 1


if __name__ == "__main__":
    raise SystemExit(main())
