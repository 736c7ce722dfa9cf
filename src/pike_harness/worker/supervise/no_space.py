"""Whose is a trusted write into a candidate's folder that found no space: the candidate's, or the host's.

The reference process writes the hidden inputs into the candidate's exchange folder, and the build
cache hands built libraries out into its scratch folder. Either write can fail with ``ENOSPC``,
``EDQUOT`` or ``EFBIG`` (``NO_SPACE``). That is the candidate's verdict when it filled the folder
itself, but the folder's file system is often shared: ``/dev/shm`` with the host and its other
tenants, the scratch folders' disk with the harness and the other candidates. When the host's disk or
shared memory is full for reasons not the candidate's, an honest candidate was marked failed.

So, after such a failure, the supervisor measures, and believes nothing the candidate says:

* the candidate's folders, by the walk that polices its disk limit (``scratch_usage.measure``: blocks
  allocated, links never followed, files deleted but held open or mapped by its processes counted), all of
  them against its disk limit and those on the written file system apart;
* then the written file system, by ``statvfs`` on a path descriptor (``O_PATH``, no permission on the
  folder needed) of a folder of the harness's that the candidate cannot replace (the exchange
  folder's parent, the scratch folder), opened without following a link. What the candidate deletes
  between the two lowers what the file system holds, never what others seem to hold there.

The candidate's usage explains the failure (``judge``), and the verdict stays its own, when

* its folders and what was being written reach ``NEAR_LIMIT`` of its disk limit: the write would
  have put it at its limit in any case; or
* the file system holds little but its folders (``others_allowance``: 1 MiB or 5% of its size): a
  file system of a fixed size, smaller than its limit, that it filled (the docker evaluator's
  ``/scratch``, an ``exchange_root`` of its own). What others hold is what the file system holds
  less the candidate's folders, so a candidate that deletes its files once the write failed changes
  nothing of it.

Otherwise the host is short of space: an ``InfrastructureError`` for the supervisor to raise, whose
reason says where, how much is free and how much is not the candidate's. A folder the walk could not
count (``scratch_usage.Usage.uncounted``, too many entries) is the candidate's, as for its disk limit.
A write too large for the file system, however empty, is the host's too. Standard library (and
``scratch_usage``) only: the reference process imports ``NO_SPACE`` and ``NoSpace`` from here.
"""

from __future__ import annotations

import errno
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pike_harness.worker.supervise import scratch_usage, trusted_files

# What a write fails with when its file system (or quota, or file size limit) has no room left.
NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
# How a tool's log says a write found no room (a build's): strerror of ENOSPC and EDQUOT.
NO_SPACE_WORDS = (os.strerror(errno.ENOSPC), os.strerror(errno.EDQUOT))
NEAR_LIMIT = 0.95  # the candidate's folders plus the write, as a share of its disk limit, that is its doing
OTHERS_MIN_BYTES = 1 << 20  # what others may hold on a file system that is still "the candidate's own"
OTHERS_SHARE = 0.05  # ... or this share of its size, whichever is larger
MB = 2**20


class NoSpace(Exception):
    """A trusted write into a candidate's folder found no space (``NO_SPACE``): ``reason`` in words and
    ``needed_bytes``, what it was writing, for the supervisor to judge whose it is (``blame``)."""

    def __init__(self, reason: str, needed_bytes: int):
        super().__init__(reason)
        self.reason, self.needed_bytes = reason, max(0, int(needed_bytes))


@dataclass(frozen=True)
class Room:
    """A file system's figures from ``statvfs``, in bytes: its size, what it holds, what may still be
    written (``f_bavail``), and where it was measured."""

    where: str
    device: int
    total: int
    used: int
    free: int
    removals: tuple[int, int] = (0, 0)  # this process's removals there by then (``trusted_files.removals_on``)

    def describe(self) -> str:
        return f"{_mb(self.free)} free of {_mb(self.total)} on {self.where}{_kind(self.where)}"


@dataclass(frozen=True)
class Blame:
    """``candidate``: whether the candidate's own usage explains the failure; ``reason``: the figures."""

    candidate: bool
    reason: str


def room_of(folder: Path) -> Room | None:
    """``folder``'s file system; None when it cannot be measured. ``folder`` is the harness's and out of
    the candidate's reach (never followed if it is a link)."""
    fd = _open_path(folder)
    if fd is None:
        return None
    try:
        return _room(fd, folder)
    finally:
        os.close(fd)


def _open_path(folder: Path) -> int | None:
    """A path descriptor of the folder ``folder``, never through a link as its last component: enough for
    ``fstat`` and ``fstatvfs``, and no permission on the folder itself is needed (a candidate that took
    its own away cannot turn the measurement into a failure)."""
    try:
        return os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None


def _room(fd: int, folder: Path) -> Room | None:
    try:
        figures = os.statvfs(fd)
        device = os.fstat(fd).st_dev
    except OSError:
        return None
    return Room(where=os.fspath(folder), device=device, total=figures.f_blocks * figures.f_frsize,
                used=(figures.f_blocks - figures.f_bfree) * figures.f_frsize,
                free=figures.f_bavail * figures.f_frsize, removals=trusted_files.removals_on(device))


def others_allowance(room: Room) -> int:
    """What others may hold on a file system for it to count as the candidate's own."""
    return max(OTHERS_MIN_BYTES, int(room.total * OTHERS_SHARE))


def judge(*, candidate_bytes: int, here_bytes: int, limit_bytes: int, needed_bytes: int, room: Room) -> Blame:
    """Whose is a write of ``needed_bytes`` that found no space on ``room``'s file system, by the numbers:
    ``candidate_bytes`` in all the candidate's folders (its disk limit: ``limit_bytes``), ``here_bytes``
    of them on that file system."""
    held = f"the candidate's folders hold {_mb(candidate_bytes)} of its {_mb(limit_bytes)} disk limit"
    if candidate_bytes + needed_bytes >= NEAR_LIMIT * limit_bytes:
        return Blame(True, f"{held}, and {_mb(needed_bytes)} more were being written")
    others = max(0, room.used - here_bytes)
    if needed_bytes > room.total:
        return Blame(False, f"the host's file system is too small for the {_mb(needed_bytes)} being written: "
                            f"{room.describe()}; {held}")
    if others <= others_allowance(room) and needed_bytes <= room.total - others:
        return Blame(True, f"{held}, {_mb(here_bytes)} of them on {room.where}{_kind(room.where)}, which holds "
                           f"{_mb(others)} besides and {_mb(room.total)} in all: the candidate filled it")
    return Blame(False, f"the host's {_what(room.where)} is full, not by the candidate: {room.describe()}, "
                        f"{_mb(others)} of it held by others; {held} ({_mb(here_bytes)} of them there), and "
                        f"{_mb(needed_bytes)} were being written")


def blame(folders: Iterable[Path], written: Path, *, limit_mb: int, needed_bytes: int,
          pids: Iterable[tuple[int, int | None]] = (), max_entries: int) -> Blame:
    """Measure and ``judge`` a write of ``needed_bytes`` into one of the candidate's ``folders`` (scratch and
    exchange) that found no space; ``written`` is a folder of the harness's on the written file system
    (the exchange folder's parent, the scratch folder); ``pids`` the sandbox's processes (each
    ``(pid, start time)``), whose deleted but open files count as the disk walk counts them."""
    folders = list(dict.fromkeys(folders))
    pids = list(pids)
    fd = _open_path(written)
    if fd is None:
        return Blame(False, f"the file system of {written} could not be measured after a write there found no space")
    try:
        # The candidate's folders first, the file system second: what it deletes in between lowers what
        # the file system holds, never what others seem to hold there.
        device = os.fstat(fd).st_dev
        usage = scratch_usage.measure(folders, max_entries, pids=pids)
        if usage.over_entries or usage.uncounted:
            why = f"more than {max_entries} entries" if usage.over_entries else usage.uncounted
            return Blame(True, f"the candidate's folders could not all be measured ({why})")
        here = [folder for folder in folders if _device(folder) == device]
        here_bytes = scratch_usage.measure(here, max_entries, pids=pids).bytes if here else 0
        room = _room(fd, written)
    finally:
        os.close(fd)
    if room is None:
        return Blame(False, f"the file system of {written} could not be measured after a write there found no space")
    return judge(candidate_bytes=usage.bytes, here_bytes=min(here_bytes, usage.bytes), limit_bytes=limit_mb * MB,
                 needed_bytes=needed_bytes, room=room)


FREED_WAIT_S = 3.0  # how long the file system is watched for the room a killed candidate's processes held


def freed_since(folder: Path, before: Room | None, needed_bytes: int) -> str | None:
    """Why the failure was the candidate's after all, when killing its processes freed at least
    ``needed_bytes`` (at least 1 byte) on ``folder``'s file system since ``before``; None otherwise.
    Why: a file the candidate passed through a socket and never received, then unlinked, holds its
    blocks where neither the disk walk nor a process's descriptors or maps show it, and would make
    its own write failure the host's (retried, and it stops a run); it goes when the processes go.
    Room freed while this process removed something on that file system (another evaluation's folders,
    a build's staging), or with a removal under way since before, cannot be told from the candidate's:
    then None. Other harness processes' removals are not seen."""
    if before is None or before.removals[1]:
        return None
    deadline = time.monotonic() + FREED_WAIT_S
    while True:
        after = room_of(folder)
        if after is not None and after.removals != before.removals:
            return None
        freed = after.free - before.free if after is not None else 0
        if freed >= max(1, needed_bytes):
            return (f"{_mb(freed)} came free on {before.where}{_kind(before.where)} once the candidate's processes "
                    f"ended, room it held where no walk of its folders sees it (the write needed {_mb(needed_bytes)})")
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def host_short(folder: Path, wanted_bytes: int, *, own: Iterable[Path] = (),
               pids: Iterable[tuple[int, int | None]] = (), max_entries: int = 200_000) -> str | None:
    """Why the host cannot give a write of up to ``wanted_bytes`` in ``folder`` (a folder of the harness's)
    the room it may take, in words; None when it can, or cannot be measured, or when the candidate's
    own folders (``own``, with its processes ``pids``) on that file system hold what is missing: a
    candidate that filled the build cache's disk through its scratch folder, within its limit, then
    made its build print "No space left on device" is not the host's (an audit, 2026-11-30)."""
    room = room_of(folder)
    if room is None or room.free >= wanted_bytes:
        return None
    here = [path for path in own if _device(path) == room.device]
    if here and room.free + scratch_usage.measure(here, max_entries, pids=pids).bytes >= wanted_bytes:
        return None
    return f"the host's {_what(room.where)} is full: {room.describe()}, under the {_mb(wanted_bytes)} one write may take"


def says_no_space(text: str) -> bool:
    """Whether a tool's log (untrusted: it only decides whether to measure) says a write found no room."""
    return any(words in text for words in NO_SPACE_WORDS)


def _device(folder: Path) -> int | None:
    try:
        return os.lstat(folder).st_dev  # a top folder of the harness's: a link there is not followed
    except OSError:
        return None


def _mount(path: str) -> tuple[str, str]:
    """The mount point and type of the file system holding ``path`` (longest match in /proc/mounts)."""
    best, kind = "", ""
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = fields[1]
                inside = path == point or path.startswith(point.rstrip("/") + "/")
                if inside and len(point) > len(best):
                    best, kind = point, fields[2]
    except OSError:
        pass
    return best, kind


def _kind(where: str) -> str:
    point, kind = _mount(where)
    return f" ({kind} mounted at {point})" if point else ""


def _what(where: str) -> str:
    return "shared memory" if _mount(where)[1] in ("tmpfs", "ramfs") else "disk"


def _mb(count: int) -> str:
    return f"{count / MB:,.1f} MB" if count < 10 * MB else f"{count / MB:,.0f} MB"
