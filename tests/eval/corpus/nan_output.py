# threat: 16 (NaN outputs that slip through comparisons): NaN where the reference is finite
# task: smoke/5
# expect: incorrect/nonfinite
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x):
        y = F.gelu(x)
        y[0, :16] = float("nan")
        return y
