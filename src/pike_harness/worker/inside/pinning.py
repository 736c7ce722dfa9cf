"""The timed thread pinned to one core for one paired block, then given its cores back, and whether it
stayed there.

Why: on a shared VM a host-bound model's speed depends on the core its launching thread runs on, and
that changes from second to second. A paired re-timing runs both blocks of a pair on one core and the
next pair on the next (``engine.paired``), so that the two sides of a ratio meet the same core and the
pairs sample the cores. Only the calling thread (the one that calls the model) is pinned: the
process's other threads (CUDA's, a CPU model's intra-op pool) keep the cores they had.

A candidate may change its own thread's mask (the system-call filter leaves ``sched_setaffinity`` to
it), and a thread it unpins can leave a slow core that the reference, pinned, cannot. So the pin
reports whether it held: the thread's mask at the end of the block, and the kernel's count of its
migrations between CPUs over the block (``se.nr_migrations`` in ``/proc/thread-self/sched``, where the
kernel provides it). A thread that set its mask back before the block ended still shows its moves.

The functions are bound when this module is imported, before any candidate code runs, so a candidate
that replaces ``os.sched_setaffinity`` or ``open`` does not change what the harness does. Standard
library only.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass

_get = getattr(os, "sched_getaffinity", None)
_set = getattr(os, "sched_setaffinity", None)
_open, _read, _close = os.open, os.read, os.close
_SCHED = "/proc/thread-self/sched"  # the kernel's per-thread scheduler figures (CONFIG_SCHED_DEBUG)


def migrations() -> int | None:
    """How many times the kernel has moved this thread between CPUs, or None where it does not say."""
    try:
        fd = _open(_SCHED, os.O_RDONLY)
    except OSError:
        return None
    try:
        text = _read(fd, 65536).decode("ascii", "replace")
    except OSError:
        return None
    finally:
        _close(fd)
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "se.nr_migrations":
            try:
                return int(value.strip())
            except ValueError:
                return None
    return None


@dataclass
class Pin:
    """The thread's pin for one block: its core, and the migration count when it was pinned."""

    core: int
    migrations_at_start: int | None

    def report(self) -> dict[str, object]:
        """Whether the pin held so far: ``held`` (the mask is still this core alone) and ``moves``
        (the thread's migrations since it was pinned; None where the kernel does not count them)."""
        try:
            held = _get is not None and _get(0) == {self.core}
        except OSError:
            held = False
        now = migrations()
        moves = now - self.migrations_at_start if now is not None and self.migrations_at_start is not None else None
        return {"core": self.core, "held": held, "moves": moves}


@contextlib.contextmanager
def pinned(core: object) -> Iterator[Pin | None]:
    """Run the body with this thread on ``core`` alone; yields its ``Pin``, or None when nothing was
    pinned (a core that is not an int, not allowed, or a platform without affinity leaves the thread
    where it is)."""
    if not isinstance(core, int) or isinstance(core, bool) or _get is None or _set is None:
        yield None
        return
    try:
        before = _get(0)
        _set(0, {core})  # the thread is on ``core`` when this returns: the move to it is not counted
    except OSError:
        yield None
        return
    try:
        yield Pin(core, migrations())
    finally:
        with contextlib.suppress(OSError):
            _set(0, before)
