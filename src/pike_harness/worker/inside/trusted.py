"""Functions the candidate's process uses to time and check, captured before the candidate is imported.

A candidate runs in the same process as the code that times it, so it could replace
``time.perf_counter``, ``torch.cuda.Event.elapsed_time`` or ``torch.cuda.synchronize``. The child
imports this module first, uses only the references captured here, and after the candidate has run
asks ``changed()`` whether any watched name now points elsewhere: a changed name is a rejection.
This defeats monkeypatching of public names (the trick an LLM reaches for); code that digs through
frames with ``gc``/``ctypes`` can defeat any in-process check, which is why the verdict on
correctness is reached in the supervisor, a process the candidate never ran in.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib
import threading
import time
from typing import Any

import torch

# Watched names, by dotted path. The timer group decides the check name ("patched_timer").
TIMER_NAMES = (
    "time.perf_counter", "time.perf_counter_ns", "time.monotonic", "time.time",
    "torch.cuda.synchronize", "torch.cuda.Event", "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize", "torch._C._cuda_synchronize",
    "torch._C._CudaEventBase.record", "torch._C._CudaEventBase.elapsed_time",
    "torch._C._CudaEventBase.synchronize",
)
CHECK_NAMES = (
    "torch.allclose", "torch.isclose", "torch.isfinite", "torch.equal", "torch.count_nonzero",
    "torch.logical_not", "torch.save", "torch.load", "torch.Tensor", "torch.Tensor.clone",
    "torch.Tensor.copy_", "torch.Tensor.all", "torch.Tensor.cpu", "torch.Tensor.to", "torch.Tensor.add_", "torch.Tensor.zero_",
    "torch.Tensor.detach", "torch.Tensor.item", "torch.Tensor.untyped_storage", "torch.Tensor.data_ptr",
    "threading.enumerate", "builtins.type", "builtins.isinstance", "builtins.len",
)


def _resolve(path: str) -> Any:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise AttributeError(path)


def _snapshot(paths: tuple[str, ...]) -> dict[str, Any]:
    captured = {}
    for path in paths:
        with contextlib.suppress(AttributeError):  # not in this torch build (CUDA internals on a CPU wheel)
            captured[path] = _resolve(path)
    return captured


_CAPTURED: dict[str, Any] = _snapshot(TIMER_NAMES + CHECK_NAMES)

# The references the child's timing and checking code calls.
perf_counter = time.perf_counter
sleep = time.sleep
exact_type = builtins.type
length = builtins.len
is_instance = builtins.isinstance
thread_list = threading.enumerate
isclose = torch.isclose
logical_not = torch.logical_not
count_nonzero = torch.count_nonzero
equal = torch.equal
save = torch.save
load = torch.load
Tensor = torch.Tensor
clone = torch.Tensor.clone
copy_ = torch.Tensor.copy_
add_ = torch.Tensor.add_
zero_ = torch.Tensor.zero_
to = torch.Tensor.to
item = torch.Tensor.item
all_ = torch.Tensor.all
cuda_synchronize = torch.cuda.synchronize
CudaEvent = torch.cuda.Event
event_record = torch.cuda.Event.record
event_elapsed = torch.cuda.Event.elapsed_time
event_synchronize = torch.cuda.Event.synchronize

_OWN = {name: value for name, value in globals().items()
        if not name.startswith("_") and callable(value) and name not in ("annotations",)}


def changed() -> list[str]:
    """Watched names (and this module's own references) that no longer hold what was captured."""
    moved = []
    for path, original in _CAPTURED.items():
        try:
            now = _resolve(path)
        except AttributeError:
            moved.append(path)
            continue
        if now is not original:
            moved.append(path)
    module_globals = globals()
    for name, original in _OWN.items():
        if module_globals.get(name) is not original:
            moved.append(f"{__name__}.{name}")
    return moved


def check_name(moved: list[str]) -> str:
    """The rejection check for a list of moved names: timers first, they are the usual target."""
    if any(path in TIMER_NAMES or path.endswith(("perf_counter", "cuda_synchronize", "event_elapsed",
                                                 "event_record", "event_synchronize", "CudaEvent"))
           for path in moved):
        return "patched_timer"
    return "patched_function"
