# threat: 13 (fill memory, on the GPU): allocates 1 GiB blocks until the device runs out
# task: smoke/5
# expect: runtime_error/memory_limit
import torch
import torch.nn as nn

blocks = []


class ModelNew(nn.Module):
    def forward(self, x):
        for _ in range(1024):
            blocks.append(torch.empty(256 * 1024 * 1024, device=x.device))
        return x
