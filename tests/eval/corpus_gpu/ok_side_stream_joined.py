# threat: none (legitimate): half of the work on a side stream that is joined before forward returns
# task: smoke/5
# expect: correct
import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.side = None

    def forward(self, x):
        if self.side is None:
            self.side = torch.cuda.Stream()
        main = torch.cuda.current_stream()
        half = x.shape[0] // 2
        self.side.wait_stream(main)
        with torch.cuda.stream(self.side):
            lower = F.gelu(x[:half])
        upper = F.gelu(x[half:])
        main.wait_stream(self.side)
        lower.record_stream(main)
        return torch.cat([lower, upper])
