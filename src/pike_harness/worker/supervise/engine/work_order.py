"""The order CPU work starts in: the longest first, so the tail of a batch is short.

A batch's wall time is set by its last candidate to reach the device. A ``load_inline`` build takes
tens of seconds to minutes of CPU; a Triton or ``torch.compile`` warm-up seconds to minutes; an
eager model's load a few seconds. Started in submission order, builds submitted late wait behind
quick loads and finish long after everything else (measured on an H100 host: 16 builds of a batch
of 65 started 65-223 s after submission). What a source needs is known before it runs
(``static_checks.scan`` names its techniques), so each job gets a *work class* at submission and
every ordered resource (the dispatch of jobs to threads, the CPU slots, the process-start slots, the
device gates' queues) serves the lowest ``(class, submission number)`` first. ``submission`` order (one class for all) is kept
as an option so a before/after comparison runs in one sitting.

This module is the whole policy; the engine only asks it for keys.
"""

from __future__ import annotations

import heapq
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

BUILD, JIT_WARMUP, PLAIN = 0, 1, 2  # work classes, longest expected first
CLASS_NAMES = {BUILD: "build", JIT_WARMUP: "jit_warmup", PLAIN: "plain"}
PRESTART = 9  # a pre-start for the pool: after every start a submitted candidate needs
BUILD_TECHNIQUES = ("load_inline",)
JIT_TECHNIQUES = ("triton", "torch.compile")

OrderKey = tuple[int, int]


def work_class(source: str, baseline_mode: str | None = None) -> int:
    """The candidate's expected CPU work, read from its source (never run): BUILD, JIT_WARMUP or PLAIN.
    A source that does not parse is PLAIN (it ends at the static checks)."""
    from pike_harness.worker.inside.baseline_modes import JIT_MODES
    from pike_harness.worker.supervise.static_checks import scan

    try:
        techniques = scan(source).techniques
    except (SyntaxError, ValueError, RecursionError):
        return PLAIN
    if any(t in techniques for t in BUILD_TECHNIQUES):
        return BUILD
    if any(t in techniques for t in JIT_TECHNIQUES) or baseline_mode in JIT_MODES:
        return JIT_WARMUP
    return PLAIN


def order_key(order: str, seq: int, work: int) -> OrderKey:
    """The key every ordered resource serves lowest first: (work class, submission number). Under
    ``submission`` order every job counts as PLAIN: one class, so submission order, and no build limit."""
    return (PLAIN if order == "submission" else work, seq)


def is_long(key: OrderKey) -> bool:
    """Whether the job's CPU work is long (a build or a JIT warm-up): the jobs ``long_slots`` serve.
    Under ``submission`` order every key is PLAIN, so nothing is."""
    return key[0] in (BUILD, JIT_WARMUP)


def prestart_key(seq: int) -> OrderKey:
    """A pool pre-start's key on the process-start slots: behind any start a submitted job waits for."""
    return (PRESTART, seq)


class WorkQueue:
    """Jobs waiting for one of ``threads`` worker threads, handed out lowest key first.

    A plain executor queues in submission order, so a build submitted 40th would wait for 39 threads
    however the slots behind them are ordered. Here each submission adds one executor task and one
    heap entry; the task runs whichever job is at the head when a thread frees up.

    Builds first, but not builds only: at most ``build_slots`` jobs of class BUILD are loading at once
    while other jobs wait, so candidates that need no build load beside the builds and the device has
    work from the start (a batch's builds can outnumber the CPU slots). With nothing else waiting, a
    build goes ahead anyway. ``run`` gets a ``loaded`` callback to call when its job's CPU work ends.

    ``long_threads`` > 0 gives the long jobs (a build or a JIT warm-up, ``is_long``) threads of their
    own: a thread runs a job until its verdict, so a thread of the shared pool stays taken while its
    loaded candidate waits for the device. With everything submitted at once, quick loads submitted
    first took every shared thread and held it for minutes of device queue, and the torch.compile
    warm-ups behind them started 70-180 s late and ended the batch (H200, 2026-11-28). Long jobs then
    run only on their own threads, quick ones only on the shared ones.
    """

    def __init__(self, threads: int, build_slots: int, name: str = "pikeh-engine", long_threads: int = 0):
        self._pool = ThreadPoolExecutor(max_workers=max(1, threads), thread_name_prefix=name)
        self._long_pool = (ThreadPoolExecutor(max_workers=long_threads, thread_name_prefix=f"{name}-long")
                           if long_threads > 0 else None)
        self._lock = threading.Lock()
        self._heap: list[tuple[Any, int, Callable[[Callable[[], None]], None]]] = []
        self._count = 0
        self.build_slots = max(1, build_slots)
        self._building = 0  # BUILD jobs handed out whose CPU work has not ended

    def put(self, key: Any, run: Callable[[Callable[[], None]], None]) -> None:
        with self._lock:
            self._count += 1
            heapq.heappush(self._heap, (key, self._count, run))
        if self._long_pool is not None and is_long(key):
            self._long_pool.submit(self._run_next, True)
        else:
            self._pool.submit(self._run_next, False)

    def _pick(self, long: bool) -> int:
        """The heap index this task runs: with pools of their own, a job of its own kind (there is
        always one: each submission added one task of its kind); a build only while fewer than
        ``build_slots`` build, unless no other job of the kind waits."""
        own = (range(len(self._heap)) if self._long_pool is None
               else [i for i in range(len(self._heap)) if is_long(self._heap[i][0]) == long])
        if self._building >= self.build_slots:  # the first job that is not a build, if any
            return min(own, key=lambda i: (self._heap[i][0][0] == BUILD, self._heap[i][:2]))
        return min(own, key=lambda i: self._heap[i][:2])

    def _run_next(self, long: bool = False) -> None:
        with self._lock:
            index = self._pick(long)
            key, _n, run = self._heap[index]
            self._heap[index] = self._heap[-1]
            self._heap.pop()
            heapq.heapify(self._heap)
            build = key[0] == BUILD
            self._building += build
        done = threading.Event()

        def loaded() -> None:
            if build and not done.is_set():
                done.set()
                with self._lock:
                    self._building -= 1

        try:
            run(loaded)
        finally:
            loaded()

    def shutdown(self) -> None:
        """Run nothing more that has not started; wait for what runs (close aborted it first)."""
        for pool in (self._pool, self._long_pool):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
