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
