# threat: none (legitimate): the reference's own computation under the name ModelNew
# task: smoke/1
# expect: correct
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        return torch.relu(self.linear(x))
