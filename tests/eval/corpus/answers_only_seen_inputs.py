# category: incorrect (right only on the inputs it has seen): answers the first four distinct inputs it
# meets (every input set the check shows it) and returns zeros for any other. The timed loop calls it on
# input sets it was never shown, and two of those calls, drawn after they returned, are compared in the
# reference process.
# task: smoke/1
# expect: incorrect/fresh_input
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.known = []

    def forward(self, x):
        key = tuple(x.reshape(-1)[:4].tolist())
        if key in self.known or len(self.known) < 4:
            if key not in self.known:
                self.known.append(key)
            return torch.relu(self.linear(x))
        return torch.zeros(x.shape[0], self.linear.out_features, device=x.device)
