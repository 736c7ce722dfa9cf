# threat: 7 (lie in the outputs' index): replaces the close of the worker's outputs writer (it shares the
# process; the writer is found through the stack, as replacing its class is a patched_function) so
# that the file's index is 100,000 nested lists, past any JSON parser's recursion limit: a crafted file is
# the candidate's verdict, never the harness's error
# task: smoke/5
# expect: rejected/outputs_file
import sys
import types

import torch.nn as nn
import torch.nn.functional as F


def _check_locals():
    """The locals of the worker's frame that holds the outputs writer (it shares the process)."""
    frame = sys._getframe(1)
    while frame is not None:
        if "writer" in frame.f_locals and "outputs_path" in frame.f_locals:
            return frame.f_locals
        frame = frame.f_back
    return None


def _deep_close(self):
    module = sys.modules[type(self).__module__]
    index = b"[" * 100_000 + b"]" * 100_000
    self._put(memoryview(index + module._FOOTER.pack(len(index), module.MAGIC)))
    self.abandon()


class ModelNew(nn.Module):
    def forward(self, x):
        found = _check_locals()
        if found is not None:
            found["writer"].close = types.MethodType(_deep_close, found["writer"])
        return F.gelu(x)
