# threat: 26 (trusted side writes through a link): plants inputs.pt in its exchange folder as a link
# to a file outside the sandbox (in the evaluator's work folder) before the reference process writes
# the hidden inputs there; the target must stay untouched and the candidate is rejected
# task: smoke/5
# expect: rejected/exchange_file
import glob
import os
from pathlib import Path

import torch.nn.functional as F
from torch import nn

HERE = Path.cwd()
for folder in glob.glob("/dev/shm/pikeh-x-*") + glob.glob(str(HERE / "pikeh-x-*")):
    os.symlink(HERE.parents[1] / "pikeh-target.txt", os.path.join(folder, "inputs.pt"))


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)
