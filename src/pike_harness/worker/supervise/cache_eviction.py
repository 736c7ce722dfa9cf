"""Least-recently-used eviction for the harness's persistent caches: the shared JIT caches
(``jit_caches.py``) and the build cache's entries (``buildcache.py``, ``CACHE/build/ext``).

A cache is a root folder of entry folders. Each entry is charged its apparent bytes (``st_size``: a
sparse file counts in full) plus a block for each file and folder (``charge``), recorded in the
entry's ``CHARGE_FILE`` when it is published. Its last use is its folder's modification time (set
when it is published and each time it is used). ``evict`` removes the least recently used entries
until the rest are within a total: each is renamed out of the way first (a reader finds an entry
whole or not at all), then removed through ``trusted_files.discard``, which never follows a link.
Standard library only.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import secrets
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

from pike_harness.worker.supervise import trusted_files

MAX_DEPTH = 16  # folder levels measured (trusted_files.copy_tree's default)
BLOCK = 4096  # what a file or folder may take on disk beyond its bytes
CHARGE_FILE = ".charge"  # in an entry: its charge against the total, in decimal
STAGING = ".staging-"  # a publication in progress inside the root (a crash can leave one: removed once STALE_S old)
EVICTED = ".evicted-"  # an entry being removed (a crash can leave one: removed at the next eviction)
STALE_S = 24 * 3600


def charge(entries: int, size: int) -> int:
    """What an entry counts against its cache's total: its bytes, and a block for each of its
    ``entries`` files and folders and for the entry itself (20,000 one-byte files take 80 MB of disk)."""
    return size + (entries + 1) * BLOCK


def write_charge(entry_fd: int, amount: int) -> None:
    fd = trusted_files.create_exclusive(CHARGE_FILE, dir_fd=entry_fd)
    try:
        trusted_files.write_all(fd, str(amount).encode())
    finally:
        os.close(fd)


def evict(root: Path, root_fd: int, *, max_total_bytes: int, is_entry: Callable[[str], bool],
          keep: str | None = None,
          claim: Callable[[str], AbstractContextManager[bool]] | None = None) -> list[str]:
    """Remove the least recently used entries of ``root`` (the names ``is_entry`` accepts) until the
    rest are within ``max_total_bytes`` (never ``keep``), what a crash left of removals, and
    publications abandoned ``STALE_S`` ago; the names of the entries removed.

    ``claim(name)``: a context manager that says whether the entry is free to remove and keeps it so
    while it is removed (the build cache's per-key lock); an entry in use is skipped, never removed.
    One eviction at a time (a lock on the root folder, across threads and harness processes).
    Never raises: a fuller cache is not an evaluation's failure.
    """
    removed: list[str] = []
    with contextlib.suppress(OSError, trusted_files.UntrustedFile), _locked(root_fd):
        entries: list[tuple[int, str, int]] = []
        stale = time.time_ns() - STALE_S * 10**9
        with os.scandir(root_fd) as listing:
            names = [entry.name for entry in listing]
        for name in names:
            try:
                info = os.stat(name, dir_fd=root_fd, follow_symlinks=False)
            except OSError:
                continue
            if not stat.S_ISDIR(info.st_mode):
                continue  # a squat where an entry goes: its cache removes it when that entry is next looked up
            if name.startswith(EVICTED) or (name.startswith(STAGING) and info.st_mtime_ns < stale):
                trusted_files.discard(root / name)
            elif is_entry(name) and name != keep:
                entries.append((info.st_mtime_ns, name, _entry_charge(root_fd, name, info)))
        total = sum(amount for _, _, amount in entries) + (_entry_charge(root_fd, keep, None) if keep else 0)
        for _, name, amount in sorted(entries):
            if total <= max_total_bytes:
                break
            with claim(name) if claim is not None else contextlib.nullcontext(True) as free:
                if not free:
                    continue  # in use now: it stays, and counts
                doomed = f"{EVICTED}{secrets.token_hex(8)}"
                try:  # out of the way first: a lookup finds the entry whole or not at all
                    os.rename(name, doomed, src_dir_fd=root_fd, dst_dir_fd=root_fd)
                except OSError:
                    continue
            trusted_files.discard(root / doomed)
            removed.append(name)
            total -= amount
    return removed


@contextlib.contextmanager
def _locked(fd: int) -> Iterator[None]:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:  # a file system without flock on folders: evictions may overlap, each one is safe
        yield
        return
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _entry_charge(root_fd: int, name: str, info: os.stat_result | None) -> int:
    """An entry's recorded charge; for one an older version published (none recorded), measured once
    and recorded where the entry can be written, its modification time (its last use) kept."""
    try:
        entry = trusted_files.open_directory(name, dir_fd=root_fd)
    except trusted_files.UntrustedFile:
        return 0
    try:
        try:
            return int(trusted_files.read_regular(CHARGE_FILE, 32, dir_fd=entry))
        except (OSError, ValueError, trusted_files.UntrustedFile):
            pass
        amount = measure(entry)
        with contextlib.suppress(OSError, trusted_files.UntrustedFile):
            write_charge(entry, amount)
        if info is not None:
            with contextlib.suppress(OSError):
                os.utime(entry, ns=(info.st_atime_ns, info.st_mtime_ns))
        return amount
    finally:
        os.close(entry)


def measure(entry_fd: int) -> int:
    """The charge of the tree below ``entry_fd``, walked without following a link (each folder
    opened no-follow relative to its parent), at most ``MAX_DEPTH`` levels, one descriptor a level."""
    entries = size = 0
    stack: list[tuple[int, Iterator[os.DirEntry]]] = []
    fd: int | None = os.dup(entry_fd)
    try:
        while fd is not None or stack:
            if fd is not None:  # a folder just opened: listed now, walked next
                stack.append((fd, iter(())))
                with os.scandir(fd) as listing:
                    stack[-1] = (fd, iter(list(listing)))
                fd = None
                continue
            item = next(stack[-1][1], None)
            if item is None:
                os.close(stack.pop()[0])
                continue
            entries += 1
            try:
                info = item.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                size += info.st_size
            elif stat.S_ISDIR(info.st_mode) and len(stack) <= MAX_DEPTH:
                with contextlib.suppress(trusted_files.UntrustedFile):
                    fd = trusted_files.open_directory(item.name, dir_fd=stack[-1][0])
    finally:
        for opened, _ in stack:
            os.close(opened)
    return charge(entries, size)
