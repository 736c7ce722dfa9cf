# threat: 7 (lie in the outputs' index): replaces the worker's outputs writer (it shares the process) so
# that every checked call claims one empty tensor of shape [0, 2**47, 2**47], whose strides overflow
# torch's 64-bit arithmetic in the reader: a crafted file is the candidate's verdict, never the harness's error
# task: smoke/5
# expect: rejected/outputs_file
import sys

import torch.nn as nn
import torch.nn.functional as F

_writer = next(module for name, module in list(sys.modules.items()) if name.endswith(".output_file")).OutputWriter
_close = _writer.close


def _lying_close(self):
    self.index = [[["float32", [0, 2**47, 2**47], 0, 0]] for _ in self.index]
    _close(self)


_writer.close = _lying_close


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)
