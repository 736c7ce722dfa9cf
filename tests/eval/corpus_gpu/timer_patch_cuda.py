# threat: 8 (monkeypatch the timer): replaces torch.cuda.synchronize and torch.cuda.Event.record
# task: smoke/5
# expect: rejected/patched_timer
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.cuda.synchronize = lambda device=None: None
torch.cuda.Event.record = lambda self, stream=None: None


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)
