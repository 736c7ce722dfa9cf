import torch
import torch.nn as nn


class Model(nn.Module):
    """Argmax over 256 positions (the shape of KernelBench level1 task 51, smaller): an int64 output,
    where allclose's rtol 1e-2 would admit an index of 100 or more off by one."""

    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.argmax(x, dim=self.dim)


batch_size = 8
dim1 = 256
dim2 = 64


def get_inputs():
    return [torch.randn(batch_size, dim1, dim2)]


def get_init_inputs():
    return [1]
