"""Which step of our timing loop makes a launch-bound model slower than do_bench: the loop built up step by step.

``timing_overhead.py`` found our ``TimedLoop`` 1.5-1.8x slower than ``triton.testing.do_bench`` on
launch-bound references (0.05-0.2 ms per call) in one process, on one model object. Here the same
model is timed by do_bench, then by a copy of do_bench's loop, then with each step of ours added in
turn, in rounds, so the step that costs shows as a jump in one column. GPU only (CUDA events).

  python3 benchmarks/loop_variants.py --tasks 1,33 --rounds 3 --out OUT
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch  # noqa: E402
from perf_common import REPO, arguments, write  # noqa: E402

FLUSH_MB = 256


def variants(model: Callable[..., Any], x: list[Any], expected: list[torch.Tensor]) -> dict[str, Callable[[int], list[float]]]:
    """name -> f(n): n timed calls, their start->end milliseconds."""
    flush = torch.empty(FLUSH_MB * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
    buffers = [t.clone() for t in x]
    counter = torch.zeros((), dtype=torch.int64, device="cuda")

    def loop(pre_sync: bool, before: bool, copy: bool, validate: bool) -> Callable[[int], list[float]]:
        def run(n: int) -> list[float]:
            events = []
            for _ in range(n):
                args = x
                if copy:
                    for buffer, value in zip(buffers, x, strict=True):
                        buffer.copy_(value)
                    args = buffers
                if pre_sync:
                    torch.cuda.synchronize()
                b = torch.cuda.Event(enable_timing=True) if before else None
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                if b is not None:
                    b.record()
                flush.zero_()
                s.record()
                out = model(*args)
                torch.cuda.synchronize()
                e.record()
                if validate:
                    got = out if isinstance(out, torch.Tensor) else out[0]
                    counter.add_(torch.count_nonzero(torch.logical_not(torch.isclose(got, expected[0], rtol=1,
                                                                                      atol=1))))
                events.append((s, e))
            torch.cuda.synchronize()
            return [s.elapsed_time(e) for s, e in events]
        return run

    return {
        "copy_of_do_bench": loop(False, False, False, False),
        "+sync_before_flush": loop(True, False, False, False),
        "+before_event": loop(True, True, False, False),
        "+input_copy": loop(True, True, True, False),
        "+output_check": loop(True, True, True, True),
    }


def main() -> int:
    parser = arguments(__doc__.split("\n\n")[0], budget_s=300.0)
    parser.add_argument("--suite", default="level3-pike")
    parser.add_argument("--tasks", default="1,33")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    import plain_loop
    import triton.testing

    from pike_harness.host.tasks import load_suite
    from pike_harness.worker.inside.protocols import get_protocol
    from pike_harness.worker.inside.timing import TimedLoop

    suite = load_suite(REPO / "tasks" / args.suite, origin="benchmarks")
    dev = torch.device("cuda:0")
    rows = []
    for task_id in (int(t) for t in args.tasks.split(",")):
        task = suite.task(task_id)
        module = plain_loop.load_module(task.path, f"variants_{task_id}")
        x = plain_loop.inputs(module, dev)
        times: dict[str, list[float]] = {}
        with torch.no_grad():
            model = plain_loop.build(module.Model, module.get_init_inputs(), dev)
            expected = plain_loop.flatten(model(*x))
            ways = variants(model, x, expected)
            protocol = get_protocol("pike", {"warmup_ms": 100, "rep_ms": 400})
            for _ in range(args.rounds):
                def call(model: Any = model, x: list[Any] = x) -> Any:
                    return model(*x), torch.cuda.synchronize()

                times.setdefault("do_bench", []).append(float(triton.testing.do_bench(
                    call, warmup=100, rep=400, return_mode="mean")))
                for name, run in ways.items():
                    run(200)  # warm-up, no timing kept
                    times.setdefault(name, []).append(statistics.fmean(run(args.calls)))
                timed = TimedLoop(model, [x], [expected], device=dev, protocol=protocol, atol=1.0, rtol=1.0).run()
                times.setdefault("TimedLoop", []).append(statistics.fmean(timed.samples_ms))
        rows.append({"task": task_id, "name": task.name, "times": times})
        print(task_id, {k: round(statistics.fmean(v), 4) for k, v in times.items()}, flush=True)
    names = list(rows[0]["times"]) if rows else []
    lines = [f"## Our timing loop built up from do_bench's ({torch.cuda.get_device_name(dev)}, "
             f"{time.strftime('%Y-%m-%d')})", "", f"Mean ms per call, {args.rounds} rounds (range in brackets).", "",
             "| task | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for r in rows:
        lines.append(f"| {r['task']} {r['name'].split('_', 1)[-1]} | " + " | ".join(
            f"{statistics.fmean(v):.4g} [{min(v):.4g}-{max(v):.4g}]" for v in r["times"].values()) + " |")
    write(args.out, "loop_variants", {"rows": rows}, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
