# threat: 8 (forge a report): at import, writes a load_inline "build" request (it needs no nonce) that
# the build cache cannot share; the supervisor's reply then waits for the worker as if it were a
# command, the worker takes it for the end of the session and exits, and the supervisor's next command
# finds the pipe closed: the candidate's process ended, never the supervisor's crash (BrokenPipeError)
# task: smoke/5
# expect: runtime_error/exited
import json
import os
import sys

import torch.nn as nn
import torch.nn.functional as F

_CHANNEL = int(sys.argv[2])  # the child's pipe to the supervisor
os.write(_CHANNEL, (json.dumps({"event": "build", "spec": {"name": "not an identifier"}}) + "\n").encode())


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)
