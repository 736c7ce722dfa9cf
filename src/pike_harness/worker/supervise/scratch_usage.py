"""How much disk a candidate's folders hold, measured without trusting anything in them.

A candidate may write anywhere in its scratch and exchange folders; ``RLIMIT_FSIZE`` caps one file,
not how many. The supervisor measures the folders every few seconds while it polices the candidate,
so a disk filled with many files is that candidate's ``disk_limit`` verdict, not the host's (or an
honest neighbour's) out-of-space error. The walk is iterative (a 3,000-level tree cannot overflow
a stack), never follows a link, counts blocks actually allocated (a sparse file is not a full one)
and each inode once, and stops early once the entry budget is spent (a million empty files is its
own verdict). Standard library only.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Usage:
    bytes: int = 0
    entries: int = 0
    over_entries: bool = False  # the walk stopped at the entry budget


def measure(folders: Iterable[Path], max_entries: int) -> Usage:
    """Bytes allocated and entries found under ``folders`` (links and mount points not followed)."""
    usage = Usage()
    seen: set[tuple[int, int]] = set()
    stack = [str(folder) for folder in folders]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    usage.entries += 1
                    if usage.entries > max_entries:
                        usage.over_entries = True
                        return usage
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    if (info.st_dev, info.st_ino) not in seen:
                        seen.add((info.st_dev, info.st_ino))
                        usage.bytes += getattr(info, "st_blocks", 0) * 512
                    if stat.S_ISDIR(info.st_mode):
                        stack.append(entry.path)
        except OSError:  # gone, unreadable (the candidate's chmod), or not a folder: nothing to count
            continue
    return usage
