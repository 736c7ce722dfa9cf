"""How much disk a candidate's folders hold, measured without trusting anything in them.

A candidate may write anywhere in its scratch and exchange folders; ``RLIMIT_FSIZE`` caps one file,
not how many. The supervisor measures the folders every few seconds while it polices the candidate,
so a disk filled with many files is that candidate's ``disk_limit`` verdict, not the host's (or an
honest neighbour's) out-of-space error. The exchange folder sits in ``/dev/shm``: what it holds is
the host's memory. The walk is iterative (a 3,000-level tree cannot overflow a stack), never follows
a link, counts blocks actually allocated (a sparse file is not a full one) and each inode once, and
stops early once the entry budget is spent (a million empty files is its own verdict).

The candidate runs while it is measured, so nothing is reached by a path string: each folder is
opened relative to its parent's descriptor, without following a link (``O_NOFOLLOW | O_DIRECTORY``),
so a folder swapped for a link to ``/`` after its parent was listed is never entered, and a tree
nested past ``PATH_MAX`` is walked like any other. At most ``WALK_FDS`` descriptors are open however
deep the tree is: a deeper level's parent is reached again through its ``..``, checked against the
device and inode seen on the way down; a tree moved meanwhile ends the walk as ``moved`` (only a
tree over ``WALK_FDS`` levels can be, which no honest candidate makes). A folder the candidate
locked (``chmod 0o300``: it may still create files there) is opened up by descriptor, as
``trusted_files`` does to remove it; one that stays unreadable is ``unreadable``. Both are its
``disk_limit`` verdict: what cannot be counted cannot be allowed.

Files it deleted but holds open (create, open, unlink, write) are on no folder's listing and still
hold their blocks; so ``measure`` also weighs the regular files with no link left that the given
processes (the sandbox's) hold open, through ``os.stat`` on ``/proc/<pid>/fd/<n>`` (a stat, never an
open), on the file systems of the measured folders only, each inode once, at most
``MAX_HELD_FILES`` descriptors (more is the verdict too). Deleted files there that no descriptor
holds but a mapping does (mapped shared, closed, unlinked: written through the mapping, its pages out
of memory) are weighed too (``held_memory``, which reads the processes' maps). Standard library only.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from pike_harness.worker.supervise import held_memory, sandbox, trusted_files

WALK_FDS = 64  # descriptors one walk keeps open (the deepest levels); deeper parents come back through ".."
MAX_HELD_FILES = 65_536  # descriptors of the sandbox's processes looked at per measure
_READABLE = stat.S_IRUSR | stat.S_IXUSR  # what the walk needs of a folder: list it and stat its entries


@dataclass
class Usage:
    bytes: int = 0
    entries: int = 0
    over_entries: bool = False  # the walk stopped at the entry budget
    held_bytes: int = 0  # of ``bytes``: files deleted but held open or mapped by the processes given
    over_held: bool = False  # the processes held more than MAX_HELD_FILES descriptors
    over_mapped: str | None = None  # their deleted mappings could not all be counted (``held_memory``), in words
    unreadable: str | None = None  # a folder that could not be listed even once opened up, in words
    moved: bool = False  # a level deeper than WALK_FDS was moved while it was measured

    @property
    def uncounted(self) -> str | None:
        """Why part of the folders could not be counted (the candidate's doing), or None."""
        if self.unreadable is not None:
            return f"a folder stayed unreadable ({self.unreadable})"
        if self.moved:
            return f"folders nested deeper than {WALK_FDS} levels were moved while they were measured"
        if self.over_held:
            return f"its processes held more than {MAX_HELD_FILES} open files"
        if self.over_mapped is not None:
            return self.over_mapped
        return None


@dataclass
class _Level:
    """One folder on the way down: identity, descriptor (None once closed to spare descriptors) and
    the subfolders still to walk."""

    device: int
    inode: int
    fd: int | None
    pending: list[str] = field(default_factory=list)


class _Stop(Exception):
    """The walk ends here (the entry budget is spent, or a folder could not be counted)."""


def measure(folders: Iterable[Path], max_entries: int, *, pids: Iterable[tuple[int, int | None]] = ()) -> Usage:
    """Bytes allocated and entries found under ``folders`` (links and mount points not followed), plus
    the files deleted there but held open by ``pids`` (each ``(pid, start time)``; None: not checked),
    or held by their mappings alone (``held_memory.Held.disk_bytes``)."""
    usage = Usage()
    seen: set[tuple[int, int]] = set()  # every inode counted (files and folders)
    devices: set[int] = set()
    try:
        for folder in folders:
            top = _open_top(Path(folder), usage)
            if top is None:
                continue
            info = os.fstat(top)
            devices.add(info.st_dev)
            if (info.st_dev, info.st_ino) in seen:
                os.close(top)
                continue
            seen.add((info.st_dev, info.st_ino))
            usage.bytes += getattr(info, "st_blocks", 0) * 512
            _walk(top, info, usage, seen, devices, max_entries)
        pids = list(pids)
        _held_open(pids, devices, seen, usage)
        if pids and devices:
            mapped = held_memory.measure(pids, counted_as_disk=devices)
            usage.bytes += mapped.disk_bytes
            usage.held_bytes += mapped.disk_bytes
            usage.over_mapped = mapped.over
    except _Stop:
        pass
    return usage


def _open_top(folder: Path, usage: Usage) -> int | None:
    """A descriptor of a top folder (made by the harness; the candidate may have locked it)."""
    try:
        parent, name = trusted_files.folder_of(folder)
    except trusted_files.UntrustedFile:
        return None
    try:
        return _open_child(parent, name, usage)
    finally:
        os.close(parent)


def _open_child(parent_fd: int, name: str, usage: Usage) -> int | None:
    """The subfolder ``name`` of ``parent_fd``, opened without following a link and made listable if the
    candidate locked it; None if it is gone or is no folder now (a link, a file: nothing to walk)."""
    try:
        fd = os.open(name, trusted_files.DIRECTORY_FLAGS, dir_fd=parent_fd)
    except PermissionError:
        fd = _unlock_and_open(parent_fd, name, usage)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
            return None
        _unreadable(usage, name, exc)
    try:
        mode = os.fstat(fd).st_mode
        if mode & _READABLE != _READABLE:  # readable but not searchable (0o600): its entries cannot be stat'ed
            os.fchmod(fd, stat.S_IMODE(mode) | stat.S_IRWXU)
    except OSError as exc:
        os.close(fd)
        _unreadable(usage, name, exc)
    return fd


def _unlock_and_open(parent_fd: int, name: str, usage: Usage) -> int:
    """chmod a folder made unreadable, through a path descriptor that cannot be a link, then open it."""
    try:
        handle = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=parent_fd)
    except OSError as exc:
        _unreadable(usage, name, exc)
    try:
        os.chmod(f"/proc/self/fd/{handle}", stat.S_IRWXU)
        return os.open(name, trusted_files.DIRECTORY_FLAGS, dir_fd=parent_fd)
    except OSError as exc:  # locked again meanwhile, or not ours to open up
        _unreadable(usage, name, exc)
    finally:
        os.close(handle)


def _unreadable(usage: Usage, name: str, exc: OSError) -> NoReturn:
    usage.unreadable = f"{name[:100]!r}: {exc.strerror}"
    raise _Stop


def _entries(fd: int) -> Iterator[os.DirEntry]:
    with os.scandir(fd) as listing:
        yield from listing


def _walk(top: int, top_info: os.stat_result, usage: Usage, seen: set[tuple[int, int]], devices: set[int],
          max_entries: int) -> None:
    """Count everything below the open folder ``top`` (closed here); raises ``_Stop`` when the walk ends early."""
    chain = [_Level(top_info.st_dev, top_info.st_ino, top)]
    try:
        while chain:
            level = chain[-1]
            assert level.fd is not None  # only shallower levels are closed to spare descriptors
            if not level.pending:
                _list(level, usage, seen, devices, max_entries)
                level.pending.insert(0, "")  # popped last: the level is done
            name = level.pending.pop()
            if name:
                fd = _open_child(level.fd, name, usage)
                if fd is None:
                    continue
                info = os.fstat(fd)
                if (info.st_dev, info.st_ino) in seen or info.st_dev != top_info.st_dev:
                    os.close(fd)  # walked already (moved under a folder still to walk), or a mount point
                    continue
                seen.add((info.st_dev, info.st_ino))
                usage.bytes += getattr(info, "st_blocks", 0) * 512
                chain.append(_Level(info.st_dev, info.st_ino, fd))
                _spare_descriptors(chain)
                continue
            chain.pop()
            try:
                if chain and chain[-1].fd is None:
                    chain[-1].fd = _reopen_parent(level, chain[-1], usage)
            finally:
                os.close(level.fd)
                level.fd = None
    finally:
        for level in chain:
            if level.fd is not None:
                os.close(level.fd)


def _list(level: _Level, usage: Usage, seen: set[tuple[int, int]], devices: set[int], max_entries: int) -> None:
    """Count one folder's entries; its subfolders go on ``level.pending``, the file systems its files are
    on (an overlay may give files another device than folders) on ``devices``."""
    assert level.fd is not None
    try:
        for entry in _entries(level.fd):
            usage.entries += 1
            if usage.entries > max_entries:
                usage.over_entries = True
                raise _Stop
            try:
                info = entry.stat(follow_symlinks=False)  # fstatat on the folder's descriptor: no path
            except FileNotFoundError:
                continue
            except PermissionError as exc:  # locked again since it was opened up
                _unreadable(usage, entry.name, exc)
            identity = (info.st_dev, info.st_ino)
            if stat.S_ISDIR(info.st_mode):
                level.pending.append(entry.name)  # its blocks are counted once it is opened
            elif identity not in seen:
                seen.add(identity)
                usage.bytes += getattr(info, "st_blocks", 0) * 512
                devices.add(info.st_dev)
    except OSError as exc:
        if isinstance(exc, PermissionError):
            _unreadable(usage, "a folder", exc)
        # gone meanwhile (ENOENT on a removed folder): nothing left to count


def _spare_descriptors(chain: list[_Level]) -> None:
    """Keep at most ``WALK_FDS`` levels open: the open ones are always the deepest (a level is reopened
    only from its child, on the way back up), so the one to close sits at a fixed distance."""
    if len(chain) > WALK_FDS:
        level = chain[-WALK_FDS - 1]
        if level.fd is not None:
            os.close(level.fd)
            level.fd = None


def _reopen_parent(child: _Level, parent: _Level, usage: Usage) -> int:
    """The parent's descriptor again, through the child's "..", only if it is the folder seen going down."""
    assert child.fd is not None
    try:
        fd = os.open("..", trusted_files.DIRECTORY_FLAGS, dir_fd=child.fd)
    except OSError:
        usage.moved = True
        raise _Stop from None
    info = os.fstat(fd)
    if (info.st_dev, info.st_ino) != (parent.device, parent.inode):
        os.close(fd)
        usage.moved = True
        raise _Stop
    return fd


def _held_open(pids: Iterable[tuple[int, int | None]], devices: set[int], seen: set[tuple[int, int]],
               usage: Usage) -> None:
    """Add the regular files with no link left that ``pids`` hold open on ``devices`` (see the module)."""
    if not devices:
        return
    looked = 0
    for pid, start in pids:
        found: list[tuple[tuple[int, int], int]] = []
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # gone, or not ours to look at
            continue
        for name in names:
            looked += 1
            if looked > MAX_HELD_FILES:
                usage.over_held = True
                raise _Stop
            try:
                info = os.stat(f"/proc/{pid}/fd/{name}")  # the open file itself: a stat, never an open
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_nlink == 0 and info.st_dev in devices:
                found.append(((info.st_dev, info.st_ino), getattr(info, "st_blocks", 0) * 512))
        if start is not None and sandbox.process_start(pid) != start:
            continue  # the pid ended (and may be another process's now) while it was looked at
        for identity, size in found:
            if identity not in seen:
                seen.add(identity)
                usage.bytes += size
                usage.held_bytes += size

