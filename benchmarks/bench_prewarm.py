"""Where a ``torch.compile`` candidate compiles: in phase 1 (``--prewarm jit``) or under the device lock.

Two evaluators side by side in one run, identical but for ``--prewarm`` (``jit`` vs ``off``), each
evaluating ``--reps`` fresh ``torch.compile`` candidates (a new source each, so a cold JIT cache),
one at a time. Reported per configuration: time holding the device (gate granted to released), the
warm-up stage, and submit-to-result wall time; the ratio of device time is what a busy GPU gains.

  PYTHONPATH=src:plugins python benchmarks/bench_prewarm.py --out $OUT [--device cuda:0]
"""

from __future__ import annotations

import time

from perf_common import (
    Budget,
    arguments,
    default_device,
    env_line,
    environment_of,
    extra_options,
    fmt,
    fresh_nonce,
    inline_source,
    make_evaluator,
    request,
    summary,
    task,
    workdir,
    write,
)


def measure(prewarm: str, device: str, protocol: str, reps: int, base, budget: Budget, extra: dict) -> dict:
    evaluator = make_evaluator("ours", device, protocol, base / prewarm / "work", base / prewarm / "cache",
                               prewarm=prewarm, **extra)
    gelu = task("smoke/5")
    rows, results = [], []
    try:
        for _ in range(reps):
            if budget.over(margin=30):
                break
            began = time.monotonic()
            result = evaluator.evaluate(request(gelu, inline_source("compile", fresh_nonce())))
            trace = evaluator.engine.traces[-1]
            results.append(result)
            rows.append({"category": result.category, "wall_s": time.monotonic() - began,
                         "device_s": (trace.released or 0) - (trace.granted or 0) if trace.granted else None,
                         "warmup_s": result.stage_seconds.get("warmup"), "stages": result.stage_seconds})
            print(f"[prewarm] {prewarm}: {rows[-1]['category']}, device {fmt(rows[-1]['device_s'], 2)} s, "
                  f"wall {rows[-1]['wall_s']:.1f} s", flush=True)
    finally:
        evaluator.close()
    return {"rows": rows, "device": summary([r["device_s"] for r in rows if r["device_s"] is not None]),
            "wall": summary([r["wall_s"] for r in rows]), "environment": environment_of(results)}


def main() -> None:
    parser = arguments(__doc__.splitlines()[0], budget_s=240)
    parser.add_argument("--reps", type=int, default=2)
    args = parser.parse_args()
    device = args.device or default_device()
    protocol = args.protocol or "quick"
    budget = Budget(args.budget_s)
    base = workdir(args, "prewarm")
    measured = {mode: measure(mode, device, protocol, args.reps, base, budget, extra_options(args))
                for mode in ("jit", "off")}
    env = next((m["environment"] for m in measured.values() if m["environment"]), {})
    lines = [f"### torch.compile candidates: warm-up in phase 1 or compile under the lock ({device})", "",
             f"{env_line(env)}; {time.strftime('%Y-%m-%d')}. Fresh `torch.compile` candidates (smoke/5, cold JIT "
             f"cache), one at a time, protocol `{protocol}`.", "",
             "| --prewarm | n | device held, median (s) | warm-up stage, median (s) | submit-to-result, median (s) |",
             "|---|---|---|---|---|"]
    for mode, m in measured.items():
        warm = [r["warmup_s"] for r in m["rows"] if r["warmup_s"] is not None]
        lines.append(f"| {mode} | {m['device'].get('n')} | {fmt(m['device'].get('median'), 2)} | "
                     f"{fmt(summary(warm).get('median'), 2) if warm else '-'} | {fmt(m['wall'].get('median'), 1)} |")
    held_on, held_off = measured["jit"]["device"].get("median"), measured["off"]["device"].get("median")
    if held_on and held_off:
        lines += ["", f"Device time per candidate, off / jit: {held_off / held_on:.1f}x"]
    write(args.out, "prewarm", {"device": device, "protocol": protocol, "measured": measured}, "\n".join(lines))


if __name__ == "__main__":
    main()
