"""What this device reaches in practice: a large copy (bandwidth) and large matmuls (FLOP rates).

Datasheet peaks (host/speed_of_light.py) are boost-clock ceilings nobody reaches; the measured figures
say how far below them this particular card, clock and driver sit, so a reader can tell "15% of SoL"
from "15% of what this card actually does". ``pikeh baselines`` records them in the set's meta.json.
A few seconds on a GPU. ``python -m pike_harness.worker.microbench --device cuda`` prints JSON.
torch and the standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import torch

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _time_ms(fn: Any, device: torch.device, reps: int) -> float:
    """Median milliseconds of ``fn`` over ``reps`` calls after two warm-up calls."""
    for _ in range(2):
        fn()
    times = []
    for _ in range(reps):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        else:
            began = time.perf_counter()
            fn()
            times.append((time.perf_counter() - began) * 1e3)
    return sorted(times)[len(times) // 2]


def measure(device_name: str = "cuda", *, copy_mb: int | None = None, matmul_n: int | None = None,
            reps: int = 10) -> dict[str, Any]:
    """Copy bandwidth (GB/s, read + write) and matmul TFLOP/s per precision on one device."""
    device = torch.device(device_name)
    cuda = device.type == "cuda"
    copy_mb = copy_mb or (1024 if cuda else 64)
    matmul_n = matmul_n or (8192 if cuda else 512)
    src = torch.empty(copy_mb * 2 ** 20 // 4, dtype=torch.float32, device=device).fill_(1.0)
    dst = torch.empty_like(src)
    copy_ms = _time_ms(lambda src=src, dst=dst: dst.copy_(src), device, reps)
    result: dict[str, Any] = {"device": device_name, "gpu": torch.cuda.get_device_name(device) if cuda else None,
                              "copy_mb": copy_mb, "copy_gbs": 2 * src.numel() * 4 / (copy_ms * 1e-3) / 1e9,
                              "matmul_n": matmul_n, "matmul_tflops": {}}
    del src, dst  # free the copy buffers before the matmuls
    old_tf32 = torch.backends.cuda.matmul.allow_tf32
    try:
        for name, dtype in DTYPES.items():
            if not cuda and name in ("tf32", "fp16"):
                continue  # CPUs have no TF32 mode and crawl through fp16
            torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
            a = torch.randn(matmul_n, matmul_n, device=device, dtype=dtype)
            b = torch.randn(matmul_n, matmul_n, device=device, dtype=dtype)
            ms = _time_ms(lambda a=a, b=b: torch.mm(a, b), device, reps)
            result["matmul_tflops"][name] = 2 * matmul_n ** 3 / (ms * 1e-3) / 1e12
            del a, b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old_tf32
    if cuda:
        torch.cuda.empty_cache()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--copy-mb", type=int, default=None)
    parser.add_argument("--matmul-n", type=int, default=None)
    args = parser.parse_args(argv)
    print(json.dumps(measure(args.device, copy_mb=args.copy_mb, matmul_n=args.matmul_n)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
