# threat: 8 (monkeypatch the timer): replaces time.perf_counter and the CUDA event timer at import
# task: smoke/1
# expect: rejected/patched_timer
import time

import torch
import torch.nn as nn

_real = time.perf_counter
time.perf_counter = lambda: _real() * 1e-3
torch.cuda.Event.elapsed_time = lambda self, end: 1e-6


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        return torch.relu(self.linear(x))
