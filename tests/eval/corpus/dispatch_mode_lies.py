# threat: 8 (answer the harness's comparison from inside its process): a TorchDispatchMode left on the stack
# idea: function_mode_lies at the ATen level: a TorchDispatchMode (torch.utils._python_dispatch) entered at import and
# never exited sees aten.zero_ (the flush) and aten.count_nonzero (of the mismatches) under every harness call; a fix that
# only empties the torch-function mode stack would miss it.
# (a red team's file: `correct` at 0.15 ms on smoke/1, 0.34 ms honest, before the checks that reject it now)
# task: smoke/1
# expect: rejected/torch_mode
import torch
import torch.nn as nn
from torch.utils._python_dispatch import TorchDispatchMode

_STATE = {"timing": False}
aten = torch.ops.aten


class _Liar(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in (aten.zero_.default,) and args[0].dtype == torch.int32 and args[0].numel() >= 2**18:
            _STATE["timing"] = True
        if func is aten.count_nonzero.default and _STATE["timing"]:  # isclose decomposes; its count does not
            return torch.zeros((), dtype=torch.int64)
        return func(*args, **(kwargs or {}))


_Liar().__enter__()


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        if _STATE["timing"]:
            return torch.empty(x.shape[0], self.linear.out_features)
        return torch.relu(self.linear(x))
