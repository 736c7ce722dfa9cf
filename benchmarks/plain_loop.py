"""PIKE's evaluation protocol written plainly: the independent side of the fidelity benchmark.

Nothing here comes from pike_harness (no worker, no timing code, no sandbox): torch, triton and the
standard library only, so that a disagreement between this loop and the harness points at the
harness (or at this page, which is short enough to check by eye). The protocol is PIKE's for
level3-pike:

* the reference task file's ``get_init_inputs()``; each model built after ``torch.manual_seed(1)``
  (the solution's ``ModelNew``, else its ``Model``; a class or any callable returning an ``nn.Module``),
  moved to the device, ``.eval()``;
* inputs from the reference's ``get_inputs()`` after ``torch.manual_seed(0)``, moved to the device;
* under ``no_grad``: one call of each, ``torch.allclose(ref, new, atol, rtol)`` (1e-2 both);
* ``triton.testing.do_bench(lambda: (model(*x), torch.cuda.synchronize()), warmup, rep,
  return_mode="mean")`` (asked for all samples, whose mean that is, so the median comes too). On a CPU (tests, smoke checks) a plain ``perf_counter`` loop with the same
  warm-up and repetition budgets stands in for do_bench.

The eager reference is timed first, before the solution's file is even imported: a solution that
changes global state at import (TF32 flags, cuDNN benchmark mode) must not change the eager time.
Run one process per task (``python plain_loop.py --reference R --solution S``): the last stdout line
is ``PLAIN_RESULT {json}``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import statistics
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

MARK = "PLAIN_RESULT "
WEIGHT_SEED, INPUT_SEED = 1, 0


def load_module(path: Path, name: str) -> ModuleType:
    """Execute a task or solution file as a module of its own (registered, so dataclasses work)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def model_factory(module: ModuleType) -> Callable[..., Any]:
    """The solution's ``ModelNew``, else its ``Model``: a class or a factory function, as PIKE accepts."""
    for name in ("ModelNew", "Model"):
        factory = getattr(module, name, None)
        if callable(factory):
            return factory
    raise AttributeError("defines none of ModelNew, Model")


def build(factory: Callable[..., Any], init_inputs: Sequence[Any], device: torch.device) -> torch.nn.Module:
    torch.manual_seed(WEIGHT_SEED)
    model = factory(*init_inputs)
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"the factory returned {type(model).__name__}, not an nn.Module")
    return model.to(device).eval()


def inputs(module: ModuleType, device: torch.device, seed: int = INPUT_SEED) -> list[Any]:
    torch.manual_seed(seed)
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]


def flatten(output: Any) -> list[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, (list, tuple)):
        return [t for item in output for t in flatten(item)]
    return []


def max_diff(a: Any, b: Any) -> float | None:
    """Largest absolute difference of two outputs; None when their structure or shapes differ."""
    xs, ys = flatten(a), flatten(b)
    if len(xs) != len(ys) or not xs or any(x.shape != y.shape for x, y in zip(xs, ys, strict=True)):
        return None
    return max(float((x.float() - y.float()).abs().max()) if x.numel() else 0.0 for x, y in zip(xs, ys, strict=True))


def allclose(ref: Any, new: Any, atol: float, rtol: float) -> bool:
    xs, ys = flatten(ref), flatten(new)
    if len(xs) != len(ys) or not xs or any(x.shape != y.shape for x, y in zip(xs, ys, strict=True)):
        return False
    return all(torch.allclose(x.float(), y.float(), atol=atol, rtol=rtol) for x, y in zip(xs, ys, strict=True))


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench(fn: Callable[[], Any], device: torch.device, warmup_ms: float, rep_ms: float) -> tuple[float, float]:
    """(mean, median) milliseconds per call: do_bench on CUDA (PIKE's call), a perf_counter loop on a CPU.

    do_bench is asked for every sample (``return_mode="all"``) so that one run gives both statistics;
    its mean is what ``return_mode="mean"`` returns (torch.mean of the same samples). A Triton without
    "all" gets ``"mean"``, and the median is then not known."""
    if device.type == "cuda":
        import triton.testing

        def call() -> Any:
            return fn(), torch.cuda.synchronize()

        try:
            times = [float(t) for t in triton.testing.do_bench(call, warmup=warmup_ms, rep=rep_ms, return_mode="all")]
        except (AssertionError, ValueError):
            mean = float(triton.testing.do_bench(call, warmup=warmup_ms, rep=rep_ms, return_mode="mean"))
            return mean, math.nan
        return statistics.fmean(times), statistics.median(times)
    began = time.perf_counter()
    while (time.perf_counter() - began) * 1e3 < warmup_ms:
        fn()
    times, began = [], time.perf_counter()
    while not times or (time.perf_counter() - began) * 1e3 < rep_ms:
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.fmean(times), statistics.median(times)


def timed(fn: Callable[[], Any], device: torch.device, repeats: int, warmup_ms: float,
          rep_ms: float) -> tuple[list[float], list[float]]:
    """``repeats`` runs of bench: (their means, their medians)."""
    runs = [bench(fn, device, warmup_ms, rep_ms) for _ in range(repeats)]
    return [mean for mean, _ in runs], [median for _, median in runs]


def measure(reference: Path, solution: Path | None, device: torch.device, repeats: int, warmup_ms: float,
            rep_ms: float, atol: float, rtol: float, time_eager: bool = True) -> dict[str, Any]:
    """Check ``solution`` against ``reference`` once and time both ``repeats`` times (eager first)."""
    out: dict[str, Any] = {"device": str(device), "torch": torch.__version__,
                           "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None}
    stages: dict[str, float] = {}  # wall seconds per stage: where a slow task's time went
    out["stage_s"] = stages
    mark = time.perf_counter()

    def stage(name: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        stages[name] = round(now - mark, 3)
        mark = now

    ref_module = load_module(reference, "plain_reference")
    init = ref_module.get_init_inputs()
    x = inputs(ref_module, device)
    with torch.no_grad():
        ref = build(ref_module.Model, init, device)
        ref_out = ref(*x)
        synchronize(device)
        stage("reference")
        if time_eager:
            out["eager_ms"], out["eager_median_ms"] = timed(lambda: ref(*x), device, repeats, warmup_ms, rep_ms)
            stage("eager_timing")
        if solution is None:
            return out
        step = "compile"
        try:
            module = load_module(solution, "plain_solution")
            stage("import")
            step = "build"
            new = build(model_factory(module), init, device)
            stage("build")
            step = "run"
            new_out = new(*x)
            synchronize(device)
            stage("first_call")
        except Exception as exc:  # noqa: BLE001 - the solution's failure is the verdict
            out.update(verdict=f"{step}_error", reason=f"{type(exc).__name__}: {exc}"[:400])
            return out
        out["max_diff"] = max_diff(ref_out, new_out)
        if not allclose(ref_out, new_out, atol, rtol):
            out["verdict"] = "incorrect"
            return out
        out["verdict"] = "correct"
        out["solution_ms"], out["solution_median_ms"] = timed(lambda: new(*x), device, repeats, warmup_ms, rep_ms)
        stage("solution_timing")
    return out


def warm(solution: Path, reference: Path, device: torch.device) -> dict[str, Any]:
    """Import, build and call the solution once: fills the extension and JIT caches before any timing."""
    ref_module = load_module(reference, "plain_reference")
    module = load_module(solution, "plain_solution")
    with torch.no_grad():
        new = build(model_factory(module), ref_module.get_init_inputs(), device)
        new(*inputs(ref_module, device))
        synchronize(device)
    return {"warmed": True}


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", type=Path, required=True, help="The task file (defines Model, get_inputs).")
    parser.add_argument("--solution", type=Path, default=None, help="The solution file (none: time eager only).")
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--repeats", type=int, default=2, help="Timings of each model (launch-bound ones wander).")
    parser.add_argument("--warmup-ms", type=float, default=500.0)
    parser.add_argument("--rep-ms", type=float, default=2000.0)
    parser.add_argument("--atol", type=float, default=1e-2)
    parser.add_argument("--rtol", type=float, default=1e-2)
    parser.add_argument("--no-eager", action="store_true", help="Do not time the reference.")
    parser.add_argument("--warm-only", action="store_true", help="Only import, build and call the solution once.")
    return parser


def main() -> int:
    args = arguments().parse_args()
    device = torch.device(args.device)
    try:
        if args.warm_only:
            result = warm(args.solution, args.reference, device)
        else:
            result = measure(args.reference, args.solution, device, args.repeats, args.warmup_ms, args.rep_ms,
                             args.atol, args.rtol, time_eager=not args.no_eager)
    except Exception as exc:  # noqa: BLE001 - the reference itself failed: report it, do not hide it
        result = {"verdict": "reference_error", "reason": f"{type(exc).__name__}: {exc}"[:400],
                  "traceback": traceback.format_exc()[-2000:]}
    print(MARK + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
