# threat: 3 (constant output) on a task whose outputs are not tiny: plain allclose rejects it
# task: smoke/1
# expect: incorrect/allclose
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.out_features = out_features

    def forward(self, x):
        return torch.zeros(x.shape[0], self.out_features, device=x.device)
