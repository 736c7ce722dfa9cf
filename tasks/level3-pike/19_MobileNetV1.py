import torch
import torch.nn as nn


class Model(nn.Module):
    """MobileNetV1: a strided 3x3 stem, 13 depthwise-separable blocks, 7x7 average pool, linear head."""

    def __init__(self, num_classes=1000, input_channels=3, alpha=1.0):
        super().__init__()

        def conv_bn(inp, oup, stride):
            return nn.Sequential(
                nn.Conv2d(inp, oup, 3, stride, 1, bias=False),
                nn.BatchNorm2d(oup),
                nn.ReLU(inplace=True),
            )

        def conv_dw(inp, oup, stride):
            return nn.Sequential(
                nn.Conv2d(inp, inp, 3, stride, 1, groups=inp, bias=False),
                nn.BatchNorm2d(inp),
                nn.ReLU(inplace=True),
                nn.Conv2d(inp, oup, 1, 1, 0, bias=False),
                nn.BatchNorm2d(oup),
                nn.ReLU(inplace=True),
            )

        def width(channels):
            return int(channels * alpha)

        plan = [(32, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2), (256, 256, 1), (256, 512, 2)]
        plan += [(512, 512, 1)] * 5
        plan += [(512, 1024, 2), (1024, 1024, 1)]
        self.model = nn.Sequential(
            conv_bn(input_channels, width(32), 2),
            *(conv_dw(width(inp), width(oup), stride) for inp, oup, stride in plan),
            nn.AvgPool2d(7),
        )
        self.fc = nn.Linear(width(1024), num_classes)

    def forward(self, x):
        x = self.model(x)
        x = x.view(x.size(0), -1)
        return self.fc(x)


batch_size = 10
input_channels = 3
height = 224
width = 224
num_classes = 1000
alpha = 1.0


def get_inputs():
    return [torch.randn(batch_size, input_channels, height, width)]


def get_init_inputs():
    return [num_classes, input_channels, alpha]
