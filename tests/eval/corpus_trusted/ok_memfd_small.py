# threat: none (legitimate): holds two memfds for its whole run, one of 4 MB written and mapped, one
# sparse (8 GB long, 4 KB written, longer than its memory limit): counted by the blocks they hold
# task: smoke/1
# expect: correct
# limits: memory_mb=6000
import mmap
import os

import torch
import torch.nn as nn

_small = os.memfd_create("pikeh-memfd-small")
os.write(_small, b"\1" * (4 << 20))
_view = mmap.mmap(_small, 4 << 20)
_view[:4096] = b"\2" * 4096
_sparse = os.memfd_create("pikeh-memfd-sparse")
os.ftruncate(_sparse, 8 << 30)
os.pwrite(_sparse, b"\3" * 4096, 0)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        return torch.relu(self.linear(x))
