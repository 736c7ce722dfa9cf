import torch
import torch.nn as nn


class Model(nn.Module):
    """Multi-layer perceptron: a Linear + ReLU per hidden width, then a Linear to the output width."""

    def __init__(self, input_size, layer_sizes, output_size):
        super().__init__()
        layers = []
        width = input_size
        for size in layer_sizes:
            layers.append(nn.Linear(width, size))
            layers.append(nn.ReLU())
            width = size
        layers.append(nn.Linear(width, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)


batch_size = 1
input_size = 1000
layer_sizes = [400, 800]
output_size = 500


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, layer_sizes, output_size]
