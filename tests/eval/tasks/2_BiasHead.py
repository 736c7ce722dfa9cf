import torch
import torch.nn as nn


class Model(nn.Module):
    """A classifier whose output is its bias to 1e-8 of its size, whatever the input (like level3-pike's
    MobileNetV1 and EfficientNetB2 with their seeded weights): the reference moves between input sets
    only by rounding."""

    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        self.body = nn.Linear(in_features, hidden)
        self.head = nn.Linear(hidden, out_features)

    def forward(self, x):
        return self.head(torch.tanh(self.body(x)) * 1e-9)


batch_size = 8
in_features = 64
hidden = 32
out_features = 16


def get_inputs():
    return [torch.randn(batch_size, in_features)]


def get_init_inputs():
    return [in_features, hidden, out_features]
