"""Per-candidate overhead: submit-to-result time of a trivial correct candidate, minus its timing.

For each configuration (``ours`` with pre-started processes, ``no-prestart``, ``pike-like``) one
evaluator is built, warmed with one evaluation (reference process started, caches probed), and then
evaluates the same trivial candidate (smoke/1's Linear+ReLU, nothing to compile) ``--reps`` times,
one after the other. Overhead = submit-to-result wall time minus the protocol's own time (the timing
stage: first call, estimate, warm-up and timed calls). With pre-started processes the pool is
refilled before each submission (steady state of a search, where LLM latency leaves time for that).

  PYTHONPATH=src:plugins python benchmarks/bench_overhead.py --out $OUT [--device cuda:0]
"""

from __future__ import annotations

import time

from perf_common import (
    CONFIGS,
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

TARGET_S = 1.0


def measure(config: str, device: str, protocol: str, reps: int, base, budget: Budget, extra: dict) -> dict:
    evaluator = make_evaluator(config, device, protocol, base / config / "work", base / config / "cache", **extra)
    smoke1 = task("smoke/1")
    rows, results = [], []
    try:
        first = evaluator.evaluate(request(smoke1, TRIVIAL))  # warm-up: reference process, probes
        results.append(first)
        for _ in range(reps):
            if budget.over(margin=15):
                break
            if evaluator.engine.prestart is not None:
                evaluator.engine.prestart.wait_full(timeout=min(60.0, max(1.0, budget.left() - 15)))
            submitted = time.monotonic()
            result = evaluator.evaluate(request(smoke1, TRIVIAL))
            wall = time.monotonic() - submitted
            results.append(result)
            stages = dict(result.stage_seconds)
            timed_loop = (result.runtime.host_wall_ms / 1000.0) if result.runtime else None
            rows.append({"category": result.category, "wall_s": wall,
                         "overhead_s": wall - stages.get("timing", 0.0),
                         "overhead_minus_timed_loop_s": wall - (timed_loop or 0.0),
                         "stages": stages, "prestarted": result.environment.get("prestarted")})
    finally:
        evaluator.close()
    return {"config": config, "options": CONFIGS[config], "first_eval_s": results[0].stage_seconds.get("total"),
            "rows": rows, "overhead": summary([r["overhead_s"] for r in rows]),
            "wall": summary([r["wall_s"] for r in rows]),
            "all_correct": all(r["category"] == "correct" for r in rows), "environment": environment_of(results)}


def main() -> None:
    parser = arguments(__doc__.splitlines()[0], budget_s=150)
    parser.add_argument("--reps", type=int, default=8)
    parser.add_argument("--configs", default="ours,no-prestart,pike-like")
    args = parser.parse_args()
    device = args.device or default_device()
    protocol = args.protocol or "quick"
    budget = Budget(args.budget_s)
    base = workdir(args, "overhead")
    measured = {}
    for config in args.configs.split(","):
        if budget.over(margin=20):
            print(f"[overhead] budget spent: {config} skipped", flush=True)
            continue
        measured[config] = measure(config, device, protocol, args.reps, base, budget, extra_options(args))
        print(f"[overhead] {config}: median {fmt(measured[config]['overhead'].get('median'))} s", flush=True)
    env = next((m["environment"] for m in measured.values() if m["environment"]), {})
    lines = [f"### Overhead per candidate ({device}, protocol `{protocol}`)", "",
             f"{env_line(env)}; {time.strftime('%Y-%m-%d')}. Trivial correct candidate (smoke/1), "
             f"evaluated one at a time after one warm-up evaluation; overhead = submit-to-result wall time "
             f"minus the timing stage. Target: under {TARGET_S:g} s.", "",
             "| configuration | n | overhead median (s) | mean | min | max | submit-to-result median (s) |",
             "|---|---|---|---|---|---|---|"]
    for config, m in measured.items():
        o, w = m["overhead"], m["wall"]
        lines.append(f"| {config} | {o.get('n')} | {fmt(o.get('median'))} | {fmt(o.get('mean'))} | "
                     f"{fmt(o.get('min'))} | {fmt(o.get('max'))} | {fmt(w.get('median'))} |")
    if "ours" in measured and "pike-like" in measured and measured["ours"]["overhead"].get("median"):
        ratio = measured["pike-like"]["overhead"]["median"] / measured["ours"]["overhead"]["median"]
        lines += ["", f"pike-like / ours overhead: {ratio:.1f}x"]
    if "ours" in measured and measured["ours"]["rows"]:
        stages = measured["ours"]["rows"][-1]["stages"]
        lines += ["", "Stages of the last `ours` evaluation (s): " +
                  ", ".join(f"{k} {v:.3f}" for k, v in sorted(stages.items()))]
    write(args.out, "overhead", {"device": device, "protocol": protocol, "configs": measured,
                                 "target_s": TARGET_S}, "\n".join(lines))


if __name__ == "__main__":
    main()
