# threat: none (legitimate): the reference's computation in float32, on a task whose output is its
# classifier's bias to 1e-8 of its size whatever the input. The candidate computes and its outputs
# follow the input; the result is correct and still flagged reference_constant, which the reference's
# outputs alone decide: on this task a constant answer would pass too.
# task: tasks/2_BiasHead.py
# expect: correct
# flag: reference_constant
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, hidden, out_features):
        super().__init__()
        self.body = nn.Linear(in_features, hidden)
        self.head = nn.Linear(hidden, out_features)

    def forward(self, x):
        return self.head(torch.tanh(self.body(x)) * 1e-9)
