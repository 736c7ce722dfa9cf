import torch
import torch.nn as nn
import torch.nn.functional as F


class MBConv(nn.Module):
    """MBConv without squeeze-excitation; the input is added back when stride is 1 and widths match."""

    def __init__(self, in_channels, out_channels, kernel_size, stride, expand_ratio):
        super().__init__()
        self.use_residual = stride == 1 and in_channels == out_channels
        hidden_dim = in_channels * expand_ratio
        if expand_ratio != 1:
            self.expand_conv = nn.Sequential(
                nn.Conv2d(in_channels, hidden_dim, kernel_size=1, stride=1, padding=0, bias=False),
                nn.BatchNorm2d(hidden_dim),
                nn.ReLU6(inplace=True),
            )
        self.depthwise_conv = nn.Sequential(
            nn.Conv2d(hidden_dim, hidden_dim, kernel_size=kernel_size, stride=stride,
                      padding=(kernel_size - 1) // 2, groups=hidden_dim, bias=False),
            nn.BatchNorm2d(hidden_dim),
            nn.ReLU6(inplace=True),
        )
        self.project_conv = nn.Sequential(
            nn.Conv2d(hidden_dim, out_channels, kernel_size=1, stride=1, padding=0, bias=False),
            nn.BatchNorm2d(out_channels),
        )

    def forward(self, x):
        identity = x
        if hasattr(self, "expand_conv"):
            x = self.expand_conv(x)
        x = self.depthwise_conv(x)
        x = self.project_conv(x)
        if self.use_residual:
            x = x + identity
        return x


class Model(nn.Module):
    """A simplified EfficientNet-B0: plain-ReLU stem, 13 MBConv blocks (no SE), 1x1 head, linear classifier."""

    def __init__(self, num_classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 32, kernel_size=3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(32)
        # (in, out, kernel, stride, expansion)
        plan = [
            (32, 16, 3, 1, 1),
            (16, 24, 3, 2, 6),
            (24, 24, 3, 1, 6),
            (24, 40, 5, 2, 6),
            (40, 40, 5, 1, 6),
            (40, 80, 3, 2, 6),
            (80, 80, 3, 1, 6),
            (80, 112, 5, 1, 6),
            (112, 112, 5, 1, 6),
            (112, 192, 5, 2, 6),
            (192, 192, 5, 1, 6),
            (192, 192, 5, 1, 6),
            (192, 320, 3, 1, 6),
        ]
        self.blocks = nn.Sequential(*(MBConv(*spec) for spec in plan))
        self.conv2 = nn.Conv2d(320, 1280, kernel_size=1, stride=1, padding=0, bias=False)
        self.bn2 = nn.BatchNorm2d(1280)
        self.fc = nn.Linear(1280, num_classes)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.blocks(x)
        x = F.relu(self.bn2(self.conv2(x)))
        x = F.adaptive_avg_pool2d(x, (1, 1))
        x = x.view(x.size(0), -1)
        return self.fc(x)


batch_size = 10
num_classes = 1000


def get_inputs():
    return [torch.randn(batch_size, 3, 224, 224)]


def get_init_inputs():
    return [num_classes]
