"""Host memory a candidate's processes hold where no RSS shows it: memfds and deleted files on a memory
file system, measured without trusting anything the candidate wrote.

A memfd (``os.memfd_create``) written with ``os.write`` and never mapped is shared memory of the host
in no process's RSS, and ``RLIMIT_FSIZE`` bounds each one, not how many; a tmpfs file mapped, deleted
and closed is held by its mapping alone, where the disk walk (``scratch_usage``) sees neither a name
nor a descriptor. Many of them could exhaust the host's memory and get the supervisor or the reference
process killed by the kernel in the candidate's place. So the supervisor weighs them with the
processes' own memory against ``memory_mb``, at the disk walk's pace (``DISK_POLICE_S``: this reads
every member's descriptors and maps, dearer than the stat scan of each police round).

What counts, over the processes given (the sandbox's), each object once by (device, inode):

* a descriptor whose link (``readlink`` of ``/proc/PID/fd/N``) names a memfd (``/memfd:...``) or a
  deleted regular file on a memory file system (tmpfs, ramfs, hugetlbfs, as the process's own
  ``/proc/PID/mountinfo`` says): sized by the blocks it holds, from ``os.stat`` of that magic link (a
  stat, never an open), so a sparse memfd 8 GB long holding 4 KB counts 4 KB;
* a mapping (``/proc/PID/maps``) of a deleted file on a memory file system or on the kernel's internal
  one (memfds, ``MAP_SHARED | MAP_ANONYMOUS`` regions, shown as ``/dev/zero (deleted)``, System V
  segments, ``/SYSV...``) whose object no descriptor showed: sized by ``os.stat`` of
  ``/proc/PID/map_files/START-END`` (no open either), which the kernel grants only to a supervisor with
  ``CAP_SYS_ADMIN`` or ``CAP_CHECKPOINT_RESTORE`` (root). Refused that, by its mapped extent (the end
  of its furthest mapping in the file): exact for an object mapped to its end, more than it holds for
  one sparse or not yet touched, and less than it holds for one larger than every window mapped of it,
  which is what no unprivileged reader of ``/proc`` can size.

Left out, because ``scratch_usage`` counts them against ``disk_mb``: deleted files held open on the
file systems of the scratch and exchange folders (``counted_as_disk``), mapped or not. A linked file is
in a folder: the disk walk's, or the sandbox's private ``/tmp`` and ``/dev/shm``, capped by their size.
A deleted file on those file systems held by a mapping alone (opened, sized with ``ftruncate``, mapped
shared, closed and unlinked: written through the mapping, its pages dropped from memory, it stays on
disk with neither a name nor a descriptor) is sized here as above, apart (``Held.disk_bytes``), and the
disk policing adds it to the walk's count: an audit filled a gigabyte of the host's disk that way,
counted nowhere (2026-11-30).

Counted once, not twice: the pages of a mapped object that a process touched are in its RSS too. So
``mapped_by`` names the processes that map a counted object, and the policing takes their shared-memory
pages (``RssShmem``; ``Pss_Shmem`` when it reads the PSS; ``sandbox.memory_bytes``) out of their memory
before it adds the objects whole. Taken out with those pages: the other shared memory such a process
maps (a linked tmpfs file, counted or capped as above). The police rounds between two measures weigh
the full RSS as before, so this never lets through what the RSS alone would have stopped.

Bounded: at most ``MAX_FDS`` descriptors, ``MAX_MAPS_BYTES`` of maps and ``MAX_MAPPINGS`` mappings of
deleted files per measure; past any, the measure stops and says so (``over``), which the policing judges
over the limit: what cannot be counted cannot be allowed. A process or descriptor that ends mid-scan
(ENOENT, ESRCH, EACCES) is passed over; a pid whose start time changed meanwhile is another process's,
and what was found in it is dropped. Standard library only.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pike_harness.worker.supervise import sandbox

MAX_FDS = 65_536  # descriptors looked at per measure (RLIMIT_NOFILE is 4096 a process, 256 processes)
MAX_MAPS_BYTES = 64 << 20  # of /proc/PID/maps read per measure (a process holding torch: about 50 KB)
MAX_MAPPINGS = 65_536  # mappings of deleted files looked at per measure (an honest process: none)
MEMORY_FILE_SYSTEMS = frozenset({b"tmpfs", b"ramfs", b"hugetlbfs"})
_CHUNK = 1 << 20
_MOUNTINFO_BYTES = 4 << 20
_MEMFD = "/memfd:"
_DELETED = " (deleted)"
# start-end perms offset major:minor inode path " (deleted)" (the kernel escapes a newline in a path)
_DELETED_MAPPING = re.compile(
    rb"^([0-9a-f]+)-([0-9a-f]+) \S+ ([0-9a-f]+) ([0-9a-f]+):([0-9a-f]+) (\d+) +(.*) \(deleted\)$", re.M)

Identity = tuple[int, int]  # (device, inode)


@dataclass
class Held:
    bytes: int = 0  # allocated bytes of the objects found, each once
    objects: int = 0
    estimated: int = 0  # of ``objects``: sized by their mapped extent (the map_files stat was refused)
    mapped_by: set[int] = field(default_factory=set)  # pids mapping a counted object (see the module)
    disk_bytes: int = 0  # deleted files on the disk walk's file systems held by a mapping alone (not in ``bytes``)
    disk_objects: int = 0
    over: str | None = None  # why the measure stopped short, in words; None: everything was counted


@dataclass
class _Budget:
    max_fds: int
    max_maps_bytes: int
    max_mappings: int
    fds: int = 0
    maps_bytes: int = 0
    mappings: int = 0


@dataclass
class _Mapping:
    identity: Identity
    range: str  # as /proc/PID/map_files names it
    extent: int  # where the mapping ends in the file
    on_disk: bool  # on a file system of ``counted_as_disk``


class _Over(Exception):
    """Too many to count: the measure stops here."""


def measure(pids: Iterable[tuple[int, int | None]], *, counted_as_disk: Iterable[int] = (),
            max_fds: int = MAX_FDS, max_maps_bytes: int = MAX_MAPS_BYTES,
            max_mappings: int = MAX_MAPPINGS) -> Held:
    """The memfds and deleted memory-file-system files that ``pids`` hold (each ``(pid, start time)``;
    None: not checked), by descriptor or by mapping; see the module for what counts and how."""
    pids = list(pids)
    disk_devices = frozenset(counted_as_disk)
    budget = _Budget(max_fds, max_maps_bytes, max_mappings)
    devices = _MemoryDevices()
    held = Held()
    sizes: dict[Identity, int] = {}  # exact: blocks allocated
    extents: dict[Identity, int] = {}  # estimated: mapped extent
    on_disk: set[Identity] = set()  # held open on the disk walk's file systems, or linked: the walk's
    disk_mapped: set[Identity] = set()  # held by a mapping alone on the disk walk's file systems
    mapped: list[tuple[int, Identity]] = []
    try:
        for pid, start in pids:  # descriptors first: every object one shows is sized exactly
            found, disk = _descriptors(pid, disk_devices, devices, budget)
            if _same_process(pid, start):
                for identity, size in found.items():
                    sizes[identity] = max(size, sizes.get(identity, 0))
                on_disk |= disk
        may_stat_maps = True
        for pid, start in pids:
            mappings = _mappings(pid, devices, disk_devices, budget)
            if not _same_process(pid, start):
                continue
            for mapping in mappings:
                identity = mapping.identity
                if identity in on_disk:
                    continue
                if mapping.on_disk:
                    disk_mapped.add(identity)
                else:
                    mapped.append((pid, identity))
                if identity in sizes:
                    continue
                if may_stat_maps and identity not in extents:
                    try:
                        info = os.stat(f"/proc/{pid}/map_files/{mapping.range}")  # a stat, never an open
                    except PermissionError:
                        may_stat_maps = False  # not root: the kernel refuses them all
                    except OSError:
                        pass  # unmapped meanwhile: sized by its extent
                    else:
                        if (info.st_dev, info.st_ino) == identity:
                            if info.st_nlink == 0:
                                sizes[identity] = getattr(info, "st_blocks", 0) * 512
                            else:
                                on_disk.add(identity)  # linked after all (a name ending " (deleted)")
                            continue
                extents[identity] = max(mapping.extent, extents.get(identity, 0))
    except _Over as exc:
        held.over = str(exc)
    for identity in sizes:
        extents.pop(identity, None)
    disk_mapped -= on_disk  # a name ending " (deleted)" that the map_files stat found linked
    disk_sizes = [sizes.pop(identity) if identity in sizes else extents.pop(identity, 0) for identity in disk_mapped]
    held.disk_bytes, held.disk_objects = sum(disk_sizes), len(disk_sizes)
    held.bytes = sum(sizes.values()) + sum(extents.values())
    held.objects = len(sizes) + len(extents)
    held.estimated = len(extents)
    held.mapped_by = {pid for pid, identity in mapped if identity in sizes or identity in extents}
    return held


def devices_of(folders: Iterable[Path]) -> frozenset[int]:
    """The file systems the folders given are on (``lstat``: no link followed), whose deleted files held
    open the disk walk counts."""
    found = set()
    for folder in folders:
        try:
            found.add(os.lstat(folder).st_dev)
        except OSError:
            continue
    return frozenset(found)


def _same_process(pid: int, start: int | None) -> bool:
    return start is None or sandbox.process_start(pid) == start


def _descriptors(pid: int, disk_devices: frozenset[int], devices: _MemoryDevices,
                 budget: _Budget) -> tuple[dict[Identity, int], set[Identity]]:
    """What ``pid``'s descriptors hold: memory objects with their allocated bytes, and the deleted files
    the disk walk counts."""
    found: dict[Identity, int] = {}
    disk: set[Identity] = set()
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # gone, or not ours to look at
        return found, disk
    for name in names:
        budget.fds += 1
        if budget.fds > budget.max_fds:
            raise _Over(f"its processes held more than {budget.max_fds} open files")
        path = f"/proc/{pid}/fd/{name}"
        try:
            link = os.readlink(path)
        except OSError:  # closed meanwhile
            continue
        memfd = link.startswith(_MEMFD)
        if not memfd and not link.endswith(_DELETED):
            continue
        try:
            info = os.stat(path)  # the open file itself, through the magic link: a stat, never an open
        except OSError:
            continue
        if not stat.S_ISREG(info.st_mode) or info.st_nlink:
            continue
        identity = (info.st_dev, info.st_ino)
        if info.st_dev in disk_devices:
            disk.add(identity)
        elif memfd or devices.memory(pid, info.st_dev):
            found[identity] = getattr(info, "st_blocks", 0) * 512
    return found, disk


def _mappings(pid: int, devices: _MemoryDevices, disk_devices: frozenset[int], budget: _Budget) -> list[_Mapping]:
    """``pid``'s mappings of deleted files on a memory file system or else on one of ``disk_devices``,
    read from its maps in bounded chunks."""
    found: list[_Mapping] = []
    try:
        handle = open(f"/proc/{pid}/maps", "rb")  # noqa: SIM115 (read in chunks below)
    except OSError:
        return found
    with handle:
        carry = b""
        while True:
            try:
                chunk = handle.read(_CHUNK)
            except OSError:  # ended mid-read
                break
            if not chunk:
                break
            budget.maps_bytes += len(chunk)
            if budget.maps_bytes > budget.max_maps_bytes:
                raise _Over(f"its processes' memory maps ran past {budget.max_maps_bytes >> 20} MB")
            data = carry + chunk
            cut = data.rfind(b"\n") + 1
            carry, data = data[cut:], data[:cut]
            for match in _DELETED_MAPPING.finditer(data):
                budget.mappings += 1
                if budget.mappings > budget.max_mappings:
                    raise _Over(f"its processes mapped more than {budget.max_mappings} deleted files")
                begin, end, offset, major, minor, inode, path = match.groups()
                if int(inode) == 0:
                    continue
                device = os.makedev(int(major, 16), int(minor, 16))
                memory = path.startswith(_MEMFD.encode()) or devices.memory(pid, device)
                on_disk = not memory and device in disk_devices  # a memory file system's stays memory
                if not (memory or on_disk):
                    continue
                low, high = int(begin, 16), int(end, 16)
                found.append(_Mapping((device, int(inode)), f"{low:x}-{high:x}", int(offset, 16) + high - low,
                                      on_disk))
    return found


class _MemoryDevices:
    """Which devices are memory file systems, as the mount namespace of a process sees them (read once
    per namespace and measure), plus the kernel's internal one (memfds, shared anonymous memory)."""

    def __init__(self) -> None:
        self._by_namespace: dict[str, frozenset[int]] = {}

    def memory(self, pid: int, device: int) -> bool:
        if device == _internal_shmem_device():
            return True
        try:
            namespace = os.readlink(f"/proc/{pid}/ns/mnt")
        except OSError:
            namespace = f"pid {pid}"
        if namespace not in self._by_namespace:
            self._by_namespace[namespace] = _memory_devices(pid)
        return device in self._by_namespace[namespace]


def _memory_devices(pid: int) -> frozenset[int]:
    """The devices of the memory file systems mounted in ``pid``'s mount namespace (its mountinfo, which
    the kernel writes: ``ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [TAGS] - TYPE SOURCE OPTIONS``)."""
    try:
        with open(f"/proc/{pid}/mountinfo", "rb") as handle:
            text = handle.read(_MOUNTINFO_BYTES)
    except OSError:
        return frozenset()
    found = set()
    for line in text.splitlines():
        mount, separator, rest = line.partition(b" - ")
        fields = mount.split()
        if not separator or len(fields) < 3 or rest.split(b" ", 1)[0] not in MEMORY_FILE_SYSTEMS:
            continue
        major, _, minor = fields[2].partition(b":")
        try:
            found.add(os.makedev(int(major), int(minor)))
        except ValueError:
            continue
    return frozenset(found)


@functools.cache
def _internal_shmem_device() -> int | None:
    """The device of the kernel's internal shared-memory mount, from a memfd of our own."""
    try:
        fd = os.memfd_create("pikeh-probe", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        return None
    try:
        return os.fstat(fd).st_dev
    finally:
        os.close(fd)
