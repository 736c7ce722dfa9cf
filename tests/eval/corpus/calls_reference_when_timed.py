# threat: 10 (call the reference Model only once the check is over): its own computation for the
# five checked calls, the reference's afterwards; the guard's counting trampolines see the timed calls
# task: smoke/1
# expect: rejected/calls_reference_model
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        return torch.relu(self.linear(x))


class ModelNew(nn.Module):
    calls = 0

    def __init__(self, in_features, out_features):
        super().__init__()
        self.inner = Model(in_features, out_features)

    def forward(self, x):
        ModelNew.calls += 1
        if ModelNew.calls > 5:
            return self.inner(x)
        return torch.relu(x @ self.inner.linear.weight.t())
