# category: incorrect (state shared between instances): packs its weight once per class, the first time
# an instance is called, and every later instance computes with that packed copy instead of its own
# weights. With one weight seed for every instance the copies agree and this passed; the second
# instance is built under its own seed, so its reference has other weights.
# task: smoke/1
# expect: incorrect/state_across_instances
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    _packed = None  # the weight, transposed and contiguous, "packed once for speed" (on the first call's device)

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        if ModelNew._packed is None:
            ModelNew._packed = self.linear.weight.detach().t().contiguous()
        return torch.relu(x @ ModelNew._packed)
