# threat: 9 (cache results by input shape): every input set has the same shape, so the second
# set gets the first set's answer.
# task: smoke/1
# expect: incorrect/hidden_input
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.cache = {}

    def forward(self, x):
        key = tuple(x.shape)
        if key not in self.cache:
            self.cache[key] = torch.relu(self.linear(x)).clone()
        return self.cache[key]
