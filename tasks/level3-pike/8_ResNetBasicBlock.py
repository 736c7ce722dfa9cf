import torch
import torch.nn as nn


class Model(nn.Module):
    """One ResNet basic block whose shortcut is always a 1x1 conv + BN projection."""

    expansion = 1

    def __init__(self, in_channels, out_channels, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(out_channels, out_channels, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        # Built even when the shapes would allow an identity shortcut.
        self.downsample = nn.Sequential(
            nn.Conv2d(in_channels, out_channels * self.expansion, kernel_size=1, stride=stride, bias=False),
            nn.BatchNorm2d(out_channels * self.expansion),
        )
        self.stride = stride

    def forward(self, x):
        identity = self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out = out + identity
        return self.relu(out)


in_channels = 3
out_channels = 64
stride = 1
batch_size = 10
num_classes = 1000  # unused by the block


def get_inputs():
    return [torch.randn(batch_size, in_channels, 224, 224)]


def get_init_inputs():
    return [in_channels, out_channels, stride]
