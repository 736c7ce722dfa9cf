# threat: 13 (os._exit): leaves without a word in the middle of the first call
# task: smoke/5
# expect: runtime_error/exited
import os

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        os._exit(0)
