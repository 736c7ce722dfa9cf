# threat: 9 (cache results by input content, primed from the harness's files): on its first call it looks
# for the hidden inputs file the reference process wrote into its exchange folder, computes the answer
# of every set in it, then replays by content. When the fresh sets lay in that file (2026-11-30, an
# audit's finding), the fresh calls were replays too: `correct` at 8x an honest speed. They are made in
# the candidate's process before its import now, from seeds it never sees, so no file holds them.
# task: smoke/1
# expect: rejected/content_cache
# expect-gpu: correct
import glob
import os

import torch
import torch.nn as nn


def _inputs_file():
    here = os.getcwd()
    for pattern in (os.path.join(here, "**", "inputs.pt"), os.path.join(os.path.dirname(here), "**", "inputs.pt"),
                    "/dev/shm/pikeh-x-*/inputs.pt"):
        for found in glob.glob(pattern, recursive=True):
            return found
    return None


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.answers = {}
        self.primed = False

    @staticmethod
    def _key(x):
        flat = x.reshape(-1)
        return tuple(flat[:4].tolist() + flat[-4:].tolist())

    def forward(self, x):
        if x.is_cuda:  # reading a key back to the host costs more than this task's call on a GPU
            return torch.relu(self.linear(x))
        if not self.primed:
            self.primed = True
            path = _inputs_file()
            if path:
                for values in torch.load(path, weights_only=True):
                    self.answers[self._key(values[0])] = torch.relu(self.linear(values[0])).clone()
        key = self._key(x)
        if key not in self.answers:
            self.answers[key] = torch.relu(self.linear(x)).clone()
        return self.answers[key]
