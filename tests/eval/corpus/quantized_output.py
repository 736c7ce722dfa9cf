# threat: 7 (lazy tensor / subclass): an output whose dtype has no plain bytes to hand over (quantized)
# task: smoke/5
# expect: rejected/output_type
# expect-gpu: rejected/output_device
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x):
        # quantized tensors live on the CPU only (CUDA has no quantize_per_tensor): on a GPU the output is
        # then on the wrong device, which is checked first
        return torch.quantize_per_tensor(F.gelu(x).cpu(), 0.01, 0, torch.qint8)
