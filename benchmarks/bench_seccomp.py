"""The sandbox's system-call filter costs nothing measurable in timing: the same workload, sandboxed,
with and without the filter, alternating, side by side in one sitting.

  python benchmarks/bench_seccomp.py [--device cpu|cuda] [--rounds 7] [--calls 200]

Each round starts two sandboxes (bwrap with the same binds; one adds ``--seccomp``), in alternating
order so that drift of the machine falls on both. Inside, a small model is timed the way the
evaluator times candidates (warm-up, then per-call host-clock times, CUDA synchronised), and, as an
upper bound of the filter's cost, a loop of cheap system calls (``os.stat``, each one passing the
filter). Prints the medians per configuration and the ratio filter/no filter; the timed-call ratio is
the figure that matters (1.00 within the spread), the system-call one shows the filter's own cost per
call. Standard library plus the harness; torch inside the sandbox.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from pike_harness.worker.supervise import isolation, seccomp

WORKLOAD = r"""
import json, os, sys, time
import torch
device, calls = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
torch.set_num_threads(1)  # one core: the same work in both configurations, less contention noise
model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.GELU(), torch.nn.Linear(512, 512)).to(device)
x = torch.randn(64, 512, device=device)
sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
with torch.no_grad():
    for _ in range(20):
        model(x)
    sync()
    samples = []
    for _ in range(calls):
        began = time.perf_counter()
        model(x)
        sync()
        samples.append((time.perf_counter() - began) * 1e3)
began = time.perf_counter()
for _ in range(20000):
    os.stat("/")
syscall_us = (time.perf_counter() - began) * 1e6 / 20000
samples.sort()
print(json.dumps({"call_ms": samples[len(samples) // 2], "syscall_us": syscall_us}))
"""


def run_once(sandbox: isolation.Isolation, filtered: bool, device: str, calls: int) -> dict[str, float]:
    argv = [sys.executable, "-c", WORKLOAD, device, str(calls)]
    with seccomp.program_fd() as filter_fd:
        fd = filter_fd if filtered else None
        wrapped = sandbox.wrap(argv, cwd=Path("/"), seccomp_fd=fd)
        done = subprocess.run(
            wrapped, capture_output=True, text=True, timeout=600, pass_fds=() if fd is None else (fd,)
        )
    if done.returncode != 0:
        raise SystemExit(f"the sandboxed workload failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    try:
        sandbox = isolation.choose()
    except isolation.SandboxUnavailable as exc:
        raise SystemExit(str(exc)) from None
    if not seccomp.supported():
        raise SystemExit("no system-call filter for this architecture: nothing to compare")
    runs: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    for index in range(args.rounds):
        for filtered in (True, False) if index % 2 else (False, True):
            runs[filtered].append(run_once(sandbox, filtered, args.device, args.calls))
    summary = {}
    for key in ("call_ms", "syscall_us"):
        on = statistics.median(run[key] for run in runs[True])
        off = statistics.median(run[key] for run in runs[False])
        spread = statistics.pstdev(run[key] for run in runs[False]) / off if off else 0.0
        summary[key] = {
            "filter": on,
            "no_filter": off,
            "ratio": on / off if off else None,
            "spread_off": spread,
        }
        print(
            f"{key:11s} filter {on:.4f}  no filter {off:.4f}  ratio {on / off:.3f}  "
            f"(spread without the filter {spread:.1%}, {args.rounds} rounds, {args.device})"
        )
    print(json.dumps(summary, sort_keys=True))


if __name__ == "__main__":
    main()
