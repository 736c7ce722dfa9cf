import torch
import torch.nn as nn


class Model(nn.Module):
    """DenseNet transition: BN, ReLU, 1x1 conv to the new width, 2x2 average pooling."""

    def __init__(self, num_input_features, num_output_features):
        super().__init__()
        self.transition = nn.Sequential(
            nn.BatchNorm2d(num_input_features),
            nn.ReLU(inplace=True),
            nn.Conv2d(num_input_features, num_output_features, kernel_size=1, bias=False),
            nn.AvgPool2d(kernel_size=2, stride=2),
        )

    def forward(self, x):
        return self.transition(x)


batch_size = 10
num_input_features = 32
num_output_features = 64
height, width = 224, 224


def get_inputs():
    return [torch.randn(batch_size, num_input_features, height, width)]


def get_init_inputs():
    return [num_input_features, num_output_features]
