# threat: none (legitimate): returns the same preallocated output buffer on every call, as a
# CUDA-graph replay does (PIKE-B's solutions for level3-pike tasks 10 and 16); the evaluator must
# clone each output as soon as the call returns instead of rejecting the aliasing.
# task: smoke/1
# expect: correct
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.static_out = None

    def forward(self, x):
        result = torch.relu(self.linear(x))
        if self.static_out is None or self.static_out.shape != result.shape:
            self.static_out = torch.empty_like(result)
        self.static_out.copy_(result)
        return self.static_out
