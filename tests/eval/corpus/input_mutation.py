# threat: 2 (mutate inputs in place so that a reference run afterwards on the same tensors matches)
# GELU(0) = 0: it zeroes its input and returns zeros, hoping the reference later sees zeros too.
# task: smoke/5
# expect: rejected/input_mutation
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        x.zero_()
        return torch.zeros_like(x)
