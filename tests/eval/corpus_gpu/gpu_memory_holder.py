# threat: 13 (fill memory, on the GPU, from a second process): the candidate keeps device memory
# for its own calls and loads its kernel, then starts a process that takes all but 256 MiB of the
# device's memory and waits, so the task's reference cannot run beside it; its own calls succeed
# task: tasks/3_WideGelu.py
# expect: runtime_error/memory_limit
# limits: memory_mb=16000
import subprocess
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HOLDER = r"""
import sys
import time

import torch

# All but 256 MiB: room for the kernels the candidate's process loads lazily, too little for the
# reference's 64 MiB tensors (a reference process keeps several).
held, (free, _) = [], torch.cuda.mem_get_info()
left = free - (256 << 20)
while left >= 2 << 20:
    size = min(left, 1 << 30) // (2 << 20) * (2 << 20)
    held.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
    left -= size
free, total = torch.cuda.mem_get_info()
print(f"holder: {sum(t.numel() for t in held) / 2**30:.1f} GiB held, {free / 2**20:.0f} MiB of "
      f"{total / 2**30:.0f} GiB free", file=sys.stderr, flush=True)
print("ready", flush=True)
time.sleep(3600)
"""


class ModelNew(nn.Module):
    holder = None

    def __init__(self):
        super().__init__()
        if ModelNew.holder is None:
            # Blocks freed at once stay reserved by this process's caching allocator: its own calls
            # never need new device memory once the holder has taken the rest.
            torch.empty(2 << 30, dtype=torch.uint8, device="cuda")
            F.gelu(torch.zeros(8, device="cuda"))  # its kernel loaded now, while there is room
            small = [torch.empty(256 << 10, dtype=torch.uint8, device="cuda") for _ in range(64)]
            del small
            ModelNew.holder = subprocess.Popen(
                [sys.executable, "-c", HOLDER, "pikeh-corpus-device-memory-holder"], stdout=subprocess.PIPE, text=True)
            assert ModelNew.holder.stdout.readline().strip() == "ready"

    def forward(self, x):
        return F.gelu(x)
