"""How much work a task's reference does: FLOPs and the least bytes any implementation must move.

The speed-of-light bound of a task (host/speed_of_light.py) needs two counts of its reference:

- FLOPs, from ``torch.utils.flop_counter.FlopCounterMode`` over one forward call. The counter knows
  matmuls, convolutions and attention (the work tensor cores do); elementwise ops, reductions and
  softmax count 0, which is right for a bound: their time is bounded by the bytes they move.
- Bytes: every tensor of the inputs, the parameters and buffers, and the outputs, each read or
  written once, at ``bytes_per_float`` bytes per floating-point element (integer and bool tensors at
  their own size). Intermediates are free (a perfect fusion keeps them on chip), so this is a lower
  bound that no implementation beats.

The model is built and run on the ``meta`` device first (shapes only: no memory, no compute, seconds
for the largest level3-pike task); a task whose code needs real values (``.item()``, data-dependent
shapes) is counted again on real CPU tensors. Task code is trusted, but this still runs in a process of
its own (``python -m pike_harness.worker.work_count``, JSON on stdin and stdout), never in a candidate's
or the harness's. torch and the standard library only.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch

from pike_harness.worker.inside import loading


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


def tensor_bytes(tensor: torch.Tensor, bytes_per_float: int) -> int:
    """A tensor's size when floats are stored at ``bytes_per_float`` bytes (other dtypes at their own)."""
    size = bytes_per_float if tensor.dtype.is_floating_point else tensor.element_size()
    return tensor.numel() * size


def _run(source: str, device: str, weight_seed: int) -> tuple[int, list[torch.Tensor], list[torch.Tensor],
                                                              list[torch.Tensor], dict[str, int]]:
    from torch.utils.flop_counter import FlopCounterMode

    module = loading.load_source(source, loading.module_name_for(source, "pikeh_count"))
    with torch.device(device):
        torch.manual_seed(weight_seed)
        model = loading.model_class(module, ("Model",))(*loading.init_inputs(module))
        inputs = loading.make_inputs(module, 0)
    if isinstance(model, torch.nn.Module):
        model = model.to(device).eval()
    inputs = [value.to(device) if isinstance(value, torch.Tensor) else value for value in inputs]
    state = list(model.parameters()) + list(model.buffers()) if isinstance(model, torch.nn.Module) else []
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        out = model(*inputs)
    by_op = {str(op): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items()}
    return int(counter.get_total_flops()), _tensors(inputs), state, _tensors(out), by_op


def count(source: str, *, bytes_per_float: int = 4, weight_seed: int = 1, device: str = "meta") -> dict[str, Any]:
    """FLOPs and least bytes of one forward call of the task's ``Model`` (see the module docstring)."""
    used = device
    try:
        flops, inputs, state, outputs, by_op = _run(source, device, weight_seed)
    except Exception:
        if device != "meta":
            raise
        used = "cpu"  # the task needs real values; shapes are the same on the CPU
        flops, inputs, state, outputs, by_op = _run(source, "cpu", weight_seed)
    parts = {name: sum(tensor_bytes(t, bytes_per_float) for t in tensors)
             for name, tensors in (("inputs", inputs), ("state", state), ("outputs", outputs))}
    return {"flops": flops, "bytes": sum(parts.values()), "bytes_by_part": parts, "flops_by_op": by_op,
            "bytes_per_float": bytes_per_float, "counted_on": used}


def local_gpu_name() -> str | None:
    """The name of the GPU this process sees, if any (what `pikeh tasks show` bounds for by default)."""
    try:
        return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    except Exception:
        return None


def main() -> int:
    """stdin: {"items": [{"source", "bytes_per_float"}], "gpu": bool}; stdout: {"counts": [...], "gpu"}.
    A task whose count fails gets {"error": ...} in its place, the others are still counted."""
    request = json.load(sys.stdin)
    protocol_out = sys.stdout
    sys.stdout = sys.stderr  # whatever task code prints must not corrupt the reply
    counts = []
    for item in request.get("items") or []:
        try:
            counts.append(count(item["source"], bytes_per_float=int(item.get("bytes_per_float") or 4)))
        except Exception as exc:
            counts.append({"error": f"{type(exc).__name__}: {exc}"[:500]})
    reply = {"counts": counts, "gpu": local_gpu_name() if request.get("gpu") else None}
    protocol_out.write(json.dumps(reply) + "\n")
    protocol_out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
