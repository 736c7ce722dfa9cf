import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """GELU over 64 MiB: the reference needs segments of its own that size (no slack of the reference
    process's earlier segments holds them), for the device-memory holder of corpus_gpu."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return F.gelu(x)


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []
