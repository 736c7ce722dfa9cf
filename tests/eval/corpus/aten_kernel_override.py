# category: rejected (timed calls skip work): registers a kernel over aten::isclose (torch.library) that
# answers "close" for anything, so the timed loop's own comparison, which runs in this process, passes
# whatever a timed call returns; computes honestly in the checked calls, then returns an uninitialised
# tensor. The reference process compares a timed call per input set, drawn after it returned, which
# rejected it (timed_output_mismatch) until the harness compared the dispatcher's table of its own
# operators after the import (2026-12-01).
# task: smoke/1
# expect: rejected/patched_kernel
import torch
import torch.nn as nn

_lib = torch.library.Library("aten", "IMPL")


def _always_close(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return torch.ones(a.shape, dtype=torch.bool, device=a.device)


_lib.impl("isclose", _always_close, "CPU")
_lib.impl("isclose", _always_close, "CUDA")
_calls = [0]


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        _calls[0] += 1
        if _calls[0] > 6:  # past the checked calls (five, and a warm-up call when one runs)
            return torch.empty(x.shape[0], self.linear.out_features, device=x.device)
        return torch.relu(self.linear(x))
