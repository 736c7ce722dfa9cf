"""The reference process's comparison of a candidate's checked calls (``checked_calls.judge``): this tree
against another, side by side in one run, on outputs of a few sizes.

``judge`` runs inside the device gate on a GPU host (issue 19's "compare" stage), so its cost is gate
time. Each tree runs in a subprocess of its own (``PYTHONPATH=TREE/src``) that times ``judge`` on the
same synthetic outputs (the candidate's equal to the reference's plus a small error, five planned
calls as ``check_plan(3)`` makes them) and prints the median seconds; this process prints both and the
ratio, and writes ``bench_compare.{json,md}``.

  mkdir -p .bench-trees && git archive REV --prefix=old/ src | tar -x -C .bench-trees
  python3 benchmarks/bench_compare.py --old-tree .bench-trees/old --device cpu --out /tmp/cmp
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, statistics, sys, time
import torch
from pike_harness.worker.check_plan import check_plan
from pike_harness.worker.supervise.checked_calls import judge

device, size_mb, repeats = torch.device(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0)
plan = check_plan(3)
n = size_mb * 1024 * 1024 // 4
base = [torch.randn(n, device=device) for _ in range(3)]
reference = [[base[call.set_index].clone()] for call in plan]
candidate = [[t + 1e-4 * torch.randn_like(t) for t in outputs] for outputs in reference]
labels = ["seed 0", "hidden seed", "hidden seed"]
times = []
for _ in range(repeats + 1):
    if device.type == "cuda":
        torch.cuda.synchronize()
    began = time.perf_counter()
    verdict = judge(candidate, reference, plan, labels, atol=1e-2, rtol=1e-2)
    if device.type == "cuda":
        torch.cuda.synchronize()
    times.append(time.perf_counter() - began)
assert verdict.category is None, verdict.reason
print(json.dumps({"median_s": statistics.median(times[1:]), "checks": len(verdict.checks)}))
"""


def run(tree: Path, device: str, size_mb: int, repeats: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    done = subprocess.run([sys.executable, "-c", CHILD, device, str(size_mb), str(repeats)], capture_output=True,
                          text=True, env=env, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old-tree", type=Path, required=True, help="A tree with src/ to compare against.")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes-mb", default="1,16,64",
                        help="One float32 output of each size per call (a GPU takes 1,64,1024 in seconds).")
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    args = parser.parse_args()
    rows = []
    for size in (int(x) for x in args.sizes_mb.split(",")):
        old = run(args.old_tree.resolve(), args.device, size, args.repeats)
        new = run(REPO, args.device, size, args.repeats)
        rows.append({"size_mb": size, "old_s": old["median_s"], "new_s": new["median_s"],
                     "ratio": new["median_s"] / old["median_s"]})
        print(f"{size:4d} MB per output: old {old['median_s']:.4f} s, new {new['median_s']:.4f} s, "
              f"new/old {rows[-1]['ratio']:.2f}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    lines = [f"## judge(): five checked calls, old tree against this one ({args.device}, {time.strftime('%Y-%m-%d')})",
             "", "| output size | old (s, median) | new (s, median) | new / old |", "|---|---|---|---|"]
    lines += [f"| {r['size_mb']} MB | {r['old_s']:.4f} | {r['new_s']:.4f} | {r['ratio']:.2f} |" for r in rows]
    (args.out / "bench_compare.md").write_text("\n".join(lines) + "\n")
    (args.out / "bench_compare.json").write_text(json.dumps({"device": args.device, "rows": rows}, indent=1) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
