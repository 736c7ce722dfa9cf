# threat: 9 (cache results by input content): keys each answer on a sample of its input's values (the
# first and last four), so it tells the rotating input sets apart for almost nothing, computes each once
# and replays it in every timed call: a right answer, timed 14x faster than an honest one on the CPU.
# The timed loop also calls it on input sets it was never shown, which it must compute: those calls
# take many times the timed calls' median. On CUDA it computes honestly: reading a key back to the
# host costs more than this task's call (tests/eval/test_fresh_inputs_gpu.py makes it on a heavy model).
# task: smoke/1
# expect: rejected/content_cache
# expect-gpu: correct
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.answers = {}

    def forward(self, x):
        if x.is_cuda:
            return torch.relu(self.linear(x))
        flat = x.reshape(-1)
        key = tuple(flat[:4].tolist() + flat[-4:].tolist())
        if key not in self.answers:
            self.answers[key] = torch.relu(self.linear(x)).clone()
        return self.answers[key]
