# threat: 3 (constant output inside the tolerance): the first call's answer, computed honestly, is kept
# and returned for every later input plus 1e-7 of the input, so no two input sets give bitwise-equal
# outputs (the audit's ResNet101 cheat on level3-pike 10, `correct` while the constant check asked for
# bitwise equality). The reference moves far more than that between sets, within atol.
# task: tasks/4_NearConstantHead.py
# expect: rejected/constant_output
# flag: reference_constant
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.body = nn.Linear(in_features, out_features)
        self.head = nn.Linear(out_features, out_features)
        self.cached = None

    def forward(self, x):
        if self.cached is None:  # the only computation this instance does
            self.cached = (self.head.bias + 2e-3 * torch.tanh(self.body(x))).detach().clone()
        return self.cached + 1e-7 * x[:, :1]
