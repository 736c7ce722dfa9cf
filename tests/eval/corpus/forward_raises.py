# category: runtime_error (an exception in forward)
# task: smoke/5
# expect: runtime_error/forward
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        raise ValueError("kernel launch failed: invalid configuration argument")
