import torch
import torch.nn as nn


class Model(nn.Module):
    """LayerNorm over the last dimension with learnable affine parameters."""

    def __init__(self, normalized_shape):
        super().__init__()
        self.norm = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        return self.norm(x)


batch_size = 32
seq_len = 64
hidden = 512


def get_inputs():
    return [torch.randn(batch_size, seq_len, hidden)]


def get_init_inputs():
    return [hidden]
