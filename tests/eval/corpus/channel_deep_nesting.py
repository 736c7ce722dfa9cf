# threat: 8 (forge a report): at import, writes one line of 100,000 nested lists to the worker's
# channel, past the JSON parser's recursion limit: a protocol violation, never the supervisor's crash
# task: smoke/5
# expect: rejected/protocol
import os
import sys

import torch.nn as nn
import torch.nn.functional as F

_CHANNEL = int(sys.argv[2])  # the child's pipe to the supervisor
os.write(_CHANNEL, b"[" * 100_000 + b"]" * 100_000 + b"\n")


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)
