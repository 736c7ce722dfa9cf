# threat: 7 (lie in the outputs' index): replaces the worker's outputs writer (it shares the process) so
# that the file's index is 100,000 nested lists, past any JSON parser's recursion limit: a crafted file is
# the candidate's verdict, never the harness's error
# task: smoke/5
# expect: rejected/outputs_file
import sys

import torch.nn as nn
import torch.nn.functional as F

_module = next(module for name, module in list(sys.modules.items()) if name.endswith(".output_file"))


def _deep_close(self):
    index = b"[" * 100_000 + b"]" * 100_000
    self._put(memoryview(index + _module._FOOTER.pack(len(index), _module.MAGIC)))
    self.abandon()


_module.OutputWriter.close = _deep_close


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)
