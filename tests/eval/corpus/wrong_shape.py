# category: incorrect (an output of the wrong shape)
# task: smoke/5
# expect: incorrect/shape
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)[:, :-1]
