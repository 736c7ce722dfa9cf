# threat: 9 (cache results by input pointer and replay them): correct on first sight of each input
# pointer, then replays. Timing feeds every call through the same input buffer with rotating
# contents, so the replayed outputs fail the check on timed outputs.
# task: smoke/1
# expect: rejected/timed_output_mismatch
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.cache = {}

    def forward(self, x):
        key = x.data_ptr()
        if key not in self.cache:
            self.cache[key] = torch.relu(self.linear(x))
        return self.cache[key]
