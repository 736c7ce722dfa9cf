# threat: 8 (compute before the timer starts, through the harness's own tensor calls): a TorchFunctionMode
# idea: a TorchFunctionMode entered at import stays on torch's mode stack, so every torch call the
# harness makes afterwards (its Tensor.copy_ of the next input into the timing buffer, the flush's
# zero_, the timed-output isclose) runs through the candidate's __torch_function__. The work is
# done when the harness copies the input in, before perf_counter starts; forward just returns it.
# (a red team's file: `correct` at 0.017 ms on smoke/1, 0.34 ms honest, before the checks that reject it now)
# task: smoke/1
# expect: rejected/torch_mode
import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode

_MODEL = []
_AHEAD = []


class _Ahead(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        if func is torch.Tensor.copy_ and _MODEL:
            dst = args[0]
            net = _MODEL[0]  # the first instance built: the one the harness times
            if dst.dim() == 2 and dst.shape[-1] == net.linear.in_features:
                with torch.no_grad():
                    _AHEAD[:] = [(dst.data_ptr(), dst._version, torch.relu(net.linear(dst)))]
        return result


_mode = _Ahead()
_mode.__enter__()  # never exited


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        if not _MODEL:
            _MODEL.append(self)

    def forward(self, x):
        ahead = _AHEAD[0] if _AHEAD else None
        if ahead is not None and ahead[0] == x.data_ptr() and ahead[1] == x._version:
            return ahead[2]
        return torch.relu(self.linear(x))
