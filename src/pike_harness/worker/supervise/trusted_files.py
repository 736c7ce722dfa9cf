"""Every file the trusted side reads, writes, copies or deletes where a candidate could have written.

A hostile candidate does not need to leave its sandbox to do harm: it can plant a link, a FIFO, a
socket or a 3,000-level tree in a folder it may write, and wait for the supervisor, the reference
process or the build cache to open, follow or recurse into it. So, on the trusted side, a file in
such a folder is only ever touched here, and only through:

* ``O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC`` opens, relative to a directory descriptor that was itself
  opened without following a link (a parent swapped for a link cannot redirect what comes next);
* ``fstat`` on the open descriptor: only a regular file (or, for folders, a directory) is used, so
  nothing is checked by one name and used by another (no race between check and use);
* ``O_EXCL`` for every file it creates (never a write through something already there);
* size caps and bounded reads (``/dev/zero``, a sparse terabyte or a growing file end in a cap);
* an iterative, descriptor-relative tree removal that never follows a link and never raises.

A file that lies (a link, FIFO, socket, device, something too big, a folder where a file should be)
raises ``UntrustedFile``: the caller turns it into the candidate's ``rejected`` verdict. Better still,
logs cross as descriptors the trusted side opened before the candidate started (``tail_fd``).
Standard library only (and ``text_safety``, itself so): the reference process imports this.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import secrets
import stat
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from pike_harness.worker import text_safety

BASE_FLAGS = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
DIRECTORY_FLAGS = os.O_RDONLY | os.O_DIRECTORY | BASE_FLAGS
CHUNK = 1 << 20
# Descriptors a removal keeps open down a deep tree; deeper levels are reached again through ".."
# (checked against the device and inode seen on the way down), so depth never exhausts descriptors.
REMOVAL_FDS = 64
PROBLEMS_KEPT = (
    20  # a removal reports at most this many problems (a tree of a million bad entries is one story)
)


class UntrustedFile(Exception):
    """A file in a folder a candidate can write is not what the trusted side made or expects: one line."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISLNK, "a link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def _refusal(name: str | os.PathLike, exc: OSError) -> UntrustedFile:
    """What an open refused with O_NOFOLLOW/O_NONBLOCK means, in words."""
    reasons = {
        errno.ELOOP: "is a link",
        errno.ENXIO: "is a socket or a FIFO without a reader",
        errno.EEXIST: "already exists (something was planted there)",
        errno.ENOTDIR: "is a link or not a folder",
        errno.EISDIR: "is a folder",
        errno.ENOENT: "is missing",
        errno.EACCES: "is not accessible",
        errno.EPERM: "is not accessible",
    }
    reason = reasons.get(exc.errno) if exc.errno is not None else None
    return UntrustedFile(f"{os.fspath(name)} {reason or f'cannot be opened ({exc.strerror})'}")


def open_directory(path: str | os.PathLike, *, dir_fd: int | None = None) -> int:
    """A descriptor of the folder ``path`` (its last component is never followed if it is a link)."""
    try:
        return os.open(path, DIRECTORY_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise _refusal(path, exc) from None


def open_regular(path: str | os.PathLike, *, dir_fd: int | None = None, max_bytes: int | None = None) -> int:
    """A read-only descriptor of the regular file ``path``, never a link, FIFO, socket or device, and
    no larger than ``max_bytes``. The caller closes it."""
    try:
        fd = os.open(path, os.O_RDONLY | BASE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise _refusal(path, exc) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UntrustedFile(f"{os.fspath(path)} is {_kind(info.st_mode)}, not a plain file")
        if max_bytes is not None and info.st_size > max_bytes:
            raise UntrustedFile(
                f"{os.fspath(path)} holds {info.st_size} bytes, over the {max_bytes}-byte cap"
            )
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str | os.PathLike, max_bytes: int, *, dir_fd: int | None = None) -> bytes:
    """The whole content of a regular file of at most ``max_bytes`` (a file growing meanwhile is cut there)."""
    fd = open_regular(path, dir_fd=dir_fd, max_bytes=max_bytes)
    try:
        return _read_up_to(fd, 0, max_bytes)
    finally:
        os.close(fd)


def _read_up_to(fd: int, offset: int, size: int) -> bytes:
    parts, done = [], 0
    while done < size:
        data = os.pread(fd, min(CHUNK, size - done), offset + done)
        if not data:
            break
        parts.append(data)
        done += len(data)
    return b"".join(parts)


def create_exclusive(
    path: str | os.PathLike, *, dir_fd: int | None = None, mode: int = 0o600, readable: bool = False
) -> int:
    """A write (``readable``: read-write) descriptor of a new regular file: fails (``UntrustedFile``)
    if anything is there already, a link included."""
    access = os.O_RDWR if readable else os.O_WRONLY
    try:
        return os.open(path, access | os.O_CREAT | os.O_EXCL | BASE_FLAGS, mode, dir_fd=dir_fd)
    except OSError as exc:
        raise _refusal(path, exc) from None


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def tail_fd(fd: int, chars: int) -> str:
    """The last ``chars`` characters of a log the trusted side holds open (the candidate's stdout/stderr,
    opened before it started): no path is involved, so nothing can be swapped in. Bounded read."""
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - chars * 4)
        data = _read_up_to(fd, start, size - start)
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")[-chars:]


def tail(path: str | os.PathLike, chars: int) -> str:
    """The last ``chars`` characters of a log file by path; '' when it is missing or not a plain file."""
    try:
        fd = open_regular(path)
    except UntrustedFile:
        return ""
    try:
        return tail_fd(fd, chars)
    finally:
        os.close(fd)


def copy_regular(source_fd: int, target_fd: int, max_bytes: int) -> str:
    """Copy from one open regular file to another while hashing; returns the sha256 of what was copied.

    A source that grows past ``max_bytes`` while being copied is refused: the copy is what was hashed.
    """
    digest, offset = hashlib.sha256(), 0
    while True:
        data = os.pread(source_fd, CHUNK, offset)
        if not data:
            return digest.hexdigest()
        offset += len(data)
        if offset > max_bytes:
            raise UntrustedFile(f"the file grew past the {max_bytes}-byte cap while it was copied")
        digest.update(data)
        write_all(target_fd, data)


def make_private_folder(parent_fd: int, prefix: str) -> tuple[str, int]:
    """A fresh folder with an unguessable name in the folder ``parent_fd``, and its descriptor.

    The name is new when it is made (``mkdir`` fails on anything already there), and the descriptor is
    opened without following a link: a folder swapped in between makes this fail, never redirect.
    """
    name = f"{prefix}{secrets.token_hex(8)}"
    try:
        os.mkdir(name, 0o700, dir_fd=parent_fd)
    except OSError as exc:
        raise _refusal(name, exc) from None
    fd = open_directory(name, dir_fd=parent_fd)
    return name, fd


_removals: dict[int, tuple[int, int]] = {}  # file system (st_dev) -> (removals begun or ended, in flight)
_removals_lock = threading.Lock()


def _removal(device: int, step: int) -> None:
    """A removal on ``device`` begins (``step`` 1) or ends (-1): ``removals_on``'s figures."""
    with _removals_lock:
        changes, in_flight = _removals.get(device, (0, 0))
        _removals[device] = (changes + 1, in_flight + step)


def removals_on(device: int) -> tuple[int, int]:
    """(how many removals, ``discard`` or ``remove_tree``, this process has begun or ended on the file
    system ``device``; how many are under way there now). Why: room that comes free there while the
    supervisor waits to see whether a killed candidate held it (``no_space.freed_since``) may be
    another evaluation's folder being removed, one begun before the wait included: a count that
    moved, or one under way, says the room cannot be told apart (audits, 2026-12-01)."""
    return _removals.get(device, (0, 0))


def discard(path: str | os.PathLike) -> str | None:
    """Remove one entry (a file, a link itself, or a whole tree) without following anything; the
    problem in words, or None. Never raises: a candidate's leftovers are never the harness's crash."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{os.fspath(path)}: {exc.strerror}"
    if stat.S_ISDIR(info.st_mode):
        problems = remove_tree(path)
        return "; ".join(problems) if problems else None
    _removal(info.st_dev, 1)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        return f"{os.fspath(path)}: {exc.strerror}"
    finally:
        _removal(info.st_dev, -1)
    return None


@dataclass
class _Level:
    """One folder on the way down: its name in its parent, identity, descriptor (None once closed to
    spare descriptors) and the subfolders still to remove."""

    name: str
    device: int
    inode: int
    fd: int | None
    pending: list[str]


def remove_tree(path: str | os.PathLike) -> list[str]:
    """Delete the folder ``path`` and everything in it; the problems met, in words ([] when all is gone).

    No recursion (a 3,000-level tree is a loop, not a stack), every entry relative to its folder's
    descriptor, links removed and never followed, folders the candidate made unreadable or read-only
    opened up first (only by descriptor), at most ``REMOVAL_FDS`` descriptors open however deep the
    tree is. Never raises.
    """
    path = os.fspath(path)
    try:
        device: int | None = os.lstat(path).st_dev
    except OSError:
        device = None
    if device is not None:
        _removal(device, 1)
    try:
        return _remove_tree(path)
    finally:
        if device is not None:
            _removal(device, -1)


def _remove_tree(path: str) -> list[str]:
    problems: list[str] = []
    parent, name = os.path.split(os.path.abspath(path))
    try:
        top_parent = open_directory(parent)
    except UntrustedFile as exc:
        return [] if not os.path.lexists(path) else [text_safety.printable(str(exc))]
    chain: list[_Level] = []
    try:
        _remove_below(top_parent, name, chain, problems)
    except Exception as exc:  # noqa: BLE001 - reported, never the harness's crash
        _note(problems, f"{path}: {type(exc).__name__}: {exc}")
    finally:
        for level in chain:  # left open only when something unexpected stopped the removal
            if level.fd is not None:
                os.close(level.fd)
        os.close(top_parent)
    return problems


def _note(problems: list[str], text: str) -> None:
    """Keep ``text`` escaped (``text_safety``): it names the candidate's files, and a result's
    ``environment["cleanup"]`` quotes it (a name read with surrogateescape, a control character)."""
    if len(problems) < PROBLEMS_KEPT:
        problems.append(text_safety.printable(text))


def _open_level(parent_fd: int, name: str, problems: list[str]) -> _Level | None:
    """Open the subfolder ``name`` for removal (after making it searchable if the candidate locked it)."""
    try:
        fd = os.open(name, DIRECTORY_FLAGS, dir_fd=parent_fd)
    except PermissionError:
        unlocked = _unlock_and_open(parent_fd, name, problems)
        if unlocked is None:
            return None
        fd = unlocked
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):  # swapped for a link or a file since it was listed
            _unlink(parent_fd, name, problems)
        else:
            _note(problems, f"{name}: {exc.strerror}")
        return None
    with contextlib.suppress(OSError):
        os.fchmod(fd, stat.S_IRWXU)  # entries of a read-only folder can then be removed
    info = os.fstat(fd)
    return _Level(name, info.st_dev, info.st_ino, fd, [])


def _unlock_and_open(parent_fd: int, name: str, problems: list[str]) -> int | None:
    """chmod a folder made unreadable, through a path descriptor that cannot be a link, then open it."""
    try:
        handle = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=parent_fd)
    except OSError as exc:
        _note(problems, f"{name}: {exc.strerror}")
        return None
    try:
        os.chmod(f"/proc/self/fd/{handle}", stat.S_IRWXU)
        return os.open(name, DIRECTORY_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        _note(problems, f"{name}: cannot be opened up: {exc.strerror}")
        return None
    finally:
        os.close(handle)


def _unlink(parent_fd: int, name: str, problems: list[str]) -> None:
    try:
        os.unlink(name, dir_fd=parent_fd)
    except FileNotFoundError:
        pass
    except OSError as exc:
        _note(problems, f"{name}: {exc.strerror}")


def _entries(fd: int) -> Iterator[os.DirEntry]:
    with os.scandir(fd) as listing:
        yield from listing


def _remove_below(top_parent: int, top_name: str, chain: list[_Level], problems: list[str]) -> None:
    """The removal loop; ``chain`` (empty on entry) holds the folders from the top down to the current one."""
    first = _open_level(top_parent, top_name, problems)
    if first is not None:
        chain.append(first)
    while chain:
        level = chain[-1]
        assert level.fd is not None  # only shallower levels are closed to spare descriptors
        if not level.pending:
            try:
                for entry in _entries(level.fd):
                    if entry.is_dir(follow_symlinks=False):
                        level.pending.append(entry.name)
                    else:
                        _unlink(level.fd, entry.name, problems)
            except OSError as exc:
                _note(problems, f"{level.name}: cannot be listed: {exc.strerror}")
            if level.pending:
                level.pending.insert(0, "")  # popped last: list once more after the subfolders are gone
        child_name = level.pending.pop() if level.pending else None
        if child_name:
            child = _open_level(level.fd, child_name, problems)
            if child is not None:
                chain.append(child)
                _spare_descriptors(chain)
            continue
        if child_name == "":  # the subfolders listed are done: one more look for late arrivals
            with contextlib.suppress(OSError):
                for entry in _entries(level.fd):
                    if entry.is_dir(follow_symlinks=False):
                        _note(
                            problems,
                            f"{level.name}/{entry.name}: appeared while the folder was being removed",
                        )
                    else:
                        _unlink(level.fd, entry.name, problems)
        chain.pop()
        parent_fd = chain[-1].fd if chain else top_parent
        if chain and parent_fd is None:
            parent_fd = _reopen_parent(level, chain[-1], problems)
        os.close(level.fd)
        if parent_fd is None:
            return  # reported: the tree moved under us; what is left stays
        try:
            os.rmdir(level.name, dir_fd=parent_fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            _note(problems, f"{level.name}: cannot be removed: {exc.strerror}")


def _spare_descriptors(chain: list[_Level]) -> None:
    """Keep at most ``REMOVAL_FDS`` levels open: the open ones are always the deepest (a level is
    reopened only from its child, on the way back up), so the one to close sits at a fixed distance."""
    if len(chain) > REMOVAL_FDS:
        level = chain[-REMOVAL_FDS - 1]
        if level.fd is not None:
            os.close(level.fd)
            level.fd = None


def _reopen_parent(child: _Level, parent: _Level, problems: list[str]) -> int | None:
    """The parent's descriptor again, through the child's "..", only if it is the folder seen going down."""
    assert child.fd is not None
    try:
        fd = os.open("..", DIRECTORY_FLAGS, dir_fd=child.fd)
    except OSError as exc:
        _note(problems, f"{parent.name}: cannot be reached again: {exc.strerror}")
        return None
    info = os.fstat(fd)
    if (info.st_dev, info.st_ino) != (parent.device, parent.inode):
        os.close(fd)
        _note(problems, f"{parent.name}: the tree was moved while it was being removed")
        return None
    parent.fd = fd
    return fd


def copy_tree(
    source_fd: int, target_fd: int, *, max_files: int, max_bytes: int, max_depth: int = 16
) -> tuple[int, int]:
    """Copy the folders and regular files below ``source_fd`` into the (empty) folder ``target_fd``;
    returns the entries (folders and files) and bytes copied.

    Links, FIFOs, sockets and devices are skipped, never followed or opened; every file is created
    with ``O_EXCL``. More than ``max_files`` entries, ``max_bytes`` bytes or ``max_depth`` levels
    raise ``UntrustedFile`` (what was copied so far stays: the caller discards the target). Bytes are
    apparent sizes (``st_size``): a sparse file counts (and is copied) in full, holes included.
    Iterative; at most ``2 * max_depth`` descriptors open.
    """
    files = total = 0
    stack: list[tuple[int, int, int, Iterator[os.DirEntry]]] = [
        (source_fd, target_fd, 0, _entries(source_fd))
    ]
    try:
        while stack:
            src, dst, depth, listing = stack[-1]
            entry = next(listing, None)
            if entry is None:
                stack.pop()
                if stack:  # the two descriptors this level opened
                    os.close(src)
                    os.close(dst)
                continue
            files += 1
            if files > max_files:
                raise UntrustedFile(f"more than {max_files} entries to copy")
            if entry.is_dir(follow_symlinks=False):
                if depth + 1 > max_depth:
                    raise UntrustedFile(f"folders nested deeper than {max_depth} levels")
                child_src = open_directory(entry.name, dir_fd=src)
                try:
                    os.mkdir(entry.name, 0o700, dir_fd=dst)
                    child_dst = open_directory(entry.name, dir_fd=dst)
                except BaseException:
                    os.close(child_src)
                    raise
                stack.append((child_src, child_dst, depth + 1, _entries(child_src)))
            elif entry.is_file(follow_symlinks=False):
                source = open_regular(entry.name, dir_fd=src, max_bytes=max_bytes - total)
                try:
                    target = create_exclusive(entry.name, dir_fd=dst, mode=0o600)
                    try:
                        copy_regular(source, target, max_bytes - total)
                        total += os.fstat(target).st_size
                    finally:
                        os.close(target)
                finally:
                    os.close(source)
        return files, total
    finally:
        for src, dst, _, _ in stack[1:]:
            os.close(src)
            os.close(dst)


def folder_of(path: str | os.PathLike) -> tuple[int, str]:
    """A descriptor of ``path``'s parent folder and its last component, for the ``dir_fd`` functions."""
    parent, name = os.path.split(os.path.abspath(os.fspath(path)))
    return open_directory(parent), name
