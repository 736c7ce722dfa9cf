# threat: none (legitimate): torch.compile inside ModelNew
# task: smoke/5
# expect: correct
# limits: compile_timeout_s=600 run_timeout_s=600
# (longer limits than the batch's 120 s: a build on a loaded 2-core CI machine can take that long)
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.gelu = torch.compile(lambda x: F.gelu(x))

    def forward(self, x):
        return self.gelu(x)
