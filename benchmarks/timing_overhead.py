"""Where a harness timing differs from a plain do_bench loop: the same eager reference timed five ways, in turns.

The bracketed fidelity run (``fidelity.py --bracket``) found launch-bound references that the harness
times slower than the plain loop even with nothing else loaded. This splits the path in between:

* ``plain``: ``triton.testing.do_bench`` of ``model(*x); synchronize()`` in this process (plain_loop.bench);
* ``loop``: our ``TimedLoop`` with the pike protocol, in this same process, on the same model object:
  differs from ``plain`` only by the loop's own structure (input copy, flush, events, output check);
* ``child``: a LocalEvaluator evaluation (sandbox, pre-started process, quiet timing, reference guard):
  differs from ``loop`` by everything around the loop in the candidate's process;
* ``unsandboxed``: the same without bubblewrap;
* ``bare``: a LocalEvaluator with the engine's scheduling extras off (``pike-like``), sandbox on.

Every round times every way for every task in turn, so drift on the machine shows as round-to-round
spread. Writes ``timing_overhead.{json,md}`` to ``--out``. GPU, or CPU for a smoke check.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from perf_common import REPO, Budget, arguments, default_device, environment_of, make_evaluator, write  # noqa: E402

WAYS = ("plain", "loop", "child", "unsandboxed", "bare")


def in_process(task: Any, device: str, warmup_ms: float, rep_ms: float) -> dict[str, float]:
    """``plain`` and ``loop`` on one model object, built as plain_loop builds it."""
    import plain_loop
    import torch

    from pike_harness.worker.inside.protocols import get_protocol
    from pike_harness.worker.inside.timing import TimedLoop

    dev = torch.device(device)
    module = plain_loop.load_module(task.path, f"overhead_{task.id}")
    x = plain_loop.inputs(module, dev)
    out: dict[str, float] = {}
    with torch.no_grad():
        model = plain_loop.build(module.Model, module.get_init_inputs(), dev)
        expected = plain_loop.flatten(model(*x))
        plain_loop.synchronize(dev)
        out["plain"] = plain_loop.bench(lambda: model(*x), dev, warmup_ms, rep_ms)[0]
        protocol = get_protocol("pike", {"warmup_ms": warmup_ms, "rep_ms": rep_ms})
        run = TimedLoop(model, [x], [expected], device=dev, protocol=protocol, atol=1.0, rtol=1.0).run()
        out["loop"] = statistics.fmean(run.samples_ms)
    return out


def evaluators(device: str, warmup_ms: float, rep_ms: float, workdir: Path) -> dict[str, Any]:
    params = {"warmup_ms": warmup_ms, "rep_ms": rep_ms}
    return {way: make_evaluator(config, device, "pike", workdir / way, None, protocol_params=params)
            for way, config in (("child", "ours"), ("unsandboxed", "unsandboxed"), ("bare", "pike-like"))}


def main() -> int:
    parser = arguments(__doc__.split("\n\n")[0], budget_s=540.0)
    parser.add_argument("--suite", default="level3-pike")
    parser.add_argument("--tasks", default="33,1,15,16,20,6", help="Task ids (default: launch-bound ones and a steady one).")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warmup-ms", type=float, default=250.0)
    parser.add_argument("--rep-ms", type=float, default=1000.0)
    args = parser.parse_args()
    device = args.device or default_device()
    from pike_harness.host.tasks import load_suite

    suite = load_suite(REPO / "tasks" / args.suite, origin="benchmarks")
    tasks = [suite.task(int(t)) for t in args.tasks.split(",")]
    budget = Budget(args.budget_s)
    workdir = args.out / "work"
    made = evaluators(device, args.warmup_ms, args.rep_ms, workdir)
    times: dict[int, dict[str, list[float]]] = {t.id: {w: [] for w in WAYS} for t in tasks}
    results: list[Any] = []
    try:
        for round_ in range(args.rounds):
            for task in tasks:
                if budget.left() < 30:
                    break
                for way, ms in in_process(task, device, args.warmup_ms, args.rep_ms).items():
                    times[task.id][way].append(ms)
                for way, evaluator in made.items():
                    request = task.eval_request(task.source, baseline_mode="eager", hidden_input_sets=0)
                    result = evaluator.submit(request).result(timeout=max(5.0, budget.left()))
                    results.append(result)
                    if result.runtime is not None:
                        times[task.id][way].append(result.runtime.mean_ms)
                print(f"[overhead] round {round_ + 1} task {task.id}: "
                      + ", ".join(f"{w} {v[-1]:.4g}" for w, v in times[task.id].items() if v), flush=True)
    finally:
        for evaluator in made.values():
            evaluator.close()
    rows = []
    for task in tasks:
        means = {w: statistics.fmean(v) if v else None for w, v in times[task.id].items()}
        base = means["plain"]
        rows.append({"task": task.id, "name": task.name, "times": times[task.id], "means": means,
                     "ratios": {w: (m / base if m and base else None) for w, m in means.items()}})
    env = environment_of(results)
    lines = [f"## Eager references timed five ways ({env.get('gpu') or device}, {time.strftime('%Y-%m-%d')})", "",
             f"Mean ms per call over {args.rounds} rounds (each way once per round, in turns); ratio to plain do_bench. "
             f"Protocol pike, warm-up {args.warmup_ms:g} ms, rep {args.rep_ms:g} ms. See the module docstring of "
             "benchmarks/timing_overhead.py for what each way adds.", "",
             "| task | " + " | ".join(WAYS) + " | " + " | ".join(f"{w}/plain" for w in WAYS[1:]) + " |",
             "|---|" + "---|" * (2 * len(WAYS) - 1)]
    for r in rows:
        cells = [f"{r['means'][w]:.4g} [{min(r['times'][w]):.4g}-{max(r['times'][w]):.4g}]" if r["times"][w] else "-"
                 for w in WAYS]
        ratios = [f"{r['ratios'][w]:.3f}" if r["ratios"][w] else "-" for w in WAYS[1:]]
        lines.append(f"| {r['task']} {r['name'].split('_', 1)[-1]} | " + " | ".join(cells + ratios) + " |")
    write(args.out, "timing_overhead", {"environment": env, "rows": rows}, "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
