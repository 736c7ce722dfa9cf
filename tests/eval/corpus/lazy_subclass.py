# threat: 7 (lazy tensor / tensor subclass that computes only when compared)
# task: smoke/5
# expect: rejected/output_type
import torch
import torch.nn as nn
import torch.nn.functional as F


class LazyTensor(torch.Tensor):
    pass


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x).as_subclass(LazyTensor)
