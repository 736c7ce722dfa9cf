"""How much disk a candidate's folders hold, measured without trusting anything in them.

A candidate may write anywhere in its scratch and exchange folders; ``RLIMIT_FSIZE`` caps one file,
not how many. The supervisor measures the folders every few seconds while it polices the candidate,
so a disk filled with many files is that candidate's ``disk_limit`` verdict, not the host's (or an
honest neighbour's) out-of-space error. The walk is iterative (a 3,000-level tree cannot overflow
a stack), never follows a link, counts blocks actually allocated (a sparse file is not a full one)
and each inode once, and stops early once the entry budget is spent (a million empty files is its
own verdict). Standard library only.

Never following a link includes the folders on the way: the candidate runs while it is measured, so
a folder listed as ``scratch/a`` may be a link to ``/`` by the time the walk opens it. Each folder is
opened without following its last component and listed only if it is still the folder the listing
of its parent saw (same device and inode); a swapped one is skipped, never listed.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pike_harness.worker.supervise import trusted_files


@dataclass
class Usage:
    bytes: int = 0
    entries: int = 0
    over_entries: bool = False  # the walk stopped at the entry budget


def measure(folders: Iterable[Path], max_entries: int) -> Usage:
    """Bytes allocated and entries found under ``folders`` (links and mount points not followed)."""
    usage = Usage()
    seen: set[tuple[int, int]] = set()
    # (path, the (device, inode) its parent's listing saw; None for a top folder, which we made)
    stack: list[tuple[str, tuple[int, int] | None]] = [(str(folder), None) for folder in folders]
    while stack:
        folder, expected = stack.pop()
        fd = _open_folder(folder, expected)
        if fd is None:
            continue
        try:
            with os.scandir(fd) as entries:
                for entry in entries:
                    usage.entries += 1
                    if usage.entries > max_entries:
                        usage.over_entries = True
                        return usage
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    identity = (info.st_dev, info.st_ino)
                    if identity not in seen:
                        seen.add(identity)
                        usage.bytes += getattr(info, "st_blocks", 0) * 512
                    if stat.S_ISDIR(info.st_mode):
                        stack.append((os.path.join(folder, entry.name), identity))
        except OSError:  # unreadable (the candidate's chmod): nothing to count
            continue
        finally:
            os.close(fd)
    return usage


def _open_folder(path: str, expected: tuple[int, int] | None) -> int | None:
    """A descriptor of the folder at ``path`` if it is (still) the one its parent's listing saw; None
    if it is gone, is a link or anything but a folder now, or is another folder (a component on the
    way was swapped for a link)."""
    try:
        fd = os.open(path, trusted_files.DIRECTORY_FLAGS)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
    except OSError:
        os.close(fd)
        return None
    if expected is not None and (info.st_dev, info.st_ino) != expected:
        os.close(fd)
        return None
    return fd
