# threat: none (legitimate): the honest neighbour evaluated together with the hostile file candidates
# task: smoke/5
# expect: correct
import torch.nn.functional as F
from torch import nn


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)
