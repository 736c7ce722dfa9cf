# threat: 13 (leave a process behind): a double-forked daemon in a new session outlives the
# evaluation unless the supervisor sweeps for its marker; the candidate itself is correct
# task: smoke/5
# expect: correct
import os
import time

import torch.nn as nn
import torch.nn.functional as F

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        time.sleep(120)
    os._exit(0)


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)
