"""How busy the host's CPU was inside and outside the timing windows of a run (Linux ``/proc/stat``).

Under the quiet rule ``stop`` everything else of ours is paused while a candidate is timed, so all
CPU work of a batch (process starts, builds, warm-ups, checks) happens between timings. If the CPU is
nearly saturated there, the batch's wall time is the timings plus that work divided by the cores, and
no device scheduling makes it shorter; if it is not, the device schedule is what to improve. This
sampler reads the whole host's busy and total clock ticks a few times a second; ``split`` charges each
interval to "inside a timing window" or "outside", by overlap, from the windows the engine's traces
recorded.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from typing import Any

from pike_harness.worker.supervise.noise import PROC_STAT, cpu_ticks


def _read() -> tuple[float, float] | None:
    """(busy, total) ticks of the host's CPUs (``noise.cpu_ticks``: idle and iowait are not busy)."""
    ticks = cpu_ticks()
    if ticks is None:
        return None
    return float(sum(ticks) - ticks[3] - ticks[4]), float(sum(ticks))


def host_cores() -> int:
    """The CPUs ``/proc/stat`` sums over (its ``cpuN`` lines), else ``os.cpu_count()``."""
    try:
        with open(PROC_STAT, encoding="ascii") as handle:
            count = sum(1 for line in handle if line.startswith("cpu") and line[3:4].isdigit())
    except OSError:
        count = 0
    return count or os.cpu_count() or 1


class CpuSampler:
    """Samples ``/proc/stat`` every ``interval_s`` in a daemon thread between ``start`` and ``stop``."""

    def __init__(self, interval_s: float = 0.25):
        self.interval_s = interval_s
        self.samples: list[tuple[float, float, float]] = []  # (monotonic, busy, total)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        reading = _read()
        if reading is not None:
            self.samples.append((time.monotonic(), *reading))

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def start(self) -> CpuSampler:
        self._sample()
        self._thread = threading.Thread(target=self._loop, name="cpu-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling (again: nothing more)."""
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample()


def _overlap(start: float, end: float, windows: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(end, b) - max(start, a)) for a, b in windows)


def split(samples: list[tuple[float, float, float]], windows: Iterable[tuple[float, float]],
          cores: int | None = None) -> dict[str, Any]:
    """Busy core-seconds and utilisation inside and outside ``windows`` (monotonic start, end).

    Each sampling interval's busy share is spread evenly over it and charged by overlap, so a window
    shorter than the interval still gets its part. Utilisation is busy core-seconds over
    (seconds x cores)."""
    cores = cores or host_cores()
    merged: list[tuple[float, float]] = []
    for a, b in sorted(w for w in windows if w[1] > w[0]):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    figures = {"inside": [0.0, 0.0], "outside": [0.0, 0.0]}  # [seconds, busy core-seconds]
    for (t0, busy0, total0), (t1, busy1, total1) in zip(samples, samples[1:], strict=False):
        span = t1 - t0
        if span <= 0 or total1 <= total0:
            continue
        busy_cores = cores * (busy1 - busy0) / (total1 - total0)  # cores busy on average over the interval
        inside = _overlap(t0, t1, merged)
        for part, seconds in (("inside", inside), ("outside", span - inside)):
            figures[part][0] += seconds
            figures[part][1] += busy_cores * seconds
    return {"cores": cores, **{part: {"seconds": round(s, 2), "busy_core_s": round(c, 1),
                                      "utilisation": round(c / (s * cores), 3) if s > 0 else None}
                                for part, (s, c) in figures.items()}}


def describe(figures: dict[str, Any]) -> str:
    """One line for a report."""
    parts = []
    for part, label in (("outside", "between timings"), ("inside", "inside timing windows")):
        f = figures[part]
        util = "-" if f["utilisation"] is None else f"{100 * f['utilisation']:.0f} %"
        parts.append(f"{label} {f['seconds']:.0f} s at {util} of {figures['cores']} cores ({f['busy_core_s']:.0f} core-s)")
    return "host CPU: " + "; ".join(parts)
