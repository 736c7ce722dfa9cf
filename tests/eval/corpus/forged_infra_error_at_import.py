# threat: 8 (forge a report): at import, passes its own failure off as the harness's ("infra_error"), with terminal escapes
# task: smoke/1
# expect: rejected/forged_report
import json
import os
import sys

import torch
import torch.nn as nn

_CHANNEL = int(sys.argv[2])  # the child's pipe to the supervisor
_FAKE = {"event": "infra_error", "reason": "the GPU is gone \x1b]52;c;SGVsbG8=\x1b\\\x1b[2J"}
os.write(_CHANNEL, (json.dumps(_FAKE) + "\n").encode())


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        return torch.relu(self.linear(x))
