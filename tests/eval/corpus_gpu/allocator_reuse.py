# threat: 1 (reuse a freed buffer that still holds the reference's output): returns uninitialised
# memory of the right shape, which passes wherever the reference ran just before in the same
# process; here the reference never runs in the candidate's process
# task: smoke/5
# expect: incorrect
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.empty_like(x)
