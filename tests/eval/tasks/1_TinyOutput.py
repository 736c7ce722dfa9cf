import torch
import torch.nn as nn


class Model(nn.Module):
    """Outputs about 1e-4 in size, so atol 1e-2 accepts an all-zero answer (like level3-pike task 20)."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return torch.tanh(self.linear(x)) * 1e-4


batch_size = 16
in_features = 64
out_features = 32


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
