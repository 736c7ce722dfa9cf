"""How a baseline runs the task's own model: eager, ``torch.compile``, CUDA graphs or TensorRT.

``pikeh baselines`` sends the reference source as the candidate with ``EvalRequest.baseline_mode``
set, and the worker wraps the constructed model here, so every mode goes through the same checks and
the same timing protocol as a candidate, and the source stays the task's own (no generated wrapper
for the static checks to trip over). The mode is applied after the model is built under the weight
seed and before its first call. torch only; TensorRT only when ``torch_tensorrt`` is installed.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Sequence
from typing import Any

import torch

MODES = ("eager", "compile", "compile-max-autotune", "cudagraphs", "tensorrt")
CUDA_ONLY = ("cudagraphs", "tensorrt")
JIT_MODES = ("compile", "compile-max-autotune", "tensorrt")  # compile on the first call: worth a warm-up


def unavailable(mode: str, device: str) -> str | None:
    """Why ``mode`` cannot run on ``device`` here, or None. Checked by the harness before submitting."""
    if mode not in MODES:
        return f"unknown mode {mode!r} (known: {', '.join(MODES)})"
    if mode in CUDA_ONLY and not device.startswith("cuda"):
        return f"{mode} needs a CUDA device"
    if mode == "tensorrt" and importlib.util.find_spec("torch_tensorrt") is None:
        return "torch_tensorrt is not installed"
    return None


def apply(mode: str | None, model: Any, device: torch.device) -> Callable[..., Any]:
    """The callable that runs ``model`` in ``mode`` (None and "eager" return the model itself)."""
    if mode in (None, "", "eager"):
        return model
    if mode == "compile":
        return torch.compile(model)
    if mode == "compile-max-autotune":
        return torch.compile(model, mode="max-autotune")
    if mode == "cudagraphs":
        if device.type != "cuda":
            raise RuntimeError("the cudagraphs mode needs a CUDA device")
        return GraphedModel(model)
    if mode == "tensorrt":
        return TensorRTModel(model)
    raise ValueError(f"unknown baseline mode {mode!r} (known: {', '.join(MODES)})")


class GraphedModel:
    """Captures one CUDA graph of ``model`` on the first call, then replays it.

    Each call copies its arguments into the captured input buffers and replays the graph; the
    outputs are the graph's static buffers (legal: the worker clones outputs when a call returns).
    Both copies are inside the timed window, as for any candidate that uses CUDA graphs.
    """

    WARMUP_CALLS = 3

    def __init__(self, model: Any):
        self.model = model
        self.graph: Any = None
        self.static_inputs: list[Any] = []
        self.static_output: Any = None

    def _capture(self, args: Sequence[Any]) -> None:
        self.static_inputs = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            for _ in range(self.WARMUP_CALLS):
                self.model(*self.static_inputs)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_output = self.model(*self.static_inputs)

    def __call__(self, *args: Any) -> Any:
        if self.graph is None:
            self._capture(args)
        for static, value in zip(self.static_inputs, args, strict=True):
            if isinstance(static, torch.Tensor) and static is not value:
                static.copy_(value)
        self.graph.replay()
        return self.static_output


class TensorRTModel:
    """``torch_tensorrt.compile`` on the first call's arguments (static shapes, fp32 as the task)."""

    def __init__(self, model: Any):
        self.model = model
        self.compiled: Any = None

    def __call__(self, *args: Any) -> Any:
        if self.compiled is None:
            import torch_tensorrt

            self.compiled = torch_tensorrt.compile(self.model, ir="dynamo", inputs=list(args))
        return self.compiled(*args)
