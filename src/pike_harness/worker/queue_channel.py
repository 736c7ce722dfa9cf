"""The directory channel between evaluators and eval workers: files in a shared folder, nothing else.

Files because a GPU host, a container without a network, or a Slurm node that shares only a file
system with the login node can all serve evaluations through them. The rules that make it safe:

* Every message is written to a hidden temporary name, flushed, and renamed into place (rename is
  atomic on POSIX file systems and NFS), so nobody ever reads half a message. Readers skip names
  that start with a dot.
* A worker takes a request by renaming it into its own ``claimed/<worker>/`` folder: of two workers
  racing for one request, exactly one rename succeeds.
* A request's name carries its attempt number. When a worker dies holding requests (killed, its
  node lost, or killed by the candidate it was evaluating), whoever notices first renames them back
  to ``requests/`` with the attempt number raised, or to ``failed/`` once ``max_attempts`` workers
  died on one: a candidate that kills its worker cannot stall the queue for ever.
* Tickets are unique per submission (time, host session, counter), so a result names exactly one
  submission; a result for a ticket its host no longer waits for (a late answer from a worker that
  was presumed dead, a leftover from an earlier run) is recognised and dropped, never mistaken for
  a new one.
* Liveness comes from heartbeats whose counter must keep changing, judged by the observer's own
  clock, so clocks of different nodes never need to agree (the rule is ``liveness``'s, shared with
  Ray). A heartbeat that cannot be read for a moment (a partial write, an NFS hiccup) is no news,
  never a death: only one that stands still for the whole window is.
* A live worker cannot hold a request for ever either: past the request's own stage limits plus a
  grace (``liveness.HoldTimer``) the worker lists it as overdue in its heartbeat and gives it back,
  counted as an attempt; an observer that sees the list gives it back if the worker does not.
* With a shared key, requests and results carry an HMAC, so a candidate that can write into the
  folder (inside a container it can) still cannot forge a verdict.
* Nothing in the folder is trusted to be what it is named. The root is opened once; every sub-folder
  is reached from that descriptor, each part opened without following a link, anew for each
  operation, and every file is opened, created, renamed and deleted relative to its folder's
  descriptor (``Folder``): a sub-folder a candidate replaced by a link is refused (``PlantedEntry``),
  never followed to a folder of the host. Whatever a file holds, reading it either returns a
  message or raises ValueError (``read_json``), so a planted file is set aside, never a crash.

Layout of IO_DIR (docs/containers.md has the message formats)::

    requests/<ticket>.a<N>.json          pending; N = workers that died holding it so far
    claimed/<worker>/<ticket>.a<N>.json  taken by a worker
    results/<ticket>.json                the verdict (or an error), written by the worker
    failed/<ticket>.a<N>.json            given up: N workers died holding it
    workers/<worker>.json                heartbeats
    hosts/<session>.json                 host sessions that still want results
    bad/                                 messages that failed authentication or parsing

Standard library only: the worker service and the host's ``queue``/``docker`` evaluators import it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import hmac
import json
import os
import re
import secrets
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pike_harness.worker.channel import MAX_MESSAGE_BYTES
from pike_harness.worker.supervise import trusted_files
from pike_harness.worker.supervise.liveness import BeatWatch

PROTOCOL = "pikeh-queue/1"
FOLDERS = ("requests", "claimed", "results", "failed", "workers", "hosts", "bad")
_TICKET = re.compile(r"^(\d{13}-[0-9a-f]{10}-\d{6})$")
_REQUEST = re.compile(r"^(\d{13}-[0-9a-f]{10}-\d{6})\.a(\d+)\.json$")
_RESULT = re.compile(r"^(\d{13}-[0-9a-f]{10}-\d{6})\.json$")
_WORKER_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
# Heartbeats and engine figures are small; the host reads them twice a second, so a planted giant is
# refused at this size rather than parsed over and over.
HEARTBEAT_BYTES = 1 << 20


class ChannelError(Exception):
    """The folder cannot serve as a channel (missing, not writable, or a clash of worker ids)."""


# -- names -------------------------------------------------------------------------------------------

def new_session() -> str:
    """A host session's id: ten hex digits, unique enough among the hosts sharing a folder."""
    return secrets.token_hex(5)


def new_ticket(session: str, counter: int) -> str:
    """Millisecond time first, so workers that sort names serve requests first come, first served."""
    return f"{int(time.time() * 1000):013d}-{session}-{counter % 1_000_000:06d}"


def ticket_session(ticket: str) -> str:
    return ticket.split("-")[1]


def request_name(ticket: str, attempt: int) -> str:
    return f"{ticket}.a{attempt}.json"


def parse_request_name(name: str) -> tuple[str, int] | None:
    """``(ticket, attempt)`` for a request file name; None for anything else (temporary files...)."""
    match = _REQUEST.match(name)
    return (match.group(1), int(match.group(2))) if match else None


def result_name(ticket: str) -> str:
    return f"{ticket}.json"


def parse_result_name(name: str) -> str | None:
    match = _RESULT.match(name)
    return match.group(1) if match else None


def is_ticket(value: Any) -> bool:
    return isinstance(value, str) and bool(_TICKET.match(value))


def check_worker_id(worker_id: str) -> str:
    """Worker ids become file names: letters, digits, ``_ . -``, at most 128 characters."""
    if not _WORKER_ID.match(worker_id or ""):
        raise ChannelError(f"bad worker id {worker_id!r}: use letters, digits, '_', '.' and '-' (at most 128)")
    return worker_id


def default_worker_id() -> str:
    """``<host>-<pid>``: unique among running workers; a restarted worker finds its predecessor's
    requests through the predecessor's heartbeat, not through a shared id."""
    host = re.sub(r"[^A-Za-z0-9_.-]", "-", socket.gethostname())[:80] or "worker"
    return check_worker_id(f"{host}-{os.getpid()}")


# -- the folder --------------------------------------------------------------------------------------

class PlantedEntry(NotADirectoryError):
    """A folder of the channel is a link, a file or anything but a real folder: refused, never followed.

    Inside a container a candidate can rename ``/io/requests`` away and put a link in its place; on the
    host that link would name a folder of the user's. A ``NotADirectoryError`` (so an ``OSError``): every
    caller's handling of a folder it cannot use applies, and ``names`` lists nothing in it."""

    def __str__(self) -> str:
        return str(self.strerror)


def _open_dir(name: str, dir_fd: int | None, shown: Any) -> int:
    """A descriptor of the folder ``name`` (relative to ``dir_fd``), its last component never followed."""
    try:
        return os.open(name, trusted_files.DIRECTORY_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PlantedEntry(exc.errno, f"{shown} is a link or not a folder: refused") from None
        raise


class _RootHandle:
    """The queue folder's descriptor, opened once and shared by the threads of one ``QueueDir``."""

    def __init__(self) -> None:
        self.fd: int | None = None
        self.lock = threading.Lock()

    def __del__(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self.fd)


@dataclass(frozen=True)
class QueueDir:
    """The channel's folder and its sub-folders.

    The root is opened once (``root_fd``): links in the path the user gave are followed then, once,
    and never again. Every sub-folder is a ``Folder``, reached from that descriptor, each part opened
    without following a link, anew for every operation: a sub-folder that a candidate replaced by a
    link is refused, never followed, and nothing is ever opened, renamed or deleted by a path that
    runs through the folder."""

    root: Path
    _handle: _RootHandle = field(default_factory=_RootHandle, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root).absolute())

    def root_fd(self) -> int:
        """The root's descriptor (kept open while this object lives); FileNotFoundError while it is missing."""
        handle = self._handle
        with handle.lock:
            if handle.fd is None:
                handle.fd = _open_dir(os.path.realpath(self.root), None, self.root)
            return handle.fd

    def folder(self, *parts: str) -> Folder:
        return Folder(self, tuple(parts))

    @property
    def requests(self) -> Folder:
        return self.folder("requests")

    @property
    def claimed(self) -> Folder:
        return self.folder("claimed")

    @property
    def results(self) -> Folder:
        return self.folder("results")

    @property
    def failed(self) -> Folder:
        return self.folder("failed")

    @property
    def workers(self) -> Folder:
        return self.folder("workers")

    @property
    def hosts(self) -> Folder:
        return self.folder("hosts")

    @property
    def bad(self) -> Folder:
        return self.folder("bad")

    def ensure(self) -> QueueDir:
        """Create the folders (private to this user where they are new); fail clearly where we cannot
        (a sub-folder that is a link or a file included)."""
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            for name in FOLDERS:
                with self.folder(name).open(create=True):
                    pass
            writable = os.access("requests", os.W_OK | os.X_OK, dir_fd=self.root_fd())
        except OSError as exc:
            raise ChannelError(f"cannot use {self.root} as the queue folder: {exc.strerror or exc}") from None
        if not writable:
            raise ChannelError(f"the queue folder {self.root} is not writable by this user")
        return self

    def claim_folder(self, worker_id: str) -> Folder:
        return self.folder("claimed", check_worker_id(worker_id))


@dataclass(frozen=True)
class Folder:
    """A folder of the channel, named by its parts below the root and reached only through descriptors.

    ``open()`` walks from the root's descriptor, each part opened without following a link (a real
    folder or a ``PlantedEntry``), so a folder renamed away and replaced by a link is never followed;
    a descriptor held while a candidate renames the folder keeps naming that folder, which stays
    inside the queue folder. ``path`` (and ``/``, ``os.fspath``) are for messages and for tests:
    trusted code never opens anything by them."""

    qdir: QueueDir
    parts: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.parts or any(not p or "/" in p or p in (".", "..") for p in self.parts):
            raise ValueError(f"bad folder parts {self.parts!r}")

    @property
    def path(self) -> Path:
        return self.qdir.root.joinpath(*self.parts)

    @property
    def name(self) -> str:
        return self.parts[-1]

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    def __truediv__(self, name: str) -> Path:
        return self.path / name

    def sub(self, name: str) -> Folder:
        return Folder(self.qdir, (*self.parts, name))

    @contextlib.contextmanager
    def open(self, *, create: bool = False) -> Iterator[int]:
        """A descriptor of this folder for the ``dir_fd`` calls (closed on leaving); ``create``: make
        missing parts (never over something that is there). FileNotFoundError when a part is missing."""
        current = self.qdir.root_fd()
        owned = False
        try:
            for depth, part in enumerate(self.parts, 1):
                shown = self.qdir.root.joinpath(*self.parts[:depth])
                try:
                    child = _open_dir(part, current, shown)
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, 0o700, dir_fd=current)
                    child = _open_dir(part, current, shown)
                if owned:
                    os.close(current)
                current, owned = child, True
            yield current
        finally:
            if owned:
                os.close(current)


Where = Folder | os.PathLike | str


@contextlib.contextmanager
def _opened(where: Where, *, create: bool = False) -> Iterator[int]:
    """A folder's descriptor: a ``Folder`` through the root's descriptor; a plain path (tests, tools,
    folders outside a queue) with its own links followed but its last component never."""
    if isinstance(where, Folder):
        with where.open(create=create) as fd:
            yield fd
        return
    fd = _open_dir(os.fspath(where), None, where)
    try:
        yield fd
    finally:
        os.close(fd)


def _shown(where: Where) -> Path:
    return where.path if isinstance(where, Folder) else Path(where)


def names(folder: Where) -> list[str]:
    """Sorted message names in ``folder`` (hidden temporary files left out); [] when it is missing
    or is not a folder (a link planted in its place is never followed)."""
    try:
        with _opened(folder) as fd:
            return sorted(n for n in os.listdir(fd) if not n.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []


def write_atomic(folder: Where, name: str, data: bytes, *, fsync: bool = True) -> Path:
    """Write ``data`` to ``folder/name`` so that readers see all of it or nothing.

    The flush before the rename is what makes this hold on network file systems too: NFS gives
    close-to-open consistency, so a reader that opens the renamed file sees the flushed bytes. The
    temporary file is new (``O_EXCL``, never a write through a planted link) and everything happens
    relative to the folder's descriptor. A missing folder is made again; a link in its place is refused.
    """
    tmp = f".{name}.{secrets.token_hex(4)}.tmp"
    with _opened(folder, create=True) as dir_fd:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | trusted_files.BASE_FLAGS, 0o600, dir_fd=dir_fd)
        try:
            try:
                trusted_files.write_all(fd, data)
                if fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=dir_fd)
            raise
    return _shown(folder) / name


def write_json(folder: Where, name: str, message: dict[str, Any], *, fsync: bool = True) -> Path:
    return write_atomic(folder, name, json.dumps(message, sort_keys=True).encode(), fsync=fsync)


def read_json(where: Where, name: str | None = None, *, max_bytes: int = MAX_MESSAGE_BYTES) -> dict[str, Any] | None:
    """The message ``name`` in the folder ``where`` (or, without ``name``, the file at the path
    ``where``); None if it is gone. Raises ValueError, and nothing else, for anything that is not one.

    Read as a trusted process reads a file in a folder others may write (in the docker evaluator
    without bubblewrap a candidate can write the queue folder): never through a link, never blocking on
    a FIFO, at most ``max_bytes`` (a link to /dev/zero would otherwise be read without end). Whatever
    the file holds (JSON nested 100,000 deep, digits without end, bytes that are no text), reading it
    fails as a ValueError: a planted file is a bad message, never the crash of the process reading it."""
    try:
        data = _read_message(where, name, max_bytes)
        if data is None:
            return None
        message = json.loads(data)
    except Exception as exc:  # noqa: BLE001 - RecursionError, MemoryError... all mean "not a message"
        raise ValueError(f"{type(exc).__name__}: {str(exc)[:300]}") from None
    if not isinstance(message, dict):
        raise ValueError("not a JSON object")
    return message


def _read_message(where: Where, name: str | None, max_bytes: int) -> bytes | None:
    try:
        if name is None:
            try:
                return trusted_files.read_regular(where, max_bytes)
            except trusted_files.UntrustedFile:
                if not os.path.lexists(where):
                    return None
                raise
        with _opened(where) as dir_fd:
            try:
                return trusted_files.read_regular(name, max_bytes, dir_fd=dir_fd)
            except trusted_files.UntrustedFile:
                if not _exists(dir_fd, name):
                    return None
                raise
    except FileNotFoundError:  # the folder itself is gone
        return None


def _exists(dir_fd: int, name: str) -> bool:
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


def exists(folder: Where, name: str) -> bool:
    """Whether ``folder/name`` is there (whatever it is: nothing is followed); False when the folder is
    missing, PlantedEntry when it is a link."""
    try:
        with _opened(folder) as fd:
            return _exists(fd, name)
    except FileNotFoundError:
        return False


def remove(folder: Where, name: str) -> None:
    """Delete the file ``folder/name`` (a link itself, never what it names); nothing when it is gone."""
    with contextlib.suppress(FileNotFoundError), _opened(folder) as fd:
        os.unlink(name, dir_fd=fd)


def move(source: Where, name: str, target: Where, new_name: str, *, create: bool = False) -> None:
    """Rename ``source/name`` to ``target/new_name`` (a link is moved as a link); FileNotFoundError when
    it is gone. ``create``: make ``target`` if it is missing."""
    with _opened(source) as src, _opened(target, create=create) as dst:
        os.rename(name, new_name, src_dir_fd=src, dst_dir_fd=dst)


def quarantine(qdir: QueueDir, folder: Where, name: str, why: str) -> None:
    """Move a message nobody should act on into ``bad/`` with a note, for a human to look at."""
    stamp = f"{int(time.time())}-{secrets.token_hex(3)}"
    with contextlib.suppress(OSError):
        move(folder, name, qdir.bad, f"{name}.{stamp}", create=True)
        write_atomic(qdir.bad, f"{name}.{stamp}.why", why.encode(), fsync=False)


# -- authentication ----------------------------------------------------------------------------------

def _canonical(message: dict[str, Any]) -> bytes:
    return json.dumps({k: v for k, v in message.items() if k != "mac"}, sort_keys=True,
                      separators=(",", ":")).encode()


def sign(message: dict[str, Any], key: bytes | None) -> dict[str, Any]:
    """Add an HMAC-SHA256 of the message under ``key`` (nothing without a key)."""
    if key:
        message["mac"] = hmac.new(key, _canonical(message), hashlib.sha256).hexdigest()
    return message


def verified(message: dict[str, Any], key: bytes | None) -> bool:
    """True without a key; with one, only for a message signed with it."""
    if not key:
        return True
    mac = message.get("mac")
    try:
        expected = hmac.new(key, _canonical(message), hashlib.sha256).hexdigest()
    except Exception:  # noqa: BLE001 - a message too deep to serialise again is not signed by us
        return False
    return isinstance(mac, str) and hmac.compare_digest(mac, expected)


def read_key(path: Path) -> bytes:
    """A shared key from a file: its bytes, surrounding whitespace removed; at least 16 of them."""
    try:
        key = Path(path).read_bytes().strip()
    except OSError as exc:
        raise ChannelError(f"cannot read the key file {path}: {exc.strerror or exc}") from None
    if len(key) < 16:
        raise ChannelError(f"the key in {path} is too short: use at least 16 random bytes "
                           "(e.g. `head -c 32 /dev/urandom | base64 > KEYFILE`)")
    return key


# -- requests: take, give back ------------------------------------------------------------------------

def claim(qdir: QueueDir, name: str, worker_id: str) -> Path | None:
    """Take ``requests/name`` for ``worker_id``; None when another worker was faster. The path returned
    is for messages: the claim is ``qdir.claim_folder(worker_id)`` and ``name``.

    A worker that a peer once judged dead (a missed heartbeat) finds its claim folder removed; it
    makes it again, or it would never take work again while still looking alive.
    """
    folder = qdir.claim_folder(worker_id)
    try:
        move(qdir.requests, name, folder, name, create=True)
    except FileNotFoundError:
        return None
    return folder / name


def release_claims(qdir: QueueDir, worker_id: str, *, died: bool, max_attempts: int) -> list[str]:
    """Give back everything ``worker_id`` holds; return the new names.

    ``died``: the worker died holding them, which counts as an attempt; a request that reaches
    ``max_attempts`` goes to ``failed/`` (its host reports it) instead of back to the queue. A worker
    that stops cleanly gives its requests back without counting.
    """
    if not _WORKER_ID.match(worker_id):
        return []
    folder = qdir.claim_folder(worker_id)
    return _release_all(qdir, folder, names(folder), died=died, max_attempts=max_attempts)


def _release_all(qdir: QueueDir, folder: Folder, claims: list[str], *, died: bool, max_attempts: int) -> list[str]:
    """``release_claim`` for each name; one that cannot be moved (a target folder replaced by a link)
    stays where it is and does not keep the others."""
    moved = []
    for name in claims:
        with contextlib.suppress(OSError):
            moved.append(release_claim(qdir, folder, name, died=died, max_attempts=max_attempts))
    return [m for m in moved if m is not None]


def release_claim(qdir: QueueDir, folder: Folder, name: str, *, died: bool, max_attempts: int) -> str | None:
    """Give back the request ``name`` claimed in ``folder`` (see ``release_claims``); its new name, None
    if it was gone."""
    parsed = parse_request_name(name)
    if parsed is None:
        return None
    ticket, attempt = parsed
    attempt += 1 if died else 0
    target = qdir.failed if attempt >= max_attempts else qdir.requests
    new_name = request_name(ticket, attempt)
    try:
        move(folder, name, target, new_name)
    except FileNotFoundError:
        return None  # someone else gave it back first
    return f"{target.name}/{new_name}"


def remove_claim_folder(qdir: QueueDir, worker_id: str) -> None:
    if not _WORKER_ID.match(worker_id):
        return
    with contextlib.suppress(OSError), qdir.claimed.open() as fd:
        os.rmdir(worker_id, dir_fd=fd)


# -- hosts --------------------------------------------------------------------------------------------

def register_host(qdir: QueueDir, session: str, info: dict[str, Any]) -> None:
    write_json(qdir.hosts, f"{session}.json", {"protocol": PROTOCOL, "session": session, **info})


def unregister_host(qdir: QueueDir, session: str) -> None:
    remove(qdir.hosts, f"{session}.json")


def host_waiting(qdir: QueueDir, session: str) -> bool:
    """Whether the host session that sent a request still wants its result (it deletes its file on
    close). True when ``hosts/`` cannot be looked into (a link planted in its place): that is no sign
    the host has gone, and its requests must not be dropped for it."""
    try:
        return exists(qdir.hosts, f"{session}.json")
    except PlantedEntry:
        return True


def sweep_orphans(qdir: QueueDir, min_age_s: float = 60.0) -> int:
    """Delete results and given-up requests whose host session has gone, once ``min_age_s`` old.

    They are answers nobody waits for any more (a host that crashed, a worker that finished after
    its host closed); a later session never mistakes them for its own, since tickets name sessions.
    """
    removed = 0
    now = time.time()
    for folder in (qdir.results, qdir.failed):
        for name in names(folder):
            ticket = parse_result_name(name) or (parse_request_name(name) or (None, 0))[0]
            if ticket is None or host_waiting(qdir, ticket_session(ticket)):
                continue
            with contextlib.suppress(OSError), folder.open() as fd:
                info = os.stat(name, dir_fd=fd, follow_symlinks=False)
                if now - info.st_mtime >= min_age_s and not stat.S_ISDIR(info.st_mode):
                    os.unlink(name, dir_fd=fd)
                    removed += 1
    return removed


# -- heartbeats and liveness ---------------------------------------------------------------------------

def _read_first_line(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.readline().strip()
    except OSError:
        return ""


def machine_identity() -> dict[str, str]:
    """What tells two processes they share a machine and a PID namespace, so a pid can be checked."""
    try:
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pidns = ""
    return {"host": socket.gethostname(), "boot_id": _read_first_line("/proc/sys/kernel/random/boot_id"),
            "pidns": pidns}


def pid_running(pid: int) -> bool:
    """Alive and not a zombie (a killed worker its parent has not reaped yet is dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = _read_first_line(f"/proc/{pid}/stat")  # "PID (name) STATE ...": the name may hold ')'
    state = stat[stat.rfind(")") + 2:][:1]
    return state not in ("Z", "X")


class Heartbeat:
    """A worker's heartbeat file: rewritten every beat with a new counter."""

    def __init__(self, qdir: QueueDir, worker_id: str, info: dict[str, Any]):
        self.qdir = qdir
        self.worker_id = check_worker_id(worker_id)
        self.epoch = secrets.token_hex(8)  # this incarnation; a restart with the same id gets another
        self.info = {**info, **machine_identity(), "pid": os.getpid()}
        self.seq = 0
        self._lock = threading.Lock()
        self.started = time.time()

    @property
    def name(self) -> str:
        return f"{self.worker_id}.json"

    @property
    def path(self) -> Path:
        """For messages and tests."""
        return self.qdir.workers / self.name

    def beat(self, **status: Any) -> None:
        with self._lock:
            self.seq += 1
            write_json(self.qdir.workers, self.name, {
                "protocol": PROTOCOL, "worker_id": self.worker_id, "epoch": self.epoch, "seq": self.seq,
                "time": time.time(), "started": self.started, "state": "running", **self.info, **status,
            }, fsync=False)

    def remove(self) -> None:
        with self._lock:
            remove(self.qdir.workers, self.name)


class Heartbeats(dict):
    """Worker id -> its latest readable heartbeat; ``unreadable`` holds the ids whose file was there
    but could not be read this time (mid-rewrite on a network file system, garbled by a candidate)."""

    def __init__(self, beats: dict[str, dict[str, Any]] | None = None, unreadable: set[str] | None = None):
        super().__init__(beats or {})
        self.unreadable = set(unreadable or ())


def read_heartbeats(qdir: QueueDir) -> Heartbeats:
    """Every worker's latest heartbeat; unreadable ones are noted, not dropped (see ``Liveness``)."""
    beats = Heartbeats()
    for name in names(qdir.workers):
        if not name.endswith(".json"):
            continue
        worker_id = name[:-5]
        if not _WORKER_ID.match(worker_id):
            continue  # no worker writes that name: nothing to judge, no claim folder it could name
        try:
            beat = read_json(qdir.workers, name, max_bytes=HEARTBEAT_BYTES)
        except (ValueError, OSError):
            beats.unreadable.add(worker_id)
            continue
        if beat is not None and beat.get("worker_id") == worker_id:
            beats[worker_id] = beat
    return beats


def remove_heartbeat(qdir: QueueDir, worker_id: str, epoch: Any) -> None:
    """Delete a dead worker's heartbeat, unless it was rewritten meanwhile by a new incarnation."""
    name = f"{worker_id}.json"
    try:
        current = read_json(qdir.workers, name, max_bytes=HEARTBEAT_BYTES)
    except (ValueError, OSError):
        return
    if current is not None and current.get("epoch") == epoch:
        with contextlib.suppress(OSError):
            remove(qdir.workers, name)


class Liveness:
    """Judges heartbeat files with the shared worker-death rule (``liveness.is_dead``).

    A worker is dead when it said so (``state: stopped``), when it ran on this machine in this PID
    namespace and its pid is gone, when its own clock says it last beat long ago (beyond any
    plausible clock skew), or when this observer has seen its counter stand still for
    ``stale_after_s``. A heartbeat that is unreadable or missing for a while is no news: the window
    runs on from the last beat seen, and a worker seen for the first time is presumed alive until
    a full window has passed.
    """

    def __init__(self, stale_after_s: float, *, clock: Callable[[], float] = time.monotonic):
        self.stale_after_s = stale_after_s
        self.watch = BeatWatch(stale_after_s, clock=clock)
        self._here = machine_identity()

    @property
    def clock(self) -> Callable[[], float]:
        return self.watch.clock

    def update(self, beats: dict[str, dict[str, Any]]) -> None:
        for worker_id, beat in beats.items():
            self.watch.saw(worker_id, (beat.get("epoch"), beat.get("seq")))
        for worker_id in getattr(beats, "unreadable", ()):
            self.watch.looked(worker_id)

    def looked(self, worker_id: str) -> None:
        """A sign that ``worker_id`` exists (its claim folder) without a readable heartbeat."""
        self.watch.looked(worker_id)

    def forget(self, worker_id: str) -> None:
        self.watch.forget(worker_id)

    def quiet_for(self, worker_id: str) -> float:
        return self.watch.quiet_for(worker_id)

    def is_alive(self, worker_id: str, beat: dict[str, Any] | None) -> bool:
        if beat is None:
            return not self.watch.is_dead(worker_id)
        same_machine = bool(self._here["pidns"]) and all(beat.get(k) == v for k, v in self._here.items())
        gone = same_machine and isinstance(beat.get("pid"), int) and not pid_running(beat["pid"])
        stamp = beat.get("time")
        age = time.time() - stamp if isinstance(stamp, int | float) else None
        return not self.watch.is_dead(worker_id, said_stopped=beat.get("state") == "stopped",
                                      process_gone=gone, beat_age_s=age)

    def split(self, beats: dict[str, dict[str, Any]]) -> tuple[dict[str, dict], dict[str, dict]]:
        """``(alive, dead)`` among ``beats`` (call ``update`` first)."""
        alive: dict[str, dict] = {}
        dead: dict[str, dict] = {}
        for worker_id, beat in beats.items():
            (alive if self.is_alive(worker_id, beat) else dead)[worker_id] = beat
        return alive, dead


def recover_dead_workers(qdir: QueueDir, liveness: Liveness, beats: dict[str, dict[str, Any]], *,
                         max_attempts: int, skip: str | None = None) -> list[str]:
    """Give back what dead workers held, and what live ones list as overdue; return what moved.

    Both workers and hosts call this, so a worker's death is repaired by whoever sees it first. A
    claim folder whose worker has no readable heartbeat counts as a dead worker's only once the
    shared rule says so (no beat seen for the whole window): a worker writes its heartbeat before it
    claims anything, so a folder that stays without one belongs to a worker that is gone, while a
    heartbeat unreadable for a moment belongs to a live one.
    """
    alive, dead = liveness.split(beats)
    moved: list[str] = []
    for worker_id, beat in dead.items():
        if worker_id == skip:
            continue
        moved += release_claims(qdir, worker_id, died=True, max_attempts=max_attempts)
        remove_heartbeat(qdir, worker_id, beat.get("epoch"))
        remove_claim_folder(qdir, worker_id)
        liveness.forget(worker_id)
    for worker_id, beat in alive.items():
        if worker_id != skip:
            moved += release_overdue(qdir, worker_id, beat, max_attempts=max_attempts)
    unread: set[str] = getattr(beats, "unreadable", set())
    for worker_id in set(names(qdir.claimed)) | set(unread):
        if worker_id in beats or worker_id == skip or not _WORKER_ID.match(worker_id):
            continue
        liveness.looked(worker_id)
        if liveness.is_alive(worker_id, None):
            continue
        moved += release_claims(qdir, worker_id, died=True, max_attempts=max_attempts)
        remove_claim_folder(qdir, worker_id)
        liveness.forget(worker_id)
    present = set(beats) | set(unread) | set(names(qdir.claimed))
    for worker_id in liveness.watch.known() - present:
        liveness.forget(worker_id)  # gone without a trace (stopped cleanly): nothing left to judge
    return moved


def release_overdue(qdir: QueueDir, worker_id: str, beat: dict[str, Any], *, max_attempts: int) -> list[str]:
    """Give back the requests a live worker's heartbeat lists as past their deadline (``overdue``):
    the worker does so itself, this is for a worker whose main loop is stuck while it still beats."""
    overdue = beat.get("overdue")
    if not isinstance(overdue, list) or not _WORKER_ID.match(worker_id):
        return []
    claims = [name for name in overdue if isinstance(name, str) and parse_request_name(name) is not None]
    return _release_all(qdir, qdir.claim_folder(worker_id), claims, died=True, max_attempts=max_attempts)


# -- polling -------------------------------------------------------------------------------------------

class Backoff:
    """Poll fast right after something happened, then slow down: 20 ms doubling up to 250 ms.

    PIKE polls once a second in each direction; a candidate's verdict here reaches its host within
    20-250 ms of being written, at the cost of a directory listing per poll.
    """

    def __init__(self, low_s: float = 0.02, high_s: float = 0.25):
        self.low_s, self.high_s = low_s, high_s
        self.delay = low_s

    def reset(self) -> None:
        self.delay = self.low_s

    def wait(self, event: threading.Event, progressed: bool) -> None:
        """Sleep, doubling the sleep while nothing happens; ``event`` (set) ends it early and resets it."""
        if progressed:
            self.delay = self.low_s
            return
        if event.wait(self.delay):
            self.delay = self.low_s
        else:
            self.delay = min(self.high_s, self.delay * 2)
