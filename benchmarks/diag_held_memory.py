"""What memory policing's shared-memory scan (``worker/supervise/held_memory.py``) finds in a process that
does what an honest candidate does on a device: torch initialised, a Triton kernel and a cuDNN
convolution run, a ``torch.compile``d function called. Memfds and deleted tmpfs files count toward a
candidate's ``memory_mb``; whether a CUDA process holds any of its own (the driver, the caching
allocator, Triton, Inductor) was not measured when the scan was built (2026-11-30, on a CPU VM).

Prints one JSON line per step: the bytes and objects found, how many were sized by their mapped
extent only, and whether the scan stopped short. Run on the device, e.g.
    python3 benchmarks/diag_held_memory.py --device cuda:0
and on the CPU first (``--device cpu``: no Triton step).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch  # noqa: E402

from pike_harness.worker.supervise import held_memory  # noqa: E402


def _report(step: str) -> None:
    held = held_memory.measure([(os.getpid(), None)])
    print(json.dumps({"step": step, "bytes": held.bytes, "objects": held.objects, "estimated": held.estimated,
                      "over": held.over, "euid": os.geteuid()}), flush=True)


def _triton_step(device: torch.device) -> None:
    import triton
    import triton.language as tl

    @triton.jit
    def add_one(x, y, n, block: tl.constexpr):
        i = tl.program_id(0) * block + tl.arange(0, block)
        mask = i < n
        tl.store(y + i, tl.load(x + i, mask=mask) + 1, mask=mask)

    x = torch.randn(1 << 22, device=device)
    y = torch.empty_like(x)
    add_one[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), block=1024)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()
    device = torch.device(args.device)
    _report("torch imported")
    torch.ones(1, device=device)
    _report("device initialised")
    if device.type == "cuda":
        _triton_step(device)
        torch.cuda.synchronize()
        _report("triton kernel")
    weight = torch.randn(64, 64, 3, 3, device=device)
    torch.nn.functional.conv2d(torch.randn(8, 64, 56, 56, device=device), weight)
    _report("convolution")
    compiled = torch.compile(lambda t: torch.relu(t) * 2)
    compiled(torch.randn(1024, device=device))
    if device.type == "cuda":
        torch.cuda.synchronize()
    time.sleep(0.1)
    _report("torch.compile")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
