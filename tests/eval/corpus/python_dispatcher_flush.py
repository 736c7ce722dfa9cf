# threat: 8 (compute outside the timed window through the Python dispatcher): a Python kernel for
# aten::zero_ kept on the operator itself (OpOverload.py_impl, never in the dispatcher's registrations),
# and from its second call on the Python dispatcher switched on and left on. The timed loop's flush then
# runs the kernel after the call's input is in place and before the clock starts: it computes the model
# there and the timed call returns the answer. No mode is on either stack, no hook set, no registration
# changed: `correct` at 70-200x on a CPU task (an audit, 2026-12-01) until the thread's included
# dispatch keys were compared with those in place at the import.
# task: smoke/1
# expect: rejected/torch_mode
import torch
import torch.nn as nn

_zero = torch.ops.aten.zero_.default
_state = {"model": None, "x": None, "ahead": None, "calls": 0, "guard": None}


def _ahead(tensor):
    with torch._C._DisablePythonDispatcher():
        result = _zero(tensor)
        model, x = _state["model"], _state["x"]
        if model is not None and x is not None and tensor.dtype == torch.int32 and tensor.numel() >= 1 << 18:
            _state["ahead"] = (x._version, model._compute(x))
    return result


_zero.py_impl(torch._C.DispatchKey.AutogradCPU)(_ahead)
_zero.py_impl(torch._C.DispatchKey.AutogradCUDA)(_ahead)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def _compute(self, x):
        return torch.relu(self.linear(x))

    def forward(self, x):
        _state["calls"] += 1
        if _state["calls"] == 2 and _state["guard"] is None:
            _state["guard"] = torch._C._EnablePythonDispatcher()
            _state["guard"].__enter__()  # never left
        ahead, _state["ahead"] = _state["ahead"], None
        if ahead is not None and x is _state["x"] and ahead[0] == x._version:
            return ahead[1]
        _state["model"], _state["x"] = self, x
        with torch._C._DisablePythonDispatcher():
            return self._compute(x)
