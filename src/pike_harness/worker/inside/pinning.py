"""The timed thread pinned to one core for one paired block, then given its cores back.

Why: on a shared VM a host-bound model's speed depends on the core its launching thread runs on, and
that changes from second to second. A paired re-timing runs both blocks of a pair on one core and the
next pair on the next (``engine.paired``), so that the two sides of a ratio meet the same core and the
pairs sample the cores. Only the calling thread (the one that calls the model) is pinned: the
process's other threads (CUDA's, a CPU model's intra-op pool) keep the cores they had.

The functions are bound when this module is imported, before any candidate code runs, so a candidate
that replaces ``os.sched_setaffinity`` does not change what the harness does. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

_get = getattr(os, "sched_getaffinity", None)
_set = getattr(os, "sched_setaffinity", None)


@contextlib.contextmanager
def pinned(core: object) -> Iterator[bool]:
    """Run the body with this thread on ``core`` alone; yields whether it was pinned. A core that is
    not an int, not allowed, or a platform without affinity leaves the thread where it is."""
    if not isinstance(core, int) or isinstance(core, bool) or _get is None or _set is None:
        yield False
        return
    try:
        before = _get(0)
        _set(0, {core})
    except OSError:
        yield False
        return
    try:
        yield True
    finally:
        with contextlib.suppress(OSError):
            _set(0, before)
