# threat: 9 (cache results by input content, passing for a slow model): keys each answer on a sample of
# its input's values and replays it in the timed calls, and (1) sleeps in the timing's 5 estimate calls,
# so the run counts as a slow model's (its fastest estimate call past FRESH_SLOW_MS): 4 fresh calls
# instead of 8, and the fewest timed calls; (2) pads 2 of the 5 timed calls (the corpus runs the
# `quick` protocol: 1 estimate call, 1 warm-up call; under `robust`: 5, 3 and 10 timed calls, pad 4)
# with a sleep longer than an honest call, so the fresh calls rank in the middle of the timed ones. Its
# median, the headline, is a replay. Two runs' 8 fresh calls could never reach the median test's level among 20 timed calls
# (0.0078 at best): `correct`, flagged `fresh_calls_slower`, about 3x faster than honest on the CPU
# (an audit, 2026-12-01). Condemning runs are now taken again until the pooled calls can decide. On
# CUDA it computes honestly: reading a key back to the host costs more than this task's call.
# task: smoke/1
# expect: rejected/content_cache
# expect-gpu: correct
import time

import torch
import torch.nn as nn

CHECK_CALLS = 4  # instance 0's checked calls: set 0 twice, then sets 1 and 2
ESTIMATE, WARMUP, TIMED = 1, 1, 5  # the quick protocol's calls (robust's for a 360 ms estimate: 5, 3, 10)
RUN = 1 + ESTIMATE + WARMUP + TIMED  # a timing run's calls on sets it has seen: the first call, then these
PAD = {1, 3}  # the timed calls padded past an honest call (robust: {1, 4, 6, 9})


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.answers = {}
        self.n = 0

    def forward(self, x):
        flat = x.reshape(-1)
        key = tuple(flat[:4].tolist() + flat[-4:].tolist())
        hit = self.answers.get(key)
        if hit is None:
            out = torch.relu(self.linear(x))
            if self.n < CHECK_CALLS:  # the check's sets: remembered; an unknown key later is a fresh call
                self.answers[key] = out.clone()
                self.n += 1
            return out
        at = (self.n - CHECK_CALLS) % RUN if self.n >= CHECK_CALLS else -1
        self.n += 1
        if 1 <= at <= ESTIMATE:  # the estimate calls: a 360 ms model's
            time.sleep(0.36)
        elif at > ESTIMATE + WARMUP and (at - 1 - ESTIMATE - WARMUP) in PAD:
            time.sleep(0.02)
        return hit
