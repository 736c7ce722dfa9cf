# threat: 13 (hang): the first forward call never returns
# task: smoke/5
# expect: timeout/correctness_timeout
# limits: run_timeout_s=3
import time

import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        while True:
            time.sleep(1)
