# category: incorrect (integer outputs within the tolerance and wrong): every argmax at position 100 or more is
# reported one too high (about 60 % of the indices). allclose(atol=rtol=1e-2) admits |error| <= 0.01
# + 0.01 * index for int64, so it was `correct`; integer outputs are now compared exactly.
# task: tasks/5_Argmax.py
# expect: incorrect/allclose
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.dim = dim

    def forward(self, x):
        index = torch.argmax(x, dim=self.dim)
        return index + (index >= 100).to(index.dtype)
