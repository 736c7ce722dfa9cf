# threat: 26 (trusted side blocks on an exchange file): replaces the worker's outputs writer (it shares
# the process) so that outputs.pt is a FIFO when the reference process opens it to compare
# task: smoke/5
# expect: rejected/outputs_file
import os
import sys

import torch.nn.functional as F
from torch import nn


def _plant(self, path):
    os.mkfifo(path)
    self.fd = os.open(os.devnull, os.O_WRONLY)
    self.offset, self.index, self.staging = 0, [], None


# the worker's own module (it shares the process), found without naming the harness
output_file = next(m for n, m in list(sys.modules.items()) if n.endswith(".output_file"))
output_file.OutputWriter.__init__ = _plant
output_file.OutputWriter.add = lambda self, tensors: None


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)
