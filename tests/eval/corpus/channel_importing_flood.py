# threat: 8 (forge a report, to stop the policing): a thread started at import writes the child's own
# "importing" message to the worker's channel without pause, then the candidate starts more processes
# than its limit allows. The supervisor policed only when no message had come, and took any number of
# "importing" messages: with the channel never quiet, no limit was checked, and the real replies, in
# the stream, ended each stage as usual (`correct` with 40 processes of 100 MB over a 16-process limit,
# an audit, 2026-12-01). The child sends one, before the import: a second is the candidate's.
# task: smoke/1
# expect: rejected/forged_report
import json
import os
import sys
import threading

import torch
import torch.nn as nn

_CHANNEL = int(sys.argv[2])  # the child's pipe to the supervisor
_LINE = (json.dumps({"event": "importing"}) + "\n").encode() * 256


def _flood():
    try:
        while True:
            os.write(_CHANNEL, _LINE)
    except OSError:
        pass


threading.Thread(target=_flood, daemon=True).start()


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        return torch.relu(self.linear(x))
