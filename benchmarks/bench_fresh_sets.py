"""What the fresh input sets cost each evaluation, side by side with one checked set.

Why: since 2026-11-30 a candidate's process makes up to 40 fresh sets (56 with a paired re-timing;
256 MB at most: ``fresh_inputs.pool_size``, ``fresh_inputs.MAX_BYTES``) and masks them
(``timing.FreshCalls``) before the candidate's import, on the CPU, in series with the rest of its
start. That is time every evaluation pays before anything else can happen in its process. This
benchmark measures it per task with the harness's own functions (``loading.inputs_within``,
``timing.FreshCalls``), next to what one ``get_inputs`` call costs (a checked set), and prints the
ratio, and the making's time next to the former rule's (a set made past the cap, then dropped); a pass first makes one set untimed so that lazy imports and allocator warm-up are not
counted. Nothing is sandboxed and nothing runs on a GPU: the sets are made where the harness makes
them, in host memory.

    python3 benchmarks/bench_fresh_sets.py [--tasks tasks/level3-pike] [--ids 1,6,13] [--out DIR]

Prints one line per task and the totals; with ``--out`` writes ``fresh-sets.json`` there.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for path in (REPO / "src", REPO / "plugins"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import torch  # noqa: E402

from pike_harness.worker.inside import loading, timing  # noqa: E402
from pike_harness.worker.supervise import fresh_inputs  # noqa: E402


def former_rule(module: Any, seeds: list[int], max_bytes: int) -> int:
    """How the sets were made until 2026-11-30 night, for the side-by-side: each made, and the one
    that crosses the cap dropped after it was made. Returns how many were kept."""
    total = kept = 0
    for seed in seeds:
        total += loading._tensor_bytes(loading.make_inputs(module, seed))
        if total > max_bytes:
            break
        kept += 1
    return kept


def measure(task_path: Path, pool: int, repeats: int) -> dict[str, Any]:
    """One task: the median over ``repeats`` of one checked set's time, and of making then masking
    ``pool`` fresh sets within ``fresh_inputs.MAX_BYTES`` (seeds 1000.. as stand-ins for drawn ones)."""
    source = loading.inputs_only_source(task_path.read_text(encoding="utf-8"))
    module = loading.load_source(source, loading.module_name_for(source, "pikeh_bench_inputs"))
    loading.make_inputs(module, 0)  # untimed: lazy imports, the allocator's first pages
    one, make, mask, former, sets, set_bytes = [], [], [], [], 0, 0
    for repeat in range(repeats):
        t0 = time.perf_counter()
        checked = loading.make_inputs(module, 1 + repeat)
        one.append(time.perf_counter() - t0)
        set_bytes = loading._tensor_bytes(checked)
        del checked
        seeds = [1000 + repeat * pool + i for i in range(pool)]
        t0 = time.perf_counter()
        made = loading.inputs_within(module, seeds, fresh_inputs.MAX_BYTES)
        t1 = time.perf_counter()
        held = timing.FreshCalls(made)
        t2 = time.perf_counter()
        make.append(t1 - t0)
        mask.append(t2 - t1)
        sets = len(made)
        del made, held
        t0 = time.perf_counter()
        assert former_rule(module, seeds, fresh_inputs.MAX_BYTES) == sets
        former.append(time.perf_counter() - t0)
    fresh_s = statistics.median(make) + statistics.median(mask)
    one_s = statistics.median(one)
    return {"task": task_path.name, "set_mb": round(set_bytes / 2**20, 2), "sets": sets,
            "one_set_s": one_s, "make_s": statistics.median(make), "mask_s": statistics.median(mask),
            "fresh_s": fresh_s, "ratio": fresh_s / one_s if one_s > 0 else None,
            "former_make_s": statistics.median(former)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=Path, default=REPO / "tasks" / "level3-pike")
    parser.add_argument("--ids", default="", help="task ids, comma-separated (default: every task)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not args.tasks.is_dir():
        print(f"bench_fresh_sets: {args.tasks} is not a folder", file=sys.stderr)
        return 2
    wanted = {int(i) for i in args.ids.split(",") if i.strip()}
    files = sorted((p for p in args.tasks.glob("*.py") if p.name.split("_", 1)[0].isdigit()),
                   key=lambda p: int(p.name.split("_", 1)[0]))
    files = [p for p in files if not wanted or int(p.name.split("_", 1)[0]) in wanted]
    default_sets = 8  # EvalRequest.fresh_input_sets' default
    rows: list[dict[str, Any]] = []
    print(f"cpu: {os.cpu_count()} cores; torch threads {torch.get_num_threads()}", flush=True)
    for paired in (False, True):
        pool = fresh_inputs.pool_size(default_sets, paired)
        for path in files:
            row = measure(path, pool, args.repeats) | {"pool": pool}
            rows.append(row)
            print(f"{row['task']}\tpool {pool}\t{row['set_mb']} MB x {row['sets']}\tone set "
                  f"{row['one_set_s'] * 1000:.1f} ms\tfresh {row['fresh_s'] * 1000:.1f} ms (make "
                  f"{row['make_s'] * 1000:.1f}, mask {row['mask_s'] * 1000:.1f})\tratio {row['ratio'] or 0:.1f}\t"
                  f"made before the cap rule {row['former_make_s'] * 1000:.1f} ms",
                  flush=True)
        chosen = [row for row in rows if row["pool"] == pool]
        total = sum(row["fresh_s"] for row in chosen)
        print(f"pool {pool}: {len(chosen)} tasks, fresh sets {total:.2f} s in all, median "
              f"{statistics.median(row['fresh_s'] for row in chosen) * 1000:.1f} ms, max "
              f"{max(row['fresh_s'] for row in chosen) * 1000:.1f} ms per evaluation; one checked set "
              f"{sum(row['one_set_s'] for row in chosen):.2f} s in all; making them {sum(row['make_s'] for row in chosen):.2f} s, "
              f"{sum(row['former_make_s'] for row in chosen):.2f} s by the former rule (ratio "
              f"{sum(row['make_s'] for row in chosen) / sum(row['former_make_s'] for row in chosen):.2f})", flush=True)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "fresh-sets.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
