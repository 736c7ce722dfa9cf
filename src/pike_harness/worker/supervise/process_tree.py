"""Whole process trees, found in one pass over ``/proc``, for pausing and resuming them together.

Quiet timing pauses everything that could disturb a neighbour's timing. Signalling a process group
misses what a member starts in another group or session: Inductor's compile workers, nvcc and
ptxas under ninja, a sandbox's own session inside bubblewrap. Walking parent links from the member
reaches all of them, whatever groups they made. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Iterable

from pike_harness.worker.supervise import sandbox


def descendants(roots: Iterable[int]) -> dict[int, list[int]]:
    """Each root with all its living descendants (the root first), from one scan of ``/proc``."""
    processes = sandbox.live_processes()
    return {root: sandbox.descendants([root], processes) for root in roots}


def signal_trees(roots: Iterable[int], signum: int) -> None:
    """Send ``signum`` to each root's group and to every descendant.

    A SIGSTOP takes a second pass: a process that forked between the scan and its own stop has a
    child the first pass did not see, and a stopped parent cannot fork again.
    """
    roots = list(roots)
    passes = 2 if signum == signal.SIGSTOP else 1
    for _ in range(passes):
        for root, tree in descendants(roots).items():
            with contextlib.suppress(OSError):
                os.killpg(root, signum)
            for pid in tree:
                with contextlib.suppress(OSError):
                    os.kill(pid, signum)


STOPPED_STATES = ("T", "t", "Z", "X")  # stopped, traced-stopped, dead: none of them runs


def wait_stopped(roots: Iterable[int], timeout_s: float) -> list[int]:
    """Wait until every thread of every process of the roots' trees reads as stopped; the pids still
    running when ``timeout_s`` ran out ([] when all stopped).

    A signal is delivered asynchronously: ``kill`` returns before the target stops, and on a loaded
    host a thread can run for tens of milliseconds more, inside the window that had to be quiet. A
    process forked since the last pass is stopped too. Reads only ``/proc`` (no file a candidate can
    write).
    """
    roots = list(roots)
    deadline = time.monotonic() + timeout_s
    while True:
        running = [pid for tree in descendants(roots).values() for pid in tree if not _all_threads_stopped(pid)]
        if not running or time.monotonic() > deadline:
            return running
        signal_trees(roots, signal.SIGSTOP)
        time.sleep(0.001)


def _all_threads_stopped(pid: int) -> bool:
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True  # gone
    for tid in tasks:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as handle:
                raw = handle.read().decode("ascii", errors="replace")
        except OSError:
            continue  # the thread ended
        if raw[raw.rfind(")") + 2:].split(" ", 1)[0] not in STOPPED_STATES:
            return False
    return True
