# threat: 9 (cache results by input content, its fresh calls dodged): keeps the tensor of its first
# checked call (input set 0, which the timed loop's buffers are cloned from) and, in a later call,
# gives it a leading dimension in place (unsqueeze_: the values stay, so no check of that call's own
# inputs sees it). Every fresh set then has another shape than the timed loop's buffer; since
# 2026-11-30 night such a set is spent uncalled (a task whose shapes follow the seed is the task's
# fault), so the cache made no fresh call at all and was `correct` with only a flag, its timed calls
# replays (an audit). The timing now first checks every input set still has the shape it was made with.
# task: smoke/1
# expect: rejected/input_mutation
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.kept = None
        self.answers = {}

    def forward(self, x):
        if self.kept is None:
            self.kept = x
        elif self.kept is not x and self.kept.dim() == 2:
            self.kept.unsqueeze_(0)
        if x.dim() == 3:
            x = x[0]
        flat = x.reshape(-1)
        key = tuple(flat[:4].tolist() + flat[-4:].tolist())
        if key not in self.answers:
            self.answers[key] = torch.relu(self.linear(x)).clone()
        return self.answers[key]
