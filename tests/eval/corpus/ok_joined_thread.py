# threat: none (legitimate): work on a helper thread that is joined before forward returns
# task: smoke/5
# expect: correct
import threading

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x):
        out = torch.empty_like(x)
        half = x.shape[0] // 2

        def lower():
            out[:half] = F.gelu(x[:half])

        worker = threading.Thread(target=lower)
        worker.start()
        out[half:] = F.gelu(x[half:])
        worker.join()
        return out
