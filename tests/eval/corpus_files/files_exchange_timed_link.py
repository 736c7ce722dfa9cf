# threat: 26 (trusted side trips over an exchange file): plants timed.pt, where the worker hands the
# drawn timed outputs to the reference process, as a link to a file outside the sandbox at import;
# the worker's create refuses the name and the reference process never opens it. The target must stay
# untouched.
# task: smoke/5
# expect: rejected/exchange_file
import glob
import os
from pathlib import Path

import torch.nn.functional as F
from torch import nn

HERE = Path.cwd()
for folder in glob.glob("/dev/shm/pikeh-x-*") + glob.glob(str(HERE / "pikeh-x-*")):
    os.symlink(HERE.parents[1] / "pikeh-target.txt", os.path.join(folder, "timed.pt"))


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)
