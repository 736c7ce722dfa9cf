# threat: 10 (call the reference Model): ModelNew only wraps the copied reference (super().forward),
# seen at run time by the reference guard
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


class ModelNew(Model):
    def forward(self, x):
        return super().forward(x)
