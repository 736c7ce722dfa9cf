"""The noise canary's trusted half: the host's CPU steal time, each device's canary baseline, and the
decision whether a timing was taken on a noisy host.

Why: on a shared VM the same launch-bound model reads 2-3x apart between days and tens of percent
apart within minutes, and nothing in a timing itself says so. The candidate's process times a fixed
probe (``inside/canary.py``) just before and just after each timing; when that probe reads far off
what it read on this device lately, or the hypervisor stole a noticeable share of the CPUs over the
window (``/proc/stat``), the host was not the one the other timings saw. Such a timing is redone (a
bounded number of times) and, if it stays off, flagged ``noisy_timing`` rather than silently trusted.

The decision (``judge``) is a pure function of the readings and the limits; ``NoiseWatch`` keeps the
per-device baselines (the median of recent unflagged readings) and is shared by an engine's
evaluations. Standard library only.
"""

from __future__ import annotations

import statistics
import threading
from collections import deque
from dataclasses import dataclass

from pike_harness.worker.records import NOISY_TIMING, NoiseReport

NOISY_FLAG = NOISY_TIMING  # one name for the flag, shared with the host (worker/records.py)
BASELINE_READINGS = 20  # recent unflagged readings a device's baseline is the median of
MIN_BASELINE_READINGS = 3  # fewer: no baseline yet, so the canary cannot flag (steal still can)
PROC_STAT = "/proc/stat"


@dataclass(frozen=True)
class NoiseLimits:
    """When a timing counts as noisy, and how often it is redone before it is flagged instead.

    ``canary_tolerance``: how much slower than the device's baseline a canary reading may be (0.5:
    up to 1.5x of it). A faster reading is never noisy: it says the baseline itself was read on a
    busier host, and it moves the baseline down (measured on an H100, 2026-11-28: the first readings,
    taken while builds ran, set a baseline of 0.10-0.13 ms; quiet timings later read 0.062-0.068 ms,
    and judged "either way" all 7 were flagged and kept out of the baseline, which never came down).
    ``max_steal``: the largest share of CPU time the hypervisor may steal over the window. ``redo``: timings thrown away for noise before
    the last one is kept and flagged (0: never redo, only flag)."""

    canary_tolerance: float = 0.5
    max_steal: float = 0.05
    redo: int = 2


def judge(canary_before: float | None, canary_after: float | None, baseline: float | None,
          steal: float | None, limits: NoiseLimits) -> str | None:
    """Why a timing is noisy (one line), or None when it is quiet by these readings.

    A reading that is missing (no canary, a kernel without steal accounting, no baseline yet) cannot
    make a timing noisy: the check errs towards trusting, and the report says what was missing."""
    if steal is not None and steal > limits.max_steal:
        return (f"the host's CPU steal time was {steal:.1%} of the timing window "
                f"(more than {limits.max_steal:.1%})")
    if baseline is None or baseline <= 0:
        return None
    for when, reading in (("before", canary_before), ("after", canary_after)):
        if reading is None or reading <= 0:
            continue
        slower = reading / baseline - 1.0
        if slower > limits.canary_tolerance:
            return (f"the noise canary read {reading:.4f} ms {when} the timing against this device's "
                    f"recent {baseline:.4f} ms ({slower:.0%} slower, more than {limits.canary_tolerance:.0%})")
    return None


def cpu_ticks() -> list[int] | None:
    """The host's CPU time since boot in clock ticks, summed over all CPUs: user, nice, system, idle,
    iowait, irq, softirq, steal (guest time is already inside user); None where the kernel does not
    report them all (no ``/proc/stat``, or an old format)."""
    try:
        with open(PROC_STAT, encoding="ascii") as handle:
            fields = handle.readline().split()
    except OSError:
        return None
    if len(fields) < 9 or fields[0] != "cpu":
        return None
    try:
        return [int(value) for value in fields[1:9]]
    except ValueError:
        return None


def read_cpu_times() -> tuple[int, int] | None:
    """(steal, total) CPU time in clock ticks since boot, summed over all CPUs (``cpu_ticks``)."""
    ticks = cpu_ticks()
    return None if ticks is None else (ticks[7], sum(ticks))


def steal_fraction(before: tuple[int, int] | None, after: tuple[int, int] | None) -> float | None:
    """The share of all CPU time stolen between two ``read_cpu_times`` readings (None: unknown, or
    a window too short for the kernel's clock ticks to move)."""
    if before is None or after is None:
        return None
    total = after[1] - before[1]
    if total <= 0:
        return None
    return max(0.0, (after[0] - before[0]) / total)


class NoiseWatch:
    """Each device's recent canary readings, and the ``NoiseReport`` of a timing. Thread-safe."""

    def __init__(self, limits: NoiseLimits | None = None):
        self.limits = limits or NoiseLimits()
        self._lock = threading.Lock()
        self._readings: dict[str, deque[float]] = {}

    def baseline(self, device: str) -> float | None:
        """The median of the device's recent unflagged readings; None until there are a few."""
        with self._lock:
            readings = list(self._readings.get(device, ()))
        return statistics.median(readings) if len(readings) >= MIN_BASELINE_READINGS else None

    def report(self, device: str, canary_before: float | None, canary_after: float | None,
               steal: float | None, redone: int = 0) -> NoiseReport:
        """The report of one timing window, judged against the device's baseline as it stands."""
        baseline = self.baseline(device)
        return NoiseReport(canary_before_ms=canary_before, canary_after_ms=canary_after,
                           canary_baseline_ms=baseline, steal_fraction=steal, redone=redone,
                           flagged=judge(canary_before, canary_after, baseline, steal, self.limits))

    def record(self, device: str, report: NoiseReport) -> None:
        """Keep an unflagged report's readings for the device's baseline (flagged ones never move it)."""
        if report.flagged is not None:
            return
        readings = [r for r in (report.canary_before_ms, report.canary_after_ms) if r is not None and r > 0]
        with self._lock:
            self._readings.setdefault(device, deque(maxlen=BASELINE_READINGS)).extend(readings)
