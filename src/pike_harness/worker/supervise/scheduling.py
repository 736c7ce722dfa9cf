"""Scheduling primitives for evaluators that run many candidates on few devices. Standard library (and the sandbox module) only.

* ``OrderedSlots``: N permits granted lowest key first: the CPU slots for phase 1 (load, build,
  warm-up) and the process-start slots (``engine.work_order`` says what the keys are).
* ``DeviceGate``: one device's exclusive lock for phase 2, granted to the oldest *ready* waiter the
  moment it is released (a waiter keeps its place while it polices its idle candidate between
  polls), with the statistics benchmarks need (busy time, grants, gaps while candidates waited).
  With ``check_slots`` > 1 it also runs a shared *check* phase (``session``): up to that many
  candidates make their checked calls at once, never while anyone is timed, and a timing waits for
  the checks in progress to end (no new check starts while a timing waits, unless a check in progress
  has run for ``LONG_CHECK_S``: the timing waits for that one anyway). A candidate that ran out
  of device memory while others held theirs asks to run *alone*: no other checked model resident.
* ``QuietRegistry``: quiet timing. While a candidate is timed on a device, every other process that
  could disturb that measurement is stopped (SIGSTOP) and resumed (SIGCONT) afterwards: on a GPU,
  the other candidate processes bound to that GPU (loading, warming up, waiting) and processes that
  are still initialising it; on the CPU device, everything we started (candidates, builders,
  pre-starting processes), since there the CPU *is* the device being measured.
* ``cpu_partition``: which cores loads may use and which stay free for the processes being timed.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

from pike_harness.worker.supervise import process_tree, sandbox

LONG_CHECK_S = 3.0  # a check running this long lets new checks start although a timing waits (see _may)


class OrderedSlots:
    """A counting semaphore whose permits go to the lowest key waiting. Keys are any orderable values
    (the engine's are ``(work class, submission number)`` tuples, see ``engine.work_order``); plain
    submission numbers give submission order."""

    def __init__(self, slots: int):
        self.slots = max(1, int(slots))
        self._cond = threading.Condition()
        self._free = self.slots
        self._waiting: list[tuple[Any, int]] = []
        self._arrivals = itertools.count()
        self.most_held = 0  # the most permits held at once (tests and stats check the limit)
        self.granted = 0  # permits handed out so far

    def acquire(self, key: Any, timeout: float | None = None) -> bool:
        """Wait for a permit (lowest key first, equal keys in arrival order); False if ``timeout``
        seconds pass first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            entry = (key, next(self._arrivals))
            heapq.heappush(self._waiting, entry)
            while not (self._free > 0 and self._waiting[0] == entry):
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    self._waiting.remove(entry)
                    heapq.heapify(self._waiting)
                    self._cond.notify_all()
                    return False
                self._cond.wait(remaining)
            heapq.heappop(self._waiting)
            self._free -= 1
            self.granted += 1
            self.most_held = max(self.most_held, self.slots - self._free)
            self._cond.notify_all()
            return True

    def release(self) -> None:
        with self._cond:
            self._free += 1
            self._cond.notify_all()

    @property
    def held(self) -> int:
        with self._cond:
            return self.slots - self._free


@dataclass
class GateStats:
    busy_s: float = 0.0  # time some evaluation held the device
    grants: int = 0
    # Time the device stood free while a loaded candidate was waiting for it (should be ~0: the
    # head waiter is handed the device at once; what remains is thread wake-up latency).
    idle_with_waiters_s: float = 0.0
    max_idle_with_waiters_s: float = 0.0
    check_busy_s: float = 0.0  # time at least one candidate was in the shared check phase
    checks: int = 0  # check-phase grants
    check_phases: int = 0  # times the check phase opened (checks per phase = checks / check_phases)
    max_checking: int = 0  # most candidates checking at once
    alone: int = 0  # grants to run with no other checked model resident (out-of-memory retries)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


Rank = tuple[int, ...]  # a place in a gate's queues: lowest first (the engine's order key)
_Entry = tuple[Rank, int]  # (rank, seq) as a gate's heaps hold it


def _first(queue: list[_Entry]) -> int | None:
    """The seq at the head of a gate heap, if any."""
    return queue[0][1] if queue else None


def _holds(queue: list[_Entry], seq: int) -> bool:
    return any(entry[1] == seq for entry in queue)


class DeviceGate:
    """One device's exclusive lock; ``ticket(seq)`` gives a lock-like handle for one evaluation.

    Waiters are served lowest *rank* first (equal ranks by seq). The engine ranks by its work order,
    ``(work class, submission number)``: a candidate whose CPU work was long goes to the device before
    quick ones submitted earlier, so it gives its long slot back sooner and the next long job starts.
    Served by submission number instead, the JIT warm-ups that were ready at 35-50 s waited 128-166 s
    behind eager references loaded after them, while 16 long jobs waited for their slots (one H200,
    2026-11-28). Without a rank a waiter ranks by its seq alone (submission order).
    """

    def __init__(self, name: str, *, check_slots: int = 1):
        self.name = name
        self.check_slots = max(1, int(check_slots))
        self._cond = threading.Condition()
        self._holder: int | None = None
        self._held_since = 0.0
        self._waiting: list[_Entry] = []  # heap of registered tickets
        self._free_since: float | None = None  # set when released while someone was waiting
        self._checking: dict[int, float] = {}  # seq -> when its check started
        self._time_queued: dict[int, float] = {}  # seq -> when it began to wait for timing (phase "time")
        self._check_waiting: list[_Entry] = []  # heap
        self._checking_since = 0.0
        self._alone_waiting: list[_Entry] = []  # heap
        self._resident: set[int] = set()  # sessions whose checked model stays on the device until they end
        self.stats = GateStats()

    def ticket(self, seq: int, rank: Rank | None = None) -> GateTicket:
        return GateTicket(self, seq, rank if rank is not None else (seq,))

    def session(self, seq: int, rank: Rank | None = None) -> GateSession:
        """One evaluation's way through the phases: ``phase("check")``, then ``phase("time")`` (or
        ``phase("alone")`` after running out of memory), then ``end()``."""
        return GateSession(self, seq, rank if rank is not None else (seq,))

    def others_resident(self, seq: int) -> bool:
        """Whether another evaluation's checked model is on the device (so an out-of-memory error
        may be theirs, not this candidate's)."""
        with self._cond:
            return bool(self._resident - {seq})

    # -- used by GateTicket --------------------------------------------------------------------
    def _register(self, seq: int, rank: Rank) -> None:
        if not _holds(self._waiting, seq):
            heapq.heappush(self._waiting, (rank, seq))
            if self._holder is None and self._free_since is None:
                self._free_since = time.monotonic()

    def _acquire(self, seq: int, timeout: float | None, rank: Rank) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._register(seq, rank)
            while not (self._holder is None and not self._checking and _first(self._waiting) == seq):
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)
            heapq.heappop(self._waiting)
            now = time.monotonic()
            if self._free_since is not None:
                gap = now - self._free_since
                self.stats.idle_with_waiters_s += gap
                self.stats.max_idle_with_waiters_s = max(self.stats.max_idle_with_waiters_s, gap)
                self._free_since = None
            self._holder, self._held_since = seq, now
            self.stats.grants += 1
            return True

    def _release(self, seq: int) -> None:
        with self._cond:
            self._resident.discard(seq)
            self._release_held(seq)

    def _release_held(self, seq: int) -> None:
        if self._holder != seq:
            return
        now = time.monotonic()
        self.stats.busy_s += now - self._held_since
        self._holder = None
        self._free_since = now if self._waiting else None
        self._cond.notify_all()

    def _cancel(self, seq: int) -> None:
        with self._cond:
            self._resident.discard(seq)
            self._unqueue(seq)

    def _unqueue(self, seq: int) -> None:
        self._time_queued.pop(seq, None)
        for queue in (self._waiting, self._check_waiting, self._alone_waiting):
            if _holds(queue, seq):
                queue[:] = [entry for entry in queue if entry[1] != seq]
                heapq.heapify(queue)
        if not self._waiting:
            self._free_since = None
        self._cond.notify_all()

    # -- used by GateSession -------------------------------------------------------------------
    def _may(self, phase: str, seq: int) -> bool:
        if self._holder is not None:
            return False
        if phase == "check":
            if self._alone_waiting or len(self._checking) >= self.check_slots or _first(self._check_waiting) != seq:
                return False
            if not self._waiting:
                return True
            # A waiting timing holds new checks back, except while a check that was already running when
            # the timing began to wait has run long: the device cannot time until that one ends anyway,
            # and a typical check ends before it. Checks let in this way do not let in more.
            now, since = time.monotonic(), min(self._time_queued.values(), default=0.0)
            return any(began < since and now - began >= LONG_CHECK_S for began in self._checking.values())
        if phase == "alone":
            # Models of others that wait to run alone too stay resident (their processes hold them) but
            # do not count: two that ran out of memory together would otherwise each wait for the
            # other's model to go, for good. The first in line runs beside their idle models.
            alone = {entry[1] for entry in self._alone_waiting}
            return (not self._checking and not self._waiting and not (self._resident - alone)
                    and _first(self._alone_waiting) == seq)
        return not self._checking and _first(self._waiting) == seq

    def _enter(self, seq: int, phase: str, timeout: float | None, rank: Rank) -> bool:
        """Wait for ``phase`` ("check", "time" or "alone"); leaving the phase held before is atomic
        with joining the next one's queue, so no newcomer slips in between."""
        queue = {"check": self._check_waiting, "time": self._waiting, "alone": self._alone_waiting}[phase]
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            self._leave_check(seq)
            if phase == "alone":
                self._release_held(seq)
            if not _holds(queue, seq):
                heapq.heappush(queue, (rank, seq))
                if phase == "time":
                    self._time_queued[seq] = time.monotonic()
                if phase == "time" and self._holder is None and not self._checking and self._free_since is None:
                    self._free_since = time.monotonic()
            while not self._may(phase, seq):
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._cond.wait(remaining)
            heapq.heappop(queue)
            self._time_queued.pop(seq, None)
            now = time.monotonic()
            if phase == "check":
                if not self._checking:
                    self._checking_since = now
                    self.stats.check_phases += 1
                self._checking[seq] = now
                self._resident.add(seq)
                self.stats.checks += 1
                self.stats.max_checking = max(self.stats.max_checking, len(self._checking))
            else:
                if self._free_since is not None and phase == "time":
                    gap = now - self._free_since
                    self.stats.idle_with_waiters_s += gap
                    self.stats.max_idle_with_waiters_s = max(self.stats.max_idle_with_waiters_s, gap)
                    self._free_since = None
                self._holder, self._held_since = seq, now
                self.stats.grants += 1
                self.stats.alone += phase == "alone"
            self._cond.notify_all()
            return True

    def _leave_check(self, seq: int) -> None:
        if seq in self._checking:
            del self._checking[seq]
            if not self._checking:
                now = time.monotonic()
                self.stats.check_busy_s += now - self._checking_since
                if self._waiting and self._holder is None and self._free_since is None:
                    self._free_since = now
            self._cond.notify_all()

    def _end(self, seq: int) -> None:
        with self._cond:
            self._leave_check(seq)
            self._unqueue(seq)
            self._resident.discard(seq)
            self._release_held(seq)

    @property
    def holder(self) -> int | None:
        with self._cond:
            return self._holder


def _wait_s(blocking: bool, timeout: float | None) -> float | None:
    """``threading.Lock.acquire``'s arguments as seconds to wait (None: no limit)."""
    if not blocking:
        return 0.0
    return None if timeout is None or timeout < 0 else timeout


class GateTicket:
    """The ``DeviceLock`` an Evaluation waits on: ``acquire(timeout=...)`` keeps its place between polls."""

    def __init__(self, gate: DeviceGate, seq: int, rank: Rank):
        self.gate, self.seq, self.rank = gate, seq, rank

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self.gate._acquire(self.seq, _wait_s(blocking, timeout), self.rank)

    def release(self) -> None:
        self.gate._release(self.seq)

    def cancel(self) -> None:
        """Give up the place in the queue (the candidate failed while it waited)."""
        self.gate._cancel(self.seq)


class GateSession:
    """One evaluation's phases on a ``DeviceGate``; ``phase(name)`` is the lock-like handle an
    ``Evaluation`` waits on (``acquire(timeout=)`` keeps its place between polls)."""

    def __init__(self, gate: DeviceGate, seq: int, rank: Rank):
        self.gate, self.seq, self.rank = gate, seq, rank

    def phase(self, name: str) -> _Phase:
        if name not in ("check", "time", "alone"):
            raise ValueError(f"no phase {name!r}")
        return _Phase(self, name)

    def others_resident(self) -> bool:
        return self.gate.others_resident(self.seq)

    def end(self) -> None:
        """Leave whatever phase or queue this evaluation is in; its model no longer counts as resident."""
        self.gate._end(self.seq)


class _Phase:
    def __init__(self, session: GateSession, name: str):
        self.session, self.name = session, name

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        return self.session.gate._enter(self.session.seq, self.name, _wait_s(blocking, timeout), self.session.rank)

    def release(self) -> None:
        self.session.end()

    def cancel(self) -> None:
        self.session.end()


@dataclass
class _Member:
    pid: int
    marker: bytes
    scope: str  # a device ("cuda:0", "cpu") or "host" (CPU work only, e.g. a builder)
    stopped_at: float | None = None  # monotonic time of the SIGSTOP in force, if any


STOP_WAIT_S = 2.0  # how long a quiet window waits for its members to be seen stopped
EXEC_WAIT_S = 2.0  # how long registering waits for a just-started member's exec to finish


class QuietRegistry:
    """Processes that pause while a neighbour is timed. ``add``/``remove`` them; wrap timing in ``quiet``.

    ``host_wide``: a timing on any device pauses every member (loads, builds, other candidates), not
    only those bound to that device. Launch-bound models are timed partly on the host CPU, and on an
    H100 host 13 parallel nvcc builds made a ResNet-18 reference read 1.43x slower under per-device
    quiet; the price is that builds make no progress while a timing runs, which is why hosts with
    several GPUs (almost always timing somewhere) default to per-device quiet.
    """

    def __init__(self, host_wide: bool = False) -> None:
        self.host_wide = host_wide
        self._lock = threading.Lock()
        self._members: dict[int, _Member] = {}
        self._quiet: dict[str, set[int]] = {}  # device -> pids exempt (the one being timed)
        self._stopped: set[int] = set()  # member tokens currently stopped
        self._paused: dict[int, float] = {}  # token -> seconds spent stopped (kept after remove)
        self._tokens = itertools.count(1)
        self.pauses = 0
        self.paused_s = 0.0

    def add(self, pid: int, marker: str, scope: str) -> int:
        """Register a process just started (its exec may still be under way: see ``await_environment``)."""
        sandbox.await_environment(pid, EXEC_WAIT_S)
        token = next(self._tokens)
        member = _Member(pid=pid, marker=f"{sandbox.MARKER_ENV}={marker}".encode(), scope=scope)
        with self._lock:
            self._members[token] = member
            quiet_now = any(self._applies(device, member) and pid not in exempt
                            for device, exempt in self._quiet.items())
            if quiet_now:
                self._stop(token, member)
        return token

    def remove(self, token: int) -> None:
        with self._lock:
            member = self._members.pop(token, None)
            if member is not None and token in self._stopped:
                self._continue(token, member)

    def _applies(self, device: str, member: _Member) -> bool:
        return self.host_wide or device == "cpu" or member.scope == device

    @contextlib.contextmanager
    def quiet(self, device: str, exempt_pid: int | None):
        """Stop every member that could disturb a timing on ``device`` (except ``exempt_pid``)."""
        began = time.monotonic()
        with self._lock:
            self._quiet[device] = {exempt_pid} if exempt_pid else set()
            self._stop_all([(token, member) for token, member in self._members.items()
                            if token not in self._stopped and member.pid != exempt_pid
                            and self._applies(device, member)])
            self.pauses += 1
        try:
            yield
        finally:
            with self._lock:
                self._quiet.pop(device, None)
                resume = []
                for token in list(self._stopped):
                    member = self._members.get(token)
                    still_quiet = member is not None and any(
                        self._applies(d, member) and member.pid not in exempt for d, exempt in self._quiet.items())
                    if member is not None and not still_quiet:
                        resume.append((token, member))
                self._continue_all(resume)
                self.paused_s += time.monotonic() - began

    def _stop(self, token: int, member: _Member) -> None:  # under self._lock
        self._stop_all([(token, member)])

    def _continue(self, token: int, member: _Member) -> None:  # under self._lock
        self._continue_all([(token, member)])

    def _stop_all(self, members: list[tuple[int, _Member]]) -> None:  # under self._lock
        """Stop these members' whole trees with one scan of ``/proc`` (a timing waits for it)."""
        live = [(token, member) for token, member in members if sandbox.has_marker(member.pid, member.marker)]
        if not live:
            return
        process_tree.signal_trees([member.pid for _, member in live], signal.SIGSTOP)
        # The timing starts only once they are seen stopped (bounded: a process that will not stop in
        # time, e.g. in uninterruptible I/O, delays the timing no further; it stops when it can).
        process_tree.wait_stopped([member.pid for _, member in live], STOP_WAIT_S)
        now = time.monotonic()
        for token, member in live:
            self._stopped.add(token)
            member.stopped_at = now

    def _continue_all(self, members: list[tuple[int, _Member]]) -> None:  # under self._lock
        live = [member.pid for _, member in members if sandbox.has_marker(member.pid, member.marker)]
        if live:
            process_tree.signal_trees(live, signal.SIGCONT)
        now = time.monotonic()
        for token, member in members:
            self._stopped.discard(token)
            if member.stopped_at is not None:
                self._paused[token] = self._paused.get(token, 0.0) + now - member.stopped_at
                member.stopped_at = None

    def paused_seconds(self, token: int | None) -> float:
        """How long this member has been stopped so far, the pause in force included.

        Stage deadlines are extended by it: a candidate or builder paused for a neighbour's timing
        must not run out of time for it (on one busy GPU, timings take most of the wall clock).
        """
        if token is None:
            return 0.0
        with self._lock:
            total = self._paused.get(token, 0.0)
            member = self._members.get(token)
            if member is not None and member.stopped_at is not None:
                total += time.monotonic() - member.stopped_at
            return total



def cpu_partition(devices: list[str], allowed: set[int] | None = None) -> tuple[set[int] | None, set[int] | None]:
    """(cores for loads, cores kept free for timing), or (None, None) when partitioning is pointless.

    On a GPU host each GPU's timing gets one core of its own (the highest-numbered ones) that no
    load, build or pre-starting process runs on; with fewer than four cores, or on the CPU device
    (where quiet timing stops everything else instead), nothing is partitioned.
    """
    gpus = [d for d in devices if d.startswith("cuda")]
    if allowed is None:
        try:
            allowed = set(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            return None, None
    if not gpus or len(allowed) < 4 or len(allowed) < 2 * len(gpus) + 2:
        return None, None
    ordered = sorted(allowed)
    timing = set(ordered[-len(gpus):])
    return set(ordered[:-len(gpus)]), timing
