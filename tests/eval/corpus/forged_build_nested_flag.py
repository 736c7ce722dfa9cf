# threat: 8 (forge a report): at import, writes a load_inline "build" request (it needs no nonce) whose
# compiler flags hold a list where a flag belongs: a rejected build request, never the supervisor's crash
# task: smoke/5
# expect: rejected/build_flags
import json
import os
import sys

import torch.nn as nn
import torch.nn.functional as F

_CHANNEL = int(sys.argv[2])  # the child's pipe to the supervisor
_SPEC = {"name": "forged", "cpp_sources": ["int f() { return 0; }"], "functions": ["f"],
         "extra_cflags": [["-O3"]]}
os.write(_CHANNEL, (json.dumps({"event": "build", "spec": _SPEC}) + "\n").encode())


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)
