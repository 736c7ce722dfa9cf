# threat: 26 (trusted side trips over an exchange file): plants outputs.pt in its exchange folder as a
# link to a file outside the sandbox at import, before the worker creates it for the checked calls'
# outputs; the create used to follow the name into an error the worker took for its own (an
# infrastructure error that stopped the run, on every resume). The target must stay untouched.
# task: smoke/5
# expect: rejected/exchange_file
import glob
import os
from pathlib import Path

import torch.nn.functional as F
from torch import nn

HERE = Path.cwd()
for folder in glob.glob("/dev/shm/pikeh-x-*") + glob.glob(str(HERE / "pikeh-x-*")):
    os.symlink(HERE.parents[1] / "pikeh-target.txt", os.path.join(folder, "outputs.pt"))


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)
