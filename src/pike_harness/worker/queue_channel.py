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
import hashlib
import hmac
import json
import os
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
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

@dataclass(frozen=True)
class QueueDir:
    """The channel's folder and its sub-folders."""

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root).absolute())

    @property
    def requests(self) -> Path:
        return self.root / "requests"

    @property
    def claimed(self) -> Path:
        return self.root / "claimed"

    @property
    def results(self) -> Path:
        return self.root / "results"

    @property
    def failed(self) -> Path:
        return self.root / "failed"

    @property
    def workers(self) -> Path:
        return self.root / "workers"

    @property
    def hosts(self) -> Path:
        return self.root / "hosts"

    @property
    def bad(self) -> Path:
        return self.root / "bad"

    def ensure(self) -> QueueDir:
        """Create the folders (private to this user where they are new); fail clearly where we cannot."""
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            for name in FOLDERS:
                (self.root / name).mkdir(exist_ok=True, mode=0o700)
        except OSError as exc:
            raise ChannelError(f"cannot use {self.root} as the queue folder: {exc.strerror or exc}") from None
        if not os.access(self.root / "requests", os.W_OK | os.X_OK):
            raise ChannelError(f"the queue folder {self.root} is not writable by this user")
        return self

    def claim_folder(self, worker_id: str) -> Path:
        return self.claimed / check_worker_id(worker_id)


def names(folder: Path) -> list[str]:
    """Sorted message names in ``folder`` (hidden temporary files left out); [] when it is missing
    or is not a folder."""
    try:
        return sorted(n for n in os.listdir(folder) if not n.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []


def write_atomic(folder: Path, name: str, data: bytes, *, fsync: bool = True) -> Path:
    """Write ``data`` to ``folder/name`` so that readers see all of it or nothing.

    The flush before the rename is what makes this hold on network file systems too: NFS gives
    close-to-open consistency, so a reader that opens the renamed file sees the flushed bytes.
    """
    target = folder / name
    tmp = folder / f".{name}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if fsync:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target


def write_json(folder: Path, name: str, message: dict[str, Any], *, fsync: bool = True) -> Path:
    return write_atomic(folder, name, json.dumps(message, sort_keys=True).encode(), fsync=fsync)


def read_json(path: Path) -> dict[str, Any] | None:
    """The message in ``path``; None if it is gone. Raises ValueError for something that is not one.

    Read as a trusted process reads a file in a folder others may write (in the docker evaluator
    without bubblewrap a candidate can write the queue folder): never through a link, never blocking on
    a FIFO, at most MAX_MESSAGE_BYTES (a link to /dev/zero would otherwise be read without end)."""
    try:
        data = trusted_files.read_regular(path, MAX_MESSAGE_BYTES)
    except trusted_files.UntrustedFile as exc:
        if not os.path.lexists(path):
            return None
        raise ValueError(str(exc)) from None
    message = json.loads(data)
    if not isinstance(message, dict):
        raise ValueError("not a JSON object")
    return message


def quarantine(qdir: QueueDir, path: Path, why: str) -> None:
    """Move a message nobody should act on into ``bad/`` with a note, for a human to look at."""
    stamp = f"{int(time.time())}-{secrets.token_hex(3)}"
    with contextlib.suppress(OSError):
        os.replace(path, qdir.bad / f"{path.name}.{stamp}")
        write_atomic(qdir.bad, f"{path.name}.{stamp}.why", why.encode(), fsync=False)


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
    expected = hmac.new(key, _canonical(message), hashlib.sha256).hexdigest()
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
    """Take ``requests/name`` for ``worker_id``; None when another worker was faster.

    A worker that a peer once judged dead (a missed heartbeat) finds its claim folder removed; it
    makes it again, or it would never take work again while still looking alive.
    """
    folder = qdir.claim_folder(worker_id)
    try:
        os.rename(qdir.requests / name, folder / name)
    except FileNotFoundError:
        if folder.is_dir() or not (qdir.requests / name).exists():
            return None
        folder.mkdir(parents=True, exist_ok=True)
        return claim(qdir, name, worker_id)
    return folder / name


def release_claims(qdir: QueueDir, worker_id: str, *, died: bool, max_attempts: int) -> list[str]:
    """Give back everything ``worker_id`` holds; return the new names.

    ``died``: the worker died holding them, which counts as an attempt; a request that reaches
    ``max_attempts`` goes to ``failed/`` (its host reports it) instead of back to the queue. A worker
    that stops cleanly gives its requests back without counting.
    """
    folder = qdir.claimed / worker_id
    moved = [release_claim(qdir, folder / name, died=died, max_attempts=max_attempts) for name in names(folder)]
    return [m for m in moved if m is not None]


def release_claim(qdir: QueueDir, claim: Path, *, died: bool, max_attempts: int) -> str | None:
    """Give back one claimed request (see ``release_claims``); its new name, None if it was gone."""
    parsed = parse_request_name(claim.name)
    if parsed is None:
        return None
    ticket, attempt = parsed
    attempt += 1 if died else 0
    target_dir = qdir.failed if attempt >= max_attempts else qdir.requests
    target = target_dir / request_name(ticket, attempt)
    try:
        os.rename(claim, target)
    except FileNotFoundError:
        return None  # someone else gave it back first
    return str(target.relative_to(qdir.root))


def remove_claim_folder(qdir: QueueDir, worker_id: str) -> None:
    with contextlib.suppress(OSError):
        os.rmdir(qdir.claimed / worker_id)


# -- hosts --------------------------------------------------------------------------------------------

def register_host(qdir: QueueDir, session: str, info: dict[str, Any]) -> None:
    write_json(qdir.hosts, f"{session}.json", {"protocol": PROTOCOL, "session": session, **info})


def unregister_host(qdir: QueueDir, session: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(qdir.hosts / f"{session}.json")


def host_waiting(qdir: QueueDir, session: str) -> bool:
    """Whether the host session that sent a request still wants its result (it deletes its file on close)."""
    return (qdir.hosts / f"{session}.json").exists()


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
            with contextlib.suppress(OSError):
                if now - (folder / name).stat().st_mtime >= min_age_s:
                    os.unlink(folder / name)
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
    def path(self) -> Path:
        return self.qdir.workers / f"{self.worker_id}.json"

    def beat(self, **status: Any) -> None:
        with self._lock:
            self.seq += 1
            write_json(self.qdir.workers, f"{self.worker_id}.json", {
                "protocol": PROTOCOL, "worker_id": self.worker_id, "epoch": self.epoch, "seq": self.seq,
                "time": time.time(), "started": self.started, "state": "running", **self.info, **status,
            }, fsync=False)

    def remove(self) -> None:
        with self._lock, contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


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
        try:
            beat = read_json(qdir.workers / name)
        except (ValueError, OSError):
            beats.unreadable.add(worker_id)
            continue
        if beat is not None and beat.get("worker_id") == worker_id:
            beats[worker_id] = beat
    return beats


def remove_heartbeat(qdir: QueueDir, worker_id: str, epoch: Any) -> None:
    """Delete a dead worker's heartbeat, unless it was rewritten meanwhile by a new incarnation."""
    path = qdir.workers / f"{worker_id}.json"
    try:
        current = read_json(path)
    except (ValueError, OSError):
        return
    if current is not None and current.get("epoch") == epoch:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


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
    if not isinstance(overdue, list):
        return []
    folder = qdir.claimed / worker_id
    moved = [release_claim(qdir, folder / name, died=True, max_attempts=max_attempts)
             for name in overdue if isinstance(name, str) and parse_request_name(name) is not None]
    return [m for m in moved if m is not None]


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
