# threat: 5 (work beside another's timing): a finalizer of cyclic garbage, run by the collector while the
# process waits for its next stage, could launch device work while another candidate is timed
# task: smoke/5
# expect: correct
import gc
import sys

import torch.nn as nn
import torch.nn.functional as F

_SEEN = set()


class _Cycle:
    """Garbage that, when collected, leaves the next generation of itself: there is always some to collect."""

    def __init__(self):
        self.me = self

    def __del__(self):
        frame, names = sys._getframe(), set()
        while frame is not None:
            names.add(frame.f_code.co_name)
            frame = frame.f_back
        where = "FINALIZED_WHILE_WAITING" if "_wait" in names else "FINALIZED_IN_STAGE"
        if where not in _SEEN:
            _SEEN.add(where)
            print(where, flush=True)
        _Cycle()


class ModelNew(nn.Module):
    def forward(self, x):
        gc.set_threshold(1)  # a collection at nearly every allocation: while waiting too, unless it is off
        _Cycle()
        return F.gelu(x)
