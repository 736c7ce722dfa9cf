"""Pre-started candidate processes: torch imported and the device initialised before a candidate exists.

Each device keeps a few idle processes (``per_device``) that have paid Python's, torch's and CUDA's
start-up cost. An evaluation takes one (``take``), sends it its request, and the process serves that
one candidate and exits, exactly like a freshly started one: nothing of one candidate can reach the
next. A background thread refills the pool. Standard library only.

Every start, the pool's and an evaluation's own (``start_admitted``), takes one of the engine's
*process-start slots* (``WorkerSettings.start_slots``) from ``Popen`` until the process says ready:
torch's import and the device's initialisation are what slows down when many processes start at
once (on a 16-core H100 host, 14 starting together took up to 115 s each), so a few admitted at a
time each finish sooner. The pool's pre-starts wait behind any start a submitted candidate needs.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pike_harness.worker.channel import ChannelClosed, ProtocolViolation
from pike_harness.worker.supervise import sandbox
from pike_harness.worker.supervise.engine.work_order import prestart_key
from pike_harness.worker.supervise.spawn import Spawned, spawn_child

if TYPE_CHECKING:
    from pike_harness.worker.supervise.supervisor import WorkerSettings

READY_TIMEOUT_S = 300.0  # a process that has not initialised by then is replaced
_prestarts = itertools.count()  # pre-starts' submission numbers on the start slots


class StartFailed(Exception):
    """A candidate process died or stalled before it said ready (no candidate was in it yet)."""


def start_admitted(settings: WorkerSettings, device: str, key: Any, *, cpus: set[int] | None = None,
                   registry: Any = None, tick: Callable[[], None] = lambda: None) -> Spawned:
    """Start a candidate process for ``device`` holding a process-start slot (``key`` orders the
    waiters) until it has imported torch and initialised the device; ``tick`` runs while it waits
    (the caller's abort check). While it starts it is a member of the quiet ``registry`` (a start
    competes for the CPU and initialises the device: a neighbour's timing pauses it).
    ``StartFailed`` if it dies or stalls first."""
    slots = settings.start_slots
    while not slots.acquire(key, timeout=0.2):
        tick()
    token = None
    try:
        spawned = spawn_child(settings, device, prestart=True, cpus=cpus)
        token = registry.add(spawned.popen.pid, spawned.marker, device) if registry is not None else None
        try:
            while (state := poll_ready(spawned)) is None:
                tick()
                time.sleep(0.02)
        except BaseException:
            spawned.discard()
            raise
    finally:
        if token is not None:
            registry.remove(token)
        slots.release()
    if not state:
        out, err = spawned.tails(2000)
        spawned.discard()
        raise StartFailed(f"a candidate process failed to start: {(err or out).strip()[-500:]}")
    spawned.prestarted = False  # started for this evaluation, not taken from the pool
    return spawned


class PrestartPool:
    """Idle, ready candidate processes per device, refilled in the background. Thread-safe."""

    def __init__(self, settings: WorkerSettings, devices: list[str], per_device: int = 2, *,
                 cpus: set[int] | None = None, registry: Any = None,
                 may_start: Callable[[str], bool] | None = None):
        self.settings = settings
        self.per_device = max(0, int(per_device))
        self.cpus = cpus
        self.registry = registry  # quiet timing: processes still starting up are paused during timings
        self.may_start = may_start or (lambda device: True)
        self._cond = threading.Condition()
        self._ready: dict[str, list[Spawned]] = {device: [] for device in devices}
        self._starting: dict[str, list[tuple[Spawned, Any]]] = {device: [] for device in devices}
        self._takers: dict[str, int] = {}  # callers in ``take`` per device, each waiting for a starting one
        self._closed = False
        self.served = 0
        self.missed = 0  # takes that found no ready process
        self._thread = threading.Thread(target=self._refill_loop, name="pikeh-prestart", daemon=True)
        if self.per_device:
            for device in devices:  # the first ones now, so an evaluation submitted at once finds them
                self._start_one(device)
            self._thread.start()

    def take(self, device: str, tick: Callable[[], None] = lambda: None) -> Spawned | None:
        """A ready process for ``device`` (the caller owns it from now on), or None if none is ready
        and no starting one is left for the caller. A process that is already starting is ahead of any
        the caller could start now, so it is waited for, but by one caller at most: with everything
        submitted at once, every caller waited for the pool, whose refills start ``per_device`` at a
        time, and the 60 processes of a batch started two at a time (2,579 s of starts on one H200,
        against 435 s when callers started their own). ``tick`` runs while it waits (the caller's
        abort check, which may raise)."""
        with self._cond:
            ready = self._ready.get(device, [])
            self._takers[device] = self._takers.get(device, 0) + 1
            try:
                while True:
                    while ready:
                        spawned = ready.pop(0)
                        if spawned.alive():
                            self.served += 1
                            self._cond.notify_all()
                            return spawned
                        spawned.discard()
                    if self._closed or self._takers[device] > len(self._starting.get(device, [])):
                        break
                    self._cond.wait(0.05)
                    tick()
                self.missed += 1
                self._cond.notify_all()
                return None
            finally:
                self._takers[device] -= 1

    def idle_pids(self) -> list[int]:
        """Processes the pool holds (ready or starting), with their sessions (a sandboxed one is bwrap
        and the Python under it): none of them has seen a candidate."""
        with self._cond:
            pids = [s.popen.pid for items in self._ready.values() for s in items]
            pids += [s.popen.pid for items in self._starting.values() for s, _ in items]
        return pids + [m.pid for pid in pids for m in sandbox.session_members(pid, fresh=True) if m.pid != pid]

    def idle_scratch(self) -> list[Path]:
        """The scratch directories of the processes the pool holds."""
        with self._cond:
            folders = [s.scratch for items in self._ready.values() for s in items]
            folders += [s.scratch for items in self._starting.values() for s, _ in items]
            return folders

    def ready_count(self, device: str) -> int:
        with self._cond:
            return len(self._ready.get(device, []))

    def wait_full(self, timeout: float) -> bool:
        """Block until every device has ``per_device`` ready processes (benchmarks measure steady state)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not all(len(r) >= self.per_device for r in self._ready.values()):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closed:
                    return False
                self._cond.wait(min(remaining, 0.1))
            return True

    def _refill_loop(self) -> None:
        while True:
            with self._cond:
                if self._closed:
                    return
                wanted = [device for device in self._ready
                          if len(self._ready[device]) + len(self._starting[device]) < self.per_device
                          and self.may_start(device)]
            for device in wanted:
                self._start_one(device)
            self._collect_ready()
            with self._cond:
                if self._closed:
                    return
                self._cond.wait(0.05 if any(self._starting.values()) else 0.5)

    def _start_one(self, device: str) -> None:
        slots = self.settings.start_slots
        if slots is not None and not slots.acquire(prestart_key(next(_prestarts)), timeout=0.2):
            return  # every start slot is taken: the refill loop asks again
        try:
            spawned = spawn_child(self.settings, device, prestart=True, cpus=self.cpus)
        except OSError:
            if slots is not None:
                slots.release()
            time.sleep(1.0)
            return
        token = self.registry.add(spawned.popen.pid, spawned.marker, device) if self.registry else None
        with self._cond:
            if self._closed:
                spawned.discard()
                if slots is not None:
                    slots.release()
                return
            self._starting[device].append((spawned, token))

    def _collect_ready(self) -> None:
        """Move processes that said "ready" to the ready lists; replace those that died or stalled."""
        with self._cond:
            starting = {device: list(items) for device, items in self._starting.items()}
        for device, items in starting.items():
            for spawned, token in items:
                state = poll_ready(spawned)
                if state is None:
                    continue
                with self._cond:
                    if (spawned, token) not in self._starting[device]:
                        continue  # closed meanwhile: close() gave its slot back and discards it
                # It leaves quiet timing's registry while still listed as starting (the registry may wait
                # for a quiet window: never under our lock), then moves from starting to ready in one
                # critical section: between two, it was in neither list, so ``idle_pids`` missed a live
                # pool process and an abort test counted it as a leftover.
                if token is not None:
                    self.registry.remove(token)
                with self._cond:
                    if (spawned, token) not in self._starting[device]:
                        continue  # closed meanwhile: close() gave its slot back and discards it
                    self._starting[device].remove((spawned, token))
                    ready = bool(state) and not self._closed
                    if ready:
                        self._ready[device].append(spawned)
                        self._cond.notify_all()
                if self.settings.start_slots is not None:
                    self.settings.start_slots.release()
                if not ready:
                    spawned.discard()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            doomed = [s for ready in self._ready.values() for s in ready]
            doomed += [s for starting in self._starting.values() for s, _ in starting]
            for ready in self._ready.values():
                ready.clear()
            starting_tokens = [t for starting in self._starting.values() for _, t in starting if t is not None]
            if self.settings.start_slots is not None:
                for _ in range(sum(len(starting) for starting in self._starting.values())):
                    self.settings.start_slots.release()
            for starting in self._starting.values():
                starting.clear()
            self._cond.notify_all()
        for token in starting_tokens:
            self.registry.remove(token)
        for spawned in doomed:
            spawned.discard()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


def poll_ready(spawned: Spawned) -> bool | None:
    """True once it said ready, False if it died or stalled, None while it is still starting."""
    try:
        message = spawned.channel.receive(deadline=None, poll_s=0.0)
    except (ChannelClosed, ProtocolViolation):
        return False
    if message is not None:
        if message.get("event") == "ready":
            spawned.environment = message.get("environment")
            return True
        return False
    if not spawned.alive() or time.monotonic() - spawned.started > READY_TIMEOUT_S:
        return False
    return None
