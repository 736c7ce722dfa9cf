"""When a worker counts as dead, and how long it may hold one request: one rule for every transport.

The ``queue`` and ``docker`` evaluators (heartbeat files in a shared folder) and the ``ray`` evaluator
(device actors, their supervisors, the head) all decide "this worker is dead" here, so a worker is
judged the same way whatever carries its requests:

* A worker is dead when it said so, when its process is known to be gone (the observer shares its
  machine and PID namespace, or the cluster itself reports it), or when the observer has seen no new
  sign of life from it for the full ``stale_after_s`` window, measured on the observer's own
  monotonic clock (so clocks of different nodes never need to agree). A sign of life is a token that
  changes with every beat (a heartbeat's epoch and counter, a successful probe).
* Not being able to read a beat is no sign of death: a partial write, a file missing for a moment or
  a network file system's hiccup only means the observer learnt nothing new. The window keeps
  running from the last beat it did see; it is never restarted by a failed read, nor cut short by one.
* A worker that is alive may still hold a request for ever (a supervisor stuck in the kernel, a hung
  build). ``HoldTimer`` bounds that: a request may be worked on for the sum of its own stage limits
  plus a grace, time spent waiting for the device behind other requests not counted. Past that the
  request is taken back from the worker and counted as an attempt, as if the worker had died on it.

Standard library only: the worker service, the host's queue client and Ray's nodes import it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Any

STALE_AFTER_S = 15.0
# A beat whose own time stamp is this much older than the staleness limit is dead whatever the
# observer saw (a leftover of an earlier run is recognised at once instead of after the window).
# An hour: no working cluster's clocks disagree by that much, so a live worker is never misjudged.
CLOCK_SKEW_S = 3600.0
# Added to a request's stage limits before a worker that holds it is judged stuck: covers what no
# stage limit covers (spawning, reading results, cleaning up) on a loaded host.
HOLD_GRACE_S = 120.0
# Stages bounded by ``run_timeout_s`` (the supervisor's warm-up, correctness, reference and timing);
# loading is bounded by ``compile_timeout_s``.
RUN_LIMITED_STAGES = 4


def is_dead(quiet_for_s: float, stale_after_s: float, *, said_stopped: bool = False, process_gone: bool = False,
            beat_age_s: float | None = None) -> bool:
    """The worker-death rule.

    ``quiet_for_s``: how long the observer has seen no new beat (its own clock); ``beat_age_s``: the
    age of the last beat by the worker's own time stamp, when it has one (only a gross disagreement,
    beyond ``CLOCK_SKEW_S``, counts).
    """
    if said_stopped or process_gone:
        return True
    if beat_age_s is not None and beat_age_s > stale_after_s + CLOCK_SKEW_S:
        return True
    return quiet_for_s > stale_after_s


class BeatWatch:
    """When each watched worker last showed a new sign of life, on this observer's monotonic clock."""

    def __init__(self, stale_after_s: float = STALE_AFTER_S, *, clock: Callable[[], float] = time.monotonic):
        self.stale_after_s = stale_after_s
        self.clock = clock
        self._last: dict[str, tuple[Any, float]] = {}  # worker -> (its last token, when it changed)

    def saw(self, worker: str, token: Hashable) -> None:
        """A beat was read; a token different from the last one is a sign of life."""
        last = self._last.get(worker)
        if last is None or last[0] != token:
            self._last[worker] = (token, self.clock())

    def looked(self, worker: str) -> None:
        """The observer looked for ``worker``'s beat and could not read one: no news. The first look
        starts the window, so a worker never seen at all is dead only after a full window."""
        if worker not in self._last:
            self._last[worker] = (None, self.clock())

    def forget(self, worker: str) -> None:
        self._last.pop(worker, None)

    def known(self) -> set[str]:
        return set(self._last)

    def quiet_for(self, worker: str) -> float:
        last = self._last.get(worker)
        return 0.0 if last is None else self.clock() - last[1]

    def is_dead(self, worker: str, *, said_stopped: bool = False, process_gone: bool = False,
                beat_age_s: float | None = None) -> bool:
        return is_dead(self.quiet_for(worker), self.stale_after_s, said_stopped=said_stopped,
                       process_gone=process_gone, beat_age_s=beat_age_s)


def hold_deadline_s(limits: Any, grace_s: float = HOLD_GRACE_S) -> float:
    """How long a worker may work on a request with these ``Limits`` (or their dict) before it counts
    as stuck: every stage's own limit, plus ``grace_s``."""
    compile_s, run_s = _stage_limit_s(limits, "compile_timeout_s"), _stage_limit_s(limits, "run_timeout_s")
    return compile_s + RUN_LIMITED_STAGES * run_s + grace_s


def _stage_limit_s(limits: Any, name: str) -> float:
    """One stage's limit from ``Limits`` or from its dict form (a request read back from JSON)."""
    return float(limits[name] if isinstance(limits, dict) else getattr(limits, name))


class HoldTimer:
    """The working time of one held request: it runs from the claim and stands still while the
    request waits for its device (``waiting``/``working``), since that wait is bounded by the other
    requests' deadlines, not by this one's."""

    def __init__(self, deadline_s: float, *, clock: Callable[[], float] = time.monotonic):
        self.deadline_s = deadline_s
        self.clock = clock
        self._worked = 0.0
        self._since: float | None = clock()

    def waiting(self) -> None:
        if self._since is not None:
            self._worked += self.clock() - self._since
            self._since = None

    def working(self) -> None:
        if self._since is None:
            self._since = self.clock()

    def on_event(self, event: str, _evaluation: object = None) -> None:
        """The engine's ``on_event`` hook: work runs from the candidate's start (``spawned``) to
        ``loaded``, and from ``granted`` (the device is its) on; between, it waits for the device."""
        if event in ("spawned", "granted"):
            self.working()
        elif event == "loaded":
            self.waiting()

    def worked_s(self) -> float:
        return self._worked + (self.clock() - self._since if self._since is not None else 0.0)

    def overdue(self) -> bool:
        return self.worked_s() > self.deadline_s
