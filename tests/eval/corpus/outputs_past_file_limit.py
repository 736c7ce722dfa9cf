# threat: 13 (fill the disk): outputs too large to hand to the reference process within the file-size limit
# task: smoke/5
# expect: runtime_error/file_size_limit
# limits: file_size_mb=8
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.zeros(4 * 1024 * 1024, device=x.device) + x.sum()  # 16 MB per call, past the 8 MB limit on the first
