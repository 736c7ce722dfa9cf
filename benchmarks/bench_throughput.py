"""Throughput on one device: candidates per hour for a mix where half need a ``load_inline`` build.

The mix: ``--candidates`` candidates alternating between a trivial one (smoke/1, nothing to compile)
and a one-kernel ``load_inline`` GELU (smoke/5) whose source carries a fresh nonce, so every build is
new. Three measurements, one after the other in this run:

* ``ours, cold cache``: the default evaluator, empty build cache, the whole mix submitted at once;
* ``ours, warm cache``: the same sources again on the same evaluator (every build is a cache hit);
* ``pike-like``: compile and time inside one fresh process per candidate, one candidate at a time,
  no build cache; stopped at its share of the budget, its rate taken from whole (build, trivial) pairs.

Reported: wall time, candidates per hour, the device's busy fraction (time some evaluation held the
device lock / wall time), and the ratios to pike-like.

  PYTHONPATH=src:plugins python benchmarks/bench_throughput.py --out $OUT [--device cuda:0]
"""

from __future__ import annotations

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
    fresh_nonce,
    have_ninja,
    inline_source,
    make_evaluator,
    request,
    task,
    workdir,
    write,
)

from pike_harness.worker.supervise.engine.stage_breakdown import breakdown, format_breakdown


def mix(count: int, kind: str, nonces: list[str]) -> list:
    smoke1, smoke5 = task("smoke/1"), task("smoke/5")
    items = []
    for i in range(count):
        if i % 2 == 0:
            items.append(("inline", request(smoke5, inline_source(kind, nonces[i // 2]))))
        else:
            items.append(("trivial", request(smoke1, TRIVIAL)))
    return items


def batch(evaluator, items: list, budget: Budget) -> dict:
    """Submit everything at once; wait (within the budget) for all of it."""
    first_seq = len(evaluator.engine.traces)
    began = time.monotonic()
    futures = [(kind, evaluator.submit(req)) for kind, req in items]
    results, failures = [], 0
    for kind, future in futures:
        try:
            result = future.result(timeout=max(1.0, budget.left() - 10))
        except TimeoutError:  # budget spent: report what finished
            print("[throughput] budget spent: stopped waiting", flush=True)
            break
        except Exception as exc:  # an infrastructure failure (never a verdict): counted, not a candidate done
            print(f"[throughput] {type(exc).__name__}: {exc}", flush=True)
            failures += 1
            continue
        results.append((kind, result))
    wall = time.monotonic() - began
    traces = evaluator.engine.traces[first_seq:]
    held = sum((t.released - t.granted) for t in traces if t.granted is not None and t.released is not None)
    out = summarize(results, wall, held)
    out["infrastructure_failures"] = failures
    figures = breakdown(traces, evaluator.engine.devices, began, time.monotonic())
    out["stage_totals_s"], out["device_idle_s"] = figures["totals_s"], figures["device_idle_s"]
    print(format_breakdown(figures), flush=True)
    return out


def summarize(results: list, wall: float, held: float) -> dict:
    done = len(results)
    categories: dict[str, int] = {}
    for _, result in results:
        categories[result.category] = categories.get(result.category, 0) + 1
    builds = [r.stage_seconds.get("build") for kind, r in results if kind == "inline" and r.stage_seconds.get("build")]
    return {"done": done, "wall_s": wall, "per_hour": done / wall * 3600 if wall > 0 else None,
            "busy_fraction": held / wall if wall > 0 else None, "lock_held_s": held, "categories": categories,
            "mean_build_s": sum(builds) / len(builds) if builds else None,
            "environment": environment_of([r for _, r in results])}


def serial(evaluator, items: list, budget: Budget, share_s: float) -> dict:
    """One candidate at a time until ``share_s`` is spent; the rate counts whole (inline, trivial) pairs."""
    stop = time.monotonic() + share_s
    began = time.monotonic()
    results, pair_end = [], None
    held = 0.0
    for index, (kind, req) in enumerate(items):
        if time.monotonic() > stop or budget.over(margin=10):
            break
        try:
            result = evaluator.submit(req).result(timeout=max(1.0, min(stop, budget.deadline) - time.monotonic()))
        except Exception as exc:
            print(f"[throughput] pike-like stopped: {type(exc).__name__}: {exc}", flush=True)
            break
        trace = evaluator.engine.traces[-1]
        if trace.granted is not None and trace.released is not None:
            held += trace.released - trace.granted
        results.append((kind, result))
        print(f"[throughput] pike-like {kind}: {result.category} after {time.monotonic() - began:.1f} s", flush=True)
        if index % 2 == 1:
            pair_end = (len(results), time.monotonic() - began, held)
    if pair_end is None:
        out = summarize(results, time.monotonic() - began, held)
        out["note"] = "no whole (inline, trivial) pair finished within the budget"
        return out
    count, wall, held_at = pair_end
    return summarize(results[:count], wall, held_at)


def main() -> None:
    parser = arguments(__doc__.splitlines()[0], budget_s=330)
    parser.add_argument("--candidates", type=int, default=16, help="Size of the mix (half need a build).")
    parser.add_argument("--inline", default=None, choices=["cuda", "cpp", "tiny", "compile"],
                        help="Kind of load_inline candidate (default: cuda on GPUs, cpp on CPU).")
    parser.add_argument("--pike-share", type=float, default=0.45,
                        help="Fraction of the budget for the serial pike-like measurement.")
    args = parser.parse_args()
    device = args.device or default_device()
    protocol = args.protocol or "robust"
    kind = args.inline or ("cuda" if device.startswith("cuda") else "cpp")
    if kind != "compile" and not have_ninja():
        print("[throughput] ninja is missing: load_inline cannot build here, so the mix uses torch.compile "
              "candidates instead (not what the issue asks for; install ninja)", flush=True)
        kind = "compile"
    budget = Budget(args.budget_s)
    pike_share = args.pike_share * args.budget_s
    base = workdir(args, "throughput")
    nonces = [fresh_nonce() for _ in range(args.candidates)]
    items = mix(args.candidates, kind, nonces)
    measured: dict[str, dict] = {}

    evaluator = make_evaluator("ours", device, protocol, base / "ours" / "work", base / "ours" / "cache",
                               **extra_options(args))
    try:
        our_budget = Budget(max(30.0, budget.left() - pike_share))
        measured["ours, cold cache"] = batch(evaluator, items, our_budget)
        print(f"[throughput] cold: {measured['ours, cold cache']}", flush=True)
        if not our_budget.over(margin=15):
            measured["ours, warm cache"] = batch(evaluator, mix(args.candidates, kind, nonces), our_budget)
            print(f"[throughput] warm: {measured['ours, warm cache']}", flush=True)
        build_stats = evaluator.stats().get("build_cache")
    finally:
        evaluator.close()

    pike = make_evaluator("pike-like", device, protocol, base / "pike" / "work", None, **extra_options(args))
    try:
        measured["pike-like"] = serial(pike, mix(args.candidates, kind, [fresh_nonce() for _ in nonces]), budget,
                                       max(10.0, budget.left() - 10))
    finally:
        pike.close()

    env = next((m["environment"] for m in measured.values() if m.get("environment")), {})
    lines = [f"### Throughput on one device ({device}, protocol `{protocol}`)", "",
             f"{env_line(env)}; {time.strftime('%Y-%m-%d')}. Mix of {args.candidates} candidates, half with a "
             f"one-kernel `load_inline` build ({kind}, a fresh source each), half trivial.", "",
             "| configuration | candidates done | wall (s) | candidates/hour | device busy | mean build (s) | categories |",
             "|---|---|---|---|---|---|---|"]
    for label, m in measured.items():
        busy = f"{100 * m['busy_fraction']:.0f}%" if m.get("busy_fraction") is not None else "-"
        lines.append(f"| {label} | {m['done']} | {fmt(m['wall_s'], 1)} | {fmt(m['per_hour'], 0)} | {busy} | "
                     f"{fmt(m.get('mean_build_s'), 1)} | {m['categories']} |")
    reference = (measured.get("pike-like") or {}).get("per_hour")
    if reference:
        for label in ("ours, cold cache", "ours, warm cache"):
            if measured.get(label, {}).get("per_hour"):
                lines.append(f"\n{label} / pike-like: {measured[label]['per_hour'] / reference:.1f}x")
    write(args.out, "throughput", {"device": device, "protocol": protocol, "inline": kind,
                                   "candidates": args.candidates, "measured": measured, "build_cache": build_stats},
          "\n".join(lines))


if __name__ == "__main__":
    main()
