"""The noise canary's probe, timed by the candidate's process just before and just after each timing.

A fixed launch-bound workload (a few tiny kernels and a synchronize on a GPU; the same tiny tensor
ops on the CPU device) whose time depends on the host (CPU speed, steal, launch latency) and not on
the candidate. The supervisor compares its readings with the device's recent baseline
(``supervise/noise.py``). Only references from ``trusted`` are called, so a candidate that replaced
``torch.Tensor.add_`` or the timers cannot fake a quiet host (and is rejected for replacing them).
"""

from __future__ import annotations

import torch

from pike_harness.worker.inside import trusted as T

PROBE_OPS = 8  # tiny kernels per probe: launch latency, not arithmetic
PROBE_REPEATS = 5  # probes per reading; the reading is their median (one preemption does not move it)


class Canary:
    """The probe's tensor, allocated once per process on the timed device."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.tensor = torch.zeros(16, dtype=torch.float32, device=device)

    def read(self) -> float:
        """One reading in milliseconds: the median of ``PROBE_REPEATS`` probes."""
        times = []
        for _ in range(PROBE_REPEATS):
            self._sync()
            t0 = T.perf_counter()
            for _ in range(PROBE_OPS):
                T.add_(self.tensor, 1.0)
            self._sync()
            times.append((T.perf_counter() - t0) * 1000.0)
        T.zero_(self.tensor)
        return sorted(times)[len(times) // 2]

    def _sync(self) -> None:
        if self.cuda:
            T.cuda_synchronize()

