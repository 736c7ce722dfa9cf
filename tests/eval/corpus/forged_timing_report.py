# threat: 8 (forge the timing report): writes its own "timed" message to the worker's channel
# task: smoke/1
# expect: rejected/forged_report
import json
import os
import sys

import torch
import torch.nn as nn

_CHANNEL = int(sys.argv[2])  # the child's pipe to the supervisor
_calls = [0]


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        _calls[0] += 1
        if _calls[0] == 6:  # the correctness stage makes 5 calls (check_plan): this is the first timed one
            fake = {"event": "timed", "threads": {}, "notes": [], "backend_flags": {},
                    "run": {"samples_ms": [0.01] * 5, "host_ms": [0.01] * 5, "host_wall_ms": 0.05,
                            "warmup": 1, "reps": 5, "estimate_ms": 0.01}}
            os.write(_CHANNEL, (json.dumps(fake) + "\n").encode())
        return torch.relu(self.linear(x))
