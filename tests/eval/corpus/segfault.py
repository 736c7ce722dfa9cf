# threat: 13 (crash): dereferences a null pointer
# task: smoke/5
# expect: runtime_error/crash
import ctypes

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return ctypes.string_at(0)
