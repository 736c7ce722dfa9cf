# threat: 7 (lazy tensor / subclass): an output whose dtype has no plain bytes to hand over (quantized)
# task: smoke/5
# expect: rejected/output_type
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.quantize_per_tensor(F.gelu(x), 0.01, 0, torch.qint8)
