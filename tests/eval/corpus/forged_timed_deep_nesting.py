# threat: 8 (forge a report): in its first timed call, reads the running command's nonce from the
# worker's frames and sends a "timed" report whose free-form "threads" object nests 700 levels deep:
# it passed the JSON parser and the field kinds, then the masking of the result recursed through it
# (RecursionError in the supervisor, a crash of the evaluation); messages nest 32 levels at most
# task: smoke/1
# expect: rejected/protocol
import json
import os
import sys

import torch
import torch.nn as nn

_CHANNEL = int(sys.argv[2])  # the child's pipe to the supervisor
_calls = [0]


def _nonce():
    frame = sys._getframe(1)
    while frame is not None:
        if isinstance(frame.f_locals.get("nonce"), str):
            return frame.f_locals["nonce"]
        frame = frame.f_back
    return None


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        _calls[0] += 1
        if _calls[0] == 7:  # past the five checked calls and a warm-up call, when one runs: a timed call
            deep = {}
            for _ in range(700):
                deep = {"a": deep}
            fake = {"event": "timed", "threads": deep, "notes": [], "backend_flags": {}, "nonce": _nonce(),
                    "run": {"samples_ms": [1.0], "host_ms": [1.0], "host_wall_ms": 1.0, "warmup": 1, "reps": 1,
                            "estimate_ms": 1.0}}
            os.write(_CHANNEL, (json.dumps(fake) + "\n").encode())
        return torch.relu(self.linear(x))
