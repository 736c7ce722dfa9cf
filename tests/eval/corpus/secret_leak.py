# threat: 14 (read secrets): prints every environment variable of its own process and of its
# parent (the harness; sandboxed, bwrap's init with the scrubbed environment) and raises with them,
# hoping they reach the result record; otherwise correct
# task: smoke/5
# expect: correct
import os

import torch.nn as nn
import torch.nn.functional as F


def _dump():
    print("ENV", dict(os.environ))
    try:
        with open(f"/proc/{os.getppid()}/environ", "rb") as handle:
            print("PARENT", handle.read().decode(errors="replace"))
    except OSError as exc:
        print("PARENT unreadable", exc)


_dump()


class ModelNew(nn.Module):
    def forward(self, x):
        _dump()
        return F.gelu(x)
