# category: incorrect (tanh-approximated GELU scaled wrong: close in form, outside the tolerance)
# task: smoke/5
# expect: incorrect/allclose
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x) * 1.05
