"""What the candidate sandbox (bubblewrap, worker/supervise/isolation.py) costs: per-evaluation
overhead and the timed calls, sandbox on and off side by side.

Four evaluators run the same trivial correct candidate (smoke/1's Linear+ReLU), alternating on and
off so drift on the host hits both alike: with pre-started processes (``ours`` / ``unsandboxed``,
the steady state of a search) and without (``no-prestart`` / ``no-prestart-unsandboxed``: spawn to
verdict, the sandbox's start-up included). Overhead = submit-to-result wall time minus the timing
stage; the timed calls are the protocol's headline runtime. Ratios are on / off.

  PYTHONPATH=src:plugins python benchmarks/bench_sandbox.py --out $OUT [--device cuda:0] [--reps 6]
"""

from __future__ import annotations

import statistics
import time

from perf_common import (
    TRIVIAL,
    Budget,
    arguments,
    default_device,
    env_line,
    environment_of,
    extra_options,
    fmt,
    make_evaluator,
    request,
    summary,
    task,
    workdir,
    write,
)

PAIRS = (("ours", "unsandboxed"), ("no-prestart", "no-prestart-unsandboxed"))


def one(evaluator, smoke1) -> dict:
    if evaluator.engine.prestart is not None:
        evaluator.engine.prestart.wait_full(timeout=60.0)
    submitted = time.monotonic()
    result = evaluator.evaluate(request(smoke1, TRIVIAL))
    wall = time.monotonic() - submitted
    return {"category": result.category, "isolation": result.isolation, "wall_s": wall,
            "overhead_s": wall - result.stage_seconds.get("timing", 0.0), "runtime_ms": result.runtime_ms,
            "spawn_s": result.stage_seconds.get("spawn"), "result": result}


def measure_pair(pair: tuple[str, str], device: str, protocol: str, reps: int, base, budget: Budget,
                 extra: dict) -> dict[str, dict]:
    smoke1 = task("smoke/1")
    evaluators = {config: make_evaluator(config, device, protocol, base / config / "work", base / config / "cache",
                                         **extra) for config in pair}
    rows: dict[str, list[dict]] = {config: [] for config in pair}
    try:
        for evaluator in evaluators.values():  # warm-up: reference process, probes
            one(evaluator, smoke1)
        for _ in range(reps):
            if budget.over(margin=10):
                break
            for config in pair:
                rows[config].append(one(evaluators[config], smoke1))
    finally:
        for evaluator in evaluators.values():
            evaluator.close()
    measured = {}
    for config, items in rows.items():
        measured[config] = {
            "isolation": items[0]["isolation"] if items else None,
            "overhead": summary([r["overhead_s"] for r in items]),
            "runtime_ms": summary([r["runtime_ms"] for r in items if r["runtime_ms"] is not None]),
            "spawn": summary([r["spawn_s"] for r in items if r["spawn_s"] is not None]),
            "all_correct": all(r["category"] == "correct" for r in items),
            "environment": environment_of([r["result"] for r in items]),
            "rows": [{k: v for k, v in r.items() if k != "result"} for r in items]}
    return measured


def ratio(on: dict, off: dict) -> float | None:
    if on.get("median") and off.get("median"):
        return on["median"] / off["median"]
    return None


def main() -> None:
    parser = arguments(__doc__.splitlines()[0], budget_s=160)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    device = args.device or default_device()
    protocol = args.protocol or "robust"
    budget = Budget(args.budget_s)
    base = workdir(args, "sandbox")
    measured: dict[str, dict] = {}
    for index, pair in enumerate(PAIRS):
        if budget.over(margin=20):
            print(f"[sandbox] budget spent: {pair} skipped", flush=True)
            continue
        share = Budget(budget.left() / (len(PAIRS) - index))  # each pair gets its part of what is left
        measured.update(measure_pair(pair, device, protocol, args.reps, base, share, extra_options(args)))
        on, off = measured[pair[0]], measured[pair[1]]
        print(f"[sandbox] {pair[0]} vs {pair[1]}: overhead {fmt(on['overhead'].get('median'))} / "
              f"{fmt(off['overhead'].get('median'))} s, runtime {fmt(on['runtime_ms'].get('median'), 4)} / "
              f"{fmt(off['runtime_ms'].get('median'), 4)} ms", flush=True)
    env = next((m["environment"] for m in measured.values() if m["environment"]), {})
    lines = [f"### Sandbox on and off ({device}, protocol `{protocol}`)", "",
             f"{env_line(env)}; {time.strftime('%Y-%m-%d')}. Trivial correct candidate (smoke/1), evaluations "
             "alternating between the sandboxed and the unsandboxed evaluator; overhead = submit-to-result wall "
             "time minus the timing stage; runtime = the protocol's headline.", "",
             "| sandbox on / off | n | overhead median on (s) | off (s) | ratio | spawn median on / off (s) | "
             "runtime median on (ms) | off (ms) | ratio |",
             "|---|---|---|---|---|---|---|---|---|"]
    ratios = {}
    for on_name, off_name in PAIRS:
        if on_name not in measured or off_name not in measured:
            continue
        on, off = measured[on_name], measured[off_name]
        overhead_ratio, runtime_ratio = ratio(on["overhead"], off["overhead"]), ratio(on["runtime_ms"],
                                                                                     off["runtime_ms"])
        ratios[on_name] = {"overhead": overhead_ratio, "runtime": runtime_ratio}
        lines.append(f"| {on_name} ({on['isolation']}) / {off_name} | {on['overhead'].get('n')} | "
                     f"{fmt(on['overhead'].get('median'))} | {fmt(off['overhead'].get('median'))} | "
                     f"{fmt(overhead_ratio, 2)} | {fmt(on['spawn'].get('median'))} / "
                     f"{fmt(off['spawn'].get('median'))} | {fmt(on['runtime_ms'].get('median'), 4)} | "
                     f"{fmt(off['runtime_ms'].get('median'), 4)} | {fmt(runtime_ratio, 3)} |")
    runtimes = [r for r in (x["runtime"] for x in ratios.values()) if r]
    if runtimes:
        lines += ["", f"Timed calls, sandbox on / off: {statistics.fmean(runtimes):.3f}x (mean of the pairs' "
                      "median ratios)."]
    write(args.out, "sandbox", {"device": device, "protocol": protocol, "configs": measured, "ratios": ratios},
          "\n".join(lines))


if __name__ == "__main__":
    main()
