"""Exchange folders: where tensors cross between a candidate's process and the reference process.

The hidden input sets go in and the candidate's outputs come out through a private folder per
candidate process, in shared memory (``/dev/shm``) when it has room, so large outputs never take a
disk round trip. The folder is made when the process starts, pre-started ones included, so that the
sandbox can bind exactly that folder writable: the sandbox has a ``/dev`` of its own, and no
candidate sees another's folder. Standard library only.

The folder is the candidate's to fill, up to its disk limit (``Limits.disk_mb``, scratch and exchange
folders together), and ``/dev/shm`` is shared with the host, the reference process and the other
candidates. A folder goes there only when ``/dev/shm`` has room for the whole limit of its candidate
and for those of every folder this process made there that still exists (``make``): a candidate that
stays within its limit then cannot fill shared memory under the hidden inputs of another candidate
(or its own). Before, 4 GB free were enough, and a candidate that filled ``/dev/shm`` at import made
the reference's write of its hidden inputs fail, which the supervisor took for an infrastructure
error (the run stopped). The limit counts each folder at its whole limit, what it holds already too:
cautious, and free (no walk over what the candidates wrote).
"""

from __future__ import annotations

import os
import tempfile
import threading
from pathlib import Path

from pike_harness.worker.records import Limits
from pike_harness.worker.supervise import sandbox, trusted_files

SHARED_MEMORY = Path("/dev/shm")
EXCHANGE_PREFIX = "pikeh-x-"  # then the harness's pid: folders of a harness that is gone can be swept
# The room a folder in shared memory is made for: the default disk limit of its candidate. A request's
# own limit is known only once the process is taken (pre-started ones are made before any request).
ROOM_MB = Limits().disk_mb
_RESERVED_LOCK = threading.Lock()
_RESERVED: dict[str, int] = {}  # folders this process made in shared memory -> MB they may grow to


def make(root: Path | None, fallback: Path, room_mb: int = ROOM_MB) -> Path:
    """A fresh exchange folder in ``root``; else in shared memory when it has ``room_mb`` free beyond the
    room of the folders this process made there before (``reserved_mb``); else in ``fallback``."""
    if root is not None:
        return _folder(root)
    with _RESERVED_LOCK:
        shared = shared_memory_root(room_mb + _reserved_mb())
        if shared is not None:
            folder = _folder(shared)
            _RESERVED[str(folder)] = room_mb
            return folder
    return _folder(fallback)


def _folder(where: Path) -> Path:
    return Path(tempfile.mkdtemp(prefix=f"{EXCHANGE_PREFIX}{sandbox.owner_name()}-", dir=where))


def reserved_mb() -> int:
    """The room held in shared memory for this process's exchange folders that still exist."""
    with _RESERVED_LOCK:
        return _reserved_mb()


def _reserved_mb() -> int:
    """``reserved_mb`` under the lock: a folder removed (its evaluation closed) gives its room back."""
    for path in [path for path in _RESERVED if not os.path.lexists(path)]:
        del _RESERVED[path]
    return sum(_RESERVED.values())


def shared_memory_root(room_mb: int) -> Path | None:
    """/dev/shm when it is a writable folder with ``room_mb`` free."""
    free = free_bytes(SHARED_MEMORY)
    if free is None or not os.access(SHARED_MEMORY, os.W_OK | os.X_OK) or free < room_mb * 2**20:
        return None
    return SHARED_MEMORY


def free_bytes(path: Path) -> int | None:
    """The bytes an unprivileged writer may still fill on ``path``'s file system; None if unknown."""
    try:
        usage = os.statvfs(path)
    except OSError:
        return None
    return usage.f_bavail * usage.f_frsize


def sweep_exchange_folders(root: Path = SHARED_MEMORY) -> int:
    """Remove the exchange folders that harness processes no longer running left in ``root`` (killed
    harnesses never reach ``close()``; shared memory is only freed by deleting the files). A folder is
    named by its harness's pid namespace, pid and start time (``sandbox.owner_name``): one of another
    namespace (a containerised harness sharing the host's ``/dev/shm``, whose pids mean other processes
    here) or of a pid now another process's is left alone, and so is one named the former way (the pid
    alone, which could not tell them apart: its live candidate's folder was removed under it)."""
    removed = 0
    for path in root.glob(f"{EXCHANGE_PREFIX}*-*") if root.is_dir() else []:
        owner = path.name[len(EXCHANGE_PREFIX):].split("-")[0]
        if not sandbox.owner_name_gone(owner):
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
