import torch
import torch.nn as nn


class Model(nn.Module):
    """A shallow, wide perceptron: two 2000-wide hidden ReLU layers and a 10-way linear head."""

    def __init__(self, input_size, hidden_layer_sizes, output_size):
        super().__init__()
        layers = []
        width = input_size
        for size in hidden_layer_sizes:
            layers.append(nn.Linear(width, size))
            layers.append(nn.ReLU())
            width = size
        layers.append(nn.Linear(width, output_size))
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)


batch_size = 1
input_size = 1000
hidden_layer_sizes = [2000, 2000]
output_size = 10


def get_inputs():
    return [torch.randn(batch_size, input_size)]


def get_init_inputs():
    return [input_size, hidden_layer_sizes, output_size]
