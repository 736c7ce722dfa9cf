# threat: 6 (a background thread finishes the work after the timer stops): forward returns an
# empty buffer at once and a thread fills it a little later
# task: smoke/5
# expect: rejected/output_changed_after_return
import threading
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.zeros_like(x)

        def finish():
            time.sleep(0.01)
            out.copy_(F.gelu(x))

        threading.Thread(target=finish, daemon=True).start()
        return out
