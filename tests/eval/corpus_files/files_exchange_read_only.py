# threat: 26 (trusted side trips over an exchange folder): takes write permission away from its
# exchange folder at import; the worker's create of the outputs file there then failed with EACCES,
# which it reported as the harness's own failure (an infrastructure error that stopped the run, on
# every resume). Any failure to create an exchange file after the candidate ran is its verdict.
# task: smoke/5
# expect: rejected/exchange_file
import glob
import os
from pathlib import Path

import torch.nn.functional as F
from torch import nn

HERE = Path.cwd()
for folder in glob.glob("/dev/shm/pikeh-x-*") + glob.glob(str(HERE / "pikeh-x-*")):
    os.chmod(folder, 0o500)


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)
