# threat: none (legitimate): torch.compile inside ModelNew
# task: smoke/5
# expect: correct
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.gelu = torch.compile(lambda x: F.gelu(x))

    def forward(self, x):
        return self.gelu(x)
