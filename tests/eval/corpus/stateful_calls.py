# category: incorrect (state kept across calls): right on the first call, then adds its previous
# output, as a solution that accumulates into a persistent buffer does (PIKE-B task 17)
# task: smoke/1
# expect: incorrect/state_across_calls
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.previous = None

    def forward(self, x):
        out = torch.relu(self.linear(x))
        if self.previous is not None:
            out = out + self.previous
        self.previous = out
        return out
