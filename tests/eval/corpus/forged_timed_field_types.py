# threat: 8 (forge the timing report): reads the running "time" command's nonce from the worker's
# frames (it shares the process) and writes a "timed" report with it whose samples are not numbers: a
# protocol violation, never the supervisor's crash
# task: smoke/5
# expect: rejected/protocol
import json
import os
import sys

import torch.nn as nn
import torch.nn.functional as F

_CHANNEL = int(sys.argv[2])  # the child's pipe to the supervisor
_sent = []


def _nonce_of(function):
    """The ``nonce`` local of the worker's frame running ``function``, above the caller's."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == function and isinstance(frame.f_locals.get("nonce"), str):
            return frame.f_locals["nonce"]
        frame = frame.f_back
    return None


class ModelNew(nn.Module):
    def forward(self, x):
        nonce = _nonce_of("_time")
        if nonce is not None and not _sent:
            _sent.append(nonce)
            forged = {"event": "timed", "nonce": nonce, "threads": {}, "notes": [], "backend_flags": {},
                      "run": {"samples_ms": ["fast"] * 5, "host_ms": [0.01] * 5, "host_wall_ms": 0.05,
                              "warmup": 1, "reps": 5, "estimate_ms": 0.01}}
            os.write(_CHANNEL, (json.dumps(forged) + "\n").encode())
        return F.gelu(x)
