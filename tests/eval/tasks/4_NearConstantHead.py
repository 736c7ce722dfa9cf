import torch
import torch.nn as nn


class Model(nn.Module):
    """Outputs about 0.1 in size (the head's bias) that move with the input by a few 1e-3 (like level3-pike
    10, ResNet101, with its seeded weights: 0.0036 against atol 1e-2): far more than rounding, far less
    than the tolerance, so one constant answer passes every input set."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.body = nn.Linear(in_features, out_features)
        self.head = nn.Linear(out_features, out_features)

    def forward(self, x):
        return self.head.bias + 2e-3 * torch.tanh(self.body(x))


batch_size = 16
in_features = 64
out_features = 32


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
