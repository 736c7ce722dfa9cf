"""Exchange folders: where tensors cross between a candidate's process and the reference process.

The hidden input sets go in and the candidate's outputs come out through a private folder per
candidate process, in shared memory (``/dev/shm``) when it has room, so large outputs never take a
disk round trip. The folder is made when the process starts, pre-started ones included, so that the
sandbox can bind exactly that folder writable: the sandbox has a ``/dev`` of its own, and no
candidate sees another's folder. Standard library only.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from pike_harness.worker.supervise import trusted_files

SHARED_MEMORY = Path("/dev/shm")
EXCHANGE_PREFIX = "pikeh-x-"  # then the harness's pid: folders of a harness that is gone can be swept
ROOM_MB = 4096  # free shared memory wanted before a folder goes there (else: the scratch folder on disk)


def make(root: Path | None, fallback: Path, room_mb: int = ROOM_MB) -> Path:
    """A fresh exchange folder in ``root``, else in shared memory with ``room_mb`` free, else in ``fallback``."""
    where = root or shared_memory_root(room_mb) or fallback
    return Path(tempfile.mkdtemp(prefix=f"{EXCHANGE_PREFIX}{os.getpid()}-", dir=where))


def shared_memory_root(file_size_mb: int) -> Path | None:
    """/dev/shm when it is a writable folder with room for the largest file a candidate may write."""
    try:
        usage = os.statvfs(SHARED_MEMORY)
    except OSError:
        return None
    if not os.access(SHARED_MEMORY, os.W_OK | os.X_OK) or usage.f_bavail * usage.f_frsize < file_size_mb * 2**20:
        return None
    return SHARED_MEMORY


def sweep_exchange_folders(root: Path = SHARED_MEMORY) -> int:
    """Remove the exchange folders that harness processes no longer running left in ``root`` (killed
    harnesses never reach ``close()``; shared memory is only freed by deleting the files)."""
    removed = 0
    for path in root.glob(f"{EXCHANGE_PREFIX}*-*") if root.is_dir() else []:
        pid = path.name[len(EXCHANGE_PREFIX):].split("-")[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
            continue  # alive (or another user's, which this process may not touch either)
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        trusted_files.remove_tree(path)
        removed += 1
    return removed


def on_tmpfs(path: Path) -> bool:
    """Whether ``path`` lies on a memory-backed file system (tmpfs), by the longest matching mount."""
    best, kind = "", ""
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) > 2 and str(path).startswith(fields[1].rstrip("/") + "/") and len(fields[1]) > len(best):
                    best, kind = fields[1], fields[2]
    except OSError:
        return False
    return kind in ("tmpfs", "ramfs")
