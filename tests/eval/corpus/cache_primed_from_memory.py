# threat: 9 (cache results by input content, primed from the harness's memory): in its first calls it
# searches its own process (gc.get_objects()) for every tensor shaped like its input, computes each
# one's answer and replays by content from then on. The fresh sets were held in the process as plain
# input tensors until 2026-11-30 evening, so it found them too and replayed the fresh calls: `correct`
# at an honest speed's ratio of 0.96. They are held masked now (timing.MaskedTensor) and unmasked only
# into the call's own buffer, so the fresh calls are computed and condemn it.
# task: smoke/1
# expect: rejected/content_cache
# expect-gpu: correct
import gc

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.answers = {}
        self.searches = 0

    @staticmethod
    def _key(x):
        flat = x.reshape(-1)
        return tuple(flat[:4].tolist() + flat[-4:].tolist())

    def _search(self, x):
        for found in gc.get_objects():
            for item in found if isinstance(found, (list, tuple)) else (found,):
                if isinstance(item, torch.Tensor) and item.shape == x.shape and item.dtype == x.dtype:
                    key = self._key(item)
                    if key not in self.answers:
                        self.answers[key] = torch.relu(self.linear(item.to(x.device))).clone()

    def forward(self, x):
        if x.is_cuda:  # reading a key back to the host costs more than this task's call on a GPU
            return torch.relu(self.linear(x))
        if self.searches < 3:  # the check's calls, then a timing's first: where new sets would have appeared
            self.searches += 1
            self._search(x)
        key = self._key(x)
        if key not in self.answers:
            self.answers[key] = torch.relu(self.linear(x)).clone()
        return self.answers[key]
