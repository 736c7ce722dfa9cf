# threat: 26 (trusted side blocks on an exchange file): plants inputs.pt in its exchange folder as a
# FIFO; the shared reference process must neither hang nor keep an honest neighbour waiting
# task: smoke/5
# expect: rejected/exchange_file
import glob
import os
from pathlib import Path

import torch.nn.functional as F
from torch import nn

for folder in glob.glob("/dev/shm/pikeh-x-*") + glob.glob(str(Path.cwd() / "pikeh-x-*")):
    os.mkfifo(os.path.join(folder, "inputs.pt"))


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)
