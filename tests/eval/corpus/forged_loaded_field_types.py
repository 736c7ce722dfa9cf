# threat: 8 (forge a report): at import, writes a "loaded" report (it needs no nonce) whose fields have
# the wrong types: a protocol violation, never the supervisor's crash
# task: smoke/5
# expect: rejected/protocol
import json
import os
import sys

import torch.nn as nn
import torch.nn.functional as F

_CHANNEL = int(sys.argv[2])  # the child's pipe to the supervisor
os.write(_CHANNEL, (json.dumps({"event": "loaded", "seconds": "soon", "environment": 5}) + "\n").encode())


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)
