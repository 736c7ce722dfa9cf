"""Where a candidate's time goes: a few calls under ``torch.profiler``, summarised in the candidate's process.

Runs after the timing stage, on the model and inputs that were just checked and timed (``EvalRequest.
profile``; the child's "profile" command), so the profile is of exactly what was judged. The summary,
plain JSON, holds:

- ``kernels``: on a GPU every kernel (on a CPU every top-level operator) by total time, with its calls
  per forward call and its *origin*: ``custom`` (load_inline / Triton / anything not PyTorch's),
  ``library`` (cuBLAS, cuDNN, CUTLASS), ``pytorch`` (ATen's own kernels) or ``memory`` (copies, sets);
- ``share``: the share of device (or operator) time per origin;
- ``gaps``: host-side gaps: the part of each call's wall time the device (or, on a CPU, an operator)
  was idle, i.e. launch and Python overhead.

The origin is read from kernel names (``classify``), a heuristic that docs/report.md states. torch and
the standard library only.
"""

from __future__ import annotations

import re
import time
from typing import Any

import torch

PROFILED_CALLS = 5
TOP_KERNELS = 25

LIBRARY = re.compile(r"cublas|cudnn|cutlass|xmma|nvjet|cutensor|magma|rocblas|miopen|hipblas|"
                     r"^(void )?(sm\d+|ampere|volta|turing|hopper)_|gemv2?[NT]_kernel|gemmSN|gemmk1",
                     re.IGNORECASE)
PYTORCH = re.compile(r"at::|at_cuda|c10::|pytorch|elementwise_kernel|vectorized_|reduce_kernel|"
                     r"distribution_|index_elementwise|CatArrayBatched|softmax_warp|cunn_|"
                     r"native::|^aten::", re.IGNORECASE)
MEMORY = re.compile(r"^memcpy|^memset|Memcpy|Memset", re.IGNORECASE)


def classify(name: str) -> str:
    """``memory``, ``library``, ``pytorch`` or ``custom`` for a kernel or operator name."""
    if MEMORY.search(name):
        return "memory"
    if LIBRARY.search(name) and not name.startswith("triton"):
        return "library"
    if PYTORCH.search(name):
        return "pytorch"
    return "custom"


def _union_us(intervals: list[tuple[float, float]]) -> float:
    """Total length of the union of [start, end) intervals."""
    total, end_so_far = 0.0, None
    for start, end in sorted(intervals):
        if end_so_far is None or start > end_so_far:
            total += end - start
            end_so_far = end
        elif end > end_so_far:
            total += end - end_so_far
            end_so_far = end
    return total


def profile(model: Any, input_sets: list[list[Any]], device: torch.device, calls: int = PROFILED_CALLS
            ) -> dict[str, Any]:
    """Profile ``calls`` forward calls (cycling the input sets) and summarise them (module docstring)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize()

    with torch.no_grad():
        model(*input_sets[0])  # one untimed call: lazy initialisation stays out of the profile
        sync()
        with torch_profile(activities=activities) as prof:
            began = time.perf_counter()
            for i in range(calls):
                model(*input_sets[i % len(input_sets)])
            sync()
            wall_us = (time.perf_counter() - began) * 1e6
    events = list(prof.events())
    if cuda:
        timed = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
        busy_events = timed
    else:
        # Top-level operators only (ATen's and a load_inline extension's): a nested call is part of its
        # parent's time.
        timed = busy_events = [e for e in events if e.cpu_parent is None]
    totals: dict[str, dict[str, Any]] = {}
    for event in timed:
        duration = float(event.time_range.end - event.time_range.start)
        entry = totals.setdefault(event.name, {"name": event.name, "origin": classify(event.name), "total_us": 0.0,
                                               "count": 0})
        entry["total_us"] += duration
        entry["count"] += 1
    all_us = sum(e["total_us"] for e in totals.values()) or 0.0
    share: dict[str, float] = {}
    for entry in totals.values():
        share[entry["origin"]] = share.get(entry["origin"], 0.0) + entry["total_us"]
    busy_us = _union_us([(float(e.time_range.start), float(e.time_range.end)) for e in busy_events])
    kernels = sorted(totals.values(), key=lambda e: -e["total_us"])
    return {
        "device": "cuda" if cuda else "cpu", "unit": "kernel" if cuda else "operator", "calls": calls,
        "wall_ms_per_call": wall_us / calls / 1e3,
        "busy_ms_per_call": busy_us / calls / 1e3,
        "gap_ms_per_call": max(0.0, wall_us - busy_us) / calls / 1e3,
        "share": {k: v / all_us for k, v in sorted(share.items())} if all_us else {},
        "n_kernels": len(totals),
        "launches_per_call": sum(e["count"] for e in totals.values()) / calls,
        "kernels": [{"name": e["name"][:200], "origin": e["origin"], "total_ms": e["total_us"] / 1e3,
                     "ms_per_call": e["total_us"] / calls / 1e3, "per_call": e["count"] / calls,
                     "share": e["total_us"] / all_us if all_us else None} for e in kernels[:TOP_KERNELS]],
    }
