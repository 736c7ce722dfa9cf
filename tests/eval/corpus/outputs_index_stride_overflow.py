# threat: 7 (lie in the outputs' index): replaces the close of the worker's outputs writer (it shares the
# process; the writer is found through the stack, as replacing its class is a patched_function) so
# that every checked call claims one empty tensor of shape [0, 2**47, 2**47], whose strides overflow
# torch's 64-bit arithmetic in the reader: a crafted file is the candidate's verdict, never the harness's error
# task: smoke/5
# expect: rejected/outputs_file
import sys

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


def _lying_close(writer):
    def close():
        writer.index = [[["float32", [0, 2**47, 2**47], 0, 0]] for _ in writer.index]
        type(writer).close(writer)

    return close


class ModelNew(nn.Module):
    def forward(self, x):
        found = _check_locals()
        if found is not None:
            found["writer"].close = _lying_close(found["writer"])
        return F.gelu(x)
