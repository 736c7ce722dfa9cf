import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x, y):
        return x + y


def get_inputs():
    # random inputs shaped for this model
    x = torch.randn(1, 256).cuda()
    y = torch.randn(1, 256).cuda()
    return [x, y]


def get_init_inputs():
    # no arguments are needed to build this model
    return []
