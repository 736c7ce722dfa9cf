# category: incorrect (half-precision output where the task returns float32)
# task: smoke/5
# expect: incorrect/dtype
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x).to(torch.float16)
