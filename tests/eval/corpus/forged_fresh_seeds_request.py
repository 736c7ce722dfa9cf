# threat: 12 (answer the fresh calls from a cache): at import it asks the supervisor for the fresh
# sets' seeds on the worker's channel, as the harness's code does before the import, to read the
# frame before the child does. Only the request sent before the import is answered.
# task: smoke/1
# expect: rejected/forged_report
import json
import os
import sys

import torch
import torch.nn as nn

os.write(int(sys.argv[2]), (json.dumps({"event": "fresh_seeds"}) + "\n").encode())


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        return torch.relu(self.linear(x))
