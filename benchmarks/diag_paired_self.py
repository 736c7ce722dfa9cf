"""A paired re-timing of a computation against itself, per quiet mode: does the interval hold 1.0?

On an H200 (2026-11-29) the GPU test ``test_a_paired_run_on_a_gpu`` paired smoke/1's computation with
itself and read 0.625x [0.454, 0.861]: the blocks of each side flipped between two speeds (about
0.03 ms and 0.06-0.11 ms a call) independently of the other side, so the interval missed the true
ratio. This repeats that pairing under the quiet rule's two modes, in turns (``stop``: everything
else stopped, the timed process on any core; ``cores``: the timed process on the core kept for
timing), and reports per run the speedup, its interval, whether it holds 1.0, and how often each
side's blocks read the fast speed. If pinning the timed side to one core removes the flips, the
flips come from where the process runs after it is resumed.

    python3 benchmarks/diag_paired_self.py --device cuda:0 --rounds 2 --out DIR
    python3 benchmarks/diag_paired_self.py --device cpu --modes stop --rounds 1 --block-ms 5 --out DIR   # CPU path
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from pike_harness.contracts.model import Limits
from pike_harness.host.tasks import load_suite
from pike_harness.worker.records import PairedSpec
from pike_harness.worker.supervise.engine import Engine, EngineConfig

REPO = Path(__file__).resolve().parents[1]
SOURCE = (REPO / "tasks" / "smoke").resolve()


def one_run(device: str, mode: str, spec: PairedSpec, workdir: Path) -> dict[str, Any]:
    """One engine in ``mode``, one paired re-timing of smoke/1's reference against itself."""
    task = load_suite(SOURCE, origin="benchmarks").task(1)
    request = task.eval_request(task.source.replace("class Model(", "class ModelNew("), protocol="robust",
                                paired=spec, limits=Limits(compile_timeout_s=120, run_timeout_s=120, memory_mb=6000))
    engine = Engine(EngineConfig(device=device, jobs=2, prestart=1, build_cache="off", workdir=workdir,
                                 quiet_mode=mode))
    started = time.monotonic()
    try:
        result = engine.submit(request).result(600)
    finally:
        engine.close()
    row: dict[str, Any] = {"mode": mode, "category": result.category, "reason": result.reason,
                           "seconds": round(time.monotonic() - started, 1)}
    paired = result.paired
    if paired is None:
        row["paired"] = result.environment.get("paired")
        return row
    ref = [p[0] for p in paired.pairs]
    cand = [p[1] for p in paired.pairs]
    fast = 1.5 * min(ref + cand)  # a block at most 1.5x the quickest block of either side reads "fast"
    row.update(speedup=paired.speedup, ci=[paired.ci_low, paired.ci_high], pairs=len(paired.pairs), stop=paired.stop,
               holds_one=paired.ci_low <= 1.0 <= paired.ci_high,
               fast_share={"reference": sum(v <= fast for v in ref) / len(ref),
                           "candidate": sum(v <= fast for v in cand) / len(cand)},
               median_ms={"reference": statistics.median(ref), "candidate": statistics.median(cand)},
               blocks_ms=paired.pairs)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--modes", default="stop,cores", help="quiet modes to compare, in turns")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--block-ms", type=float, default=50.0)
    parser.add_argument("--max-pairs", type=int, default=20)
    parser.add_argument("--budget-s", type=float, default=240.0, help="no new run starts after this")
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    args = parser.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    spec = PairedSpec(block_ms=args.block_ms, min_pairs=5, max_pairs=args.max_pairs, max_seconds=30.0)
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    begun = time.monotonic()
    with tempfile.TemporaryDirectory(dir=REPO) as scratch:
        for rnd in range(args.rounds):
            for mode in modes if rnd % 2 == 0 else modes[::-1]:  # ABBA: a drift falls on both alike
                if time.monotonic() - begun > args.budget_s:
                    break
                row = one_run(args.device, mode, spec, Path(scratch) / f"{rnd}-{mode}")
                row["round"] = rnd + 1
                rows.append(row)
                (args.out / "paired-self.json").write_text(json.dumps({"device": args.device, "rows": rows}, indent=1))
                if "speedup" in row:
                    print(f"round {rnd + 1} {mode}: {row['speedup']:.3f}x [{row['ci'][0]:.3f}, {row['ci'][1]:.3f}] "
                          f"{row['pairs']} pairs ({row['stop']}), holds 1.0: {row['holds_one']}, fast blocks "
                          f"ref {row['fast_share']['reference']:.0%} cand {row['fast_share']['candidate']:.0%}, "
                          f"medians {row['median_ms']['reference']:.4f} / {row['median_ms']['candidate']:.4f} ms, "
                          f"{row['seconds']} s", flush=True)
                else:
                    print(f"round {rnd + 1} {mode}: {row['category']} {row.get('paired')} {row['reason']}", flush=True)


if __name__ == "__main__":
    main()
