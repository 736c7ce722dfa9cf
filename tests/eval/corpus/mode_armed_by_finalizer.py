# threat: 8 (compute outside the timed window, armed after the harness's last check):
# a weakref finalizer on each output pushes a torch function mode when the harness drops the output
# (after the call's validation step); the mode intercepts the next call's flush (then run with
# modes on), computes the model on the filled input buffer, and forward pops it and returns the
# answer: `correct` at 0.04 ms (an audit, 2026-12-01). The step before the clock now runs with
# modes off, and a mode in place at a call's first step is refused.
# task: smoke/1
# expect: rejected/torch_mode
import weakref

import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode

_state = {"model": None, "x": None, "ahead": None}


class _Ahead(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if func is torch.Tensor.zero_ and _state["model"] is not None and _state["x"] is not None:
            x = _state["x"]
            with torch.no_grad():
                _state["ahead"] = (x._version, _state["model"]._compute(x))
        return result


def _more_calls():
    import sys
    f = sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "_run" and "i" in f.f_locals and "run" in f.f_locals:
            loc = f.f_locals
            return loc["i"] < loc["run"].reps - 1
        f = f.f_back
    return False


def _arm():
    if _more_calls() and torch._C._len_torch_function_stack() == 0:
        _Ahead().__enter__()


def _disarm():
    while torch._C._len_torch_function_stack() > 0:
        torch._C._pop_torch_function_stack()


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def _compute(self, x):
        return torch.relu(self.linear(x))

    def forward(self, x):
        _disarm()
        same = x is _state["x"]
        ahead, _state["ahead"] = _state["ahead"], None
        if ahead is not None and same and _state["model"] is self and ahead[0] == x._version:
            out = ahead[1]
        else:
            _state["model"], _state["x"] = self, x
            out = self._compute(x)
        if same:
            weakref.finalize(out, _arm)
        return out
