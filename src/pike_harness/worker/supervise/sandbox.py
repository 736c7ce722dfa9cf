"""The process sandbox a candidate runs in, seen from the supervisor's side.

A candidate is untrusted code written by a model that is rewarded for speed, so it runs in a fresh
process of its own session (its own process group), with a scrubbed environment, a scratch directory
as its home and working directory, and resource limits. What a same-user process sandbox cannot
enforce by itself (process counts for root, memory on CUDA where RLIMIT_AS breaks the driver,
descendants that leave the group) the supervisor polices by watching ``/proc`` and killing.
Standard library only.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import threading
import time
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pike_harness.worker.redaction import is_secret_name

# How every trusted Python subprocess starts (the reference process, the toolchain probe, builders):
# -P puts no working folder on sys.path and -s no user site folder (under HOME), so a pike_harness/,
# torch.py or .pth file planted where a candidate can write (the docker evaluator's /scratch without
# bubblewrap) never runs in a process that holds hidden inputs, reference outputs or cache keys.
TRUSTED_PYTHON = ("-s", "-P")

# Names that pass into a candidate's environment (exact, then prefixes). An allow-list: anything the
# harness's user exported (API keys, cloud credentials, tokens) stays out unless it is named here.
ALLOWED_NAMES = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV",
    "CONDA_PREFIX", "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "CUDNN_HOME", "CC", "CXX", "MAX_JOBS",
    "TORCH_CUDA_ARCH_LIST", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
})
ALLOWED_PREFIXES = ("LC_", "NVIDIA_", "CUDA_", "TRITON_", "TORCHINDUCTOR_", "NCCL_")
MARKER_ENV = "PIKEH_SANDBOX"
# Which harness process started a marked process ("pidns/pid/starttime"): an orphan names a dead owner.
OWNER_ENV = "PIKEH_SANDBOX_OWNER"


def scrubbed_environment(source: Mapping[str, str], overrides: Mapping[str, str]) -> dict[str, str]:
    """The candidate's environment: allowed names from ``source`` minus secrets, plus ``overrides``."""
    env = {}
    for name, value in source.items():
        allowed = name in ALLOWED_NAMES or name.startswith(ALLOWED_PREFIXES)
        if allowed and not is_secret_name(name):
            env[name] = value
    env.update(overrides)
    return env




@dataclass
class ProcessInfo:
    pid: int
    ppid: int
    session: int
    state: str
    rss_bytes: int
    start: int  # clock ticks after boot: with the pid, names one process for good
    threads: int = 1


_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _read_stat(pid: int) -> ProcessInfo | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read().decode("ascii", errors="replace")
    except OSError:
        return None
    # The command name may hold spaces and parentheses; the fields after the last ')' are fixed.
    fields = raw[raw.rfind(")") + 2:].split()
    try:
        return ProcessInfo(pid=pid, ppid=int(fields[1]), session=int(fields[3]), state=fields[0],
                           rss_bytes=int(fields[21]) * _PAGE, start=int(fields[19]), threads=int(fields[17]))
    except (IndexError, ValueError):
        return None


def _all_pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def await_environment(pid: int, timeout_s: float) -> bool:
    """Wait until a process we just started has an environment to read; False if ``timeout_s`` ran out.

    ``Popen`` returns once the child has closed its close-on-exec descriptors, which the kernel does
    before it sets up the new program's memory: for that moment ``/proc/PID/environ`` reads empty,
    so ``has_marker`` says no for a process that is ours (2 of 300 starts on a loaded 2-core VM).
    Whoever registers a process it just started waits for this first. A process that is gone ends
    the wait at once (there is nothing left to mark).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with open(f"/proc/{pid}/environ", "rb") as handle:
                if handle.read(1):
                    return True
        except OSError:
            return False
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.0005)


def has_marker(pid: int, marker: bytes) -> bool:
    """Whether ``pid`` carries ``marker`` (``NAME=value`` bytes) in its environment: not a reused pid."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return marker in handle.read().split(b"\0")
    except OSError:
        return False


def unique_memory_bytes(info: ProcessInfo) -> int:
    """Proportional set size (shared pages split among their sharers), else RSS.

    Summing RSS over a forked family counts copy-on-write pages once per process, so a dozen forks
    of a 1 GB CUDA process would look like 12 GB; PSS counts them once.
    """
    try:
        with open(f"/proc/{info.pid}/smaps_rollup", "rb") as handle:
            for line in handle:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return info.rss_bytes


def memory_bytes(members: Iterable[ProcessInfo], limit_bytes: int, *, less_shmem: Collection[int] = ()) -> int:
    """The members' memory as policing judges it against ``limit_bytes``: their PSS (``unique_memory_bytes``).

    RSS bounds PSS from above and comes free with the ``/proc`` scan, while ``smaps_rollup`` costs
    about 9 ms per process that holds torch (measured on the 2-core CPU VM, 2026-11-28), read four
    times a second per candidate. So while the RSS sum is within the limit, it is returned (the PSS
    sum is within it too); only above it is the PSS read.

    ``less_shmem``: pids whose shared-memory pages are left out (``RssShmem`` from their status, and
    ``Pss_Shmem`` where the PSS is read), because the objects they map are weighed whole beside this
    figure (``held_memory``): their touched pages would count twice. Where a figure cannot be read,
    nothing is left out.
    """
    members = list(members)
    rss = sum(max(0, info.rss_bytes - _fields(info.pid, b"status", (b"RssShmem:",)).get(b"RssShmem:", 0))
              if info.pid in less_shmem else info.rss_bytes for info in members)
    if rss <= limit_bytes:
        return rss
    return sum(_pss_less_shmem(info) if info.pid in less_shmem else unique_memory_bytes(info) for info in members)


def _pss_less_shmem(info: ProcessInfo) -> int:
    """``unique_memory_bytes`` less the shared-memory part of the PSS, from one read of ``smaps_rollup``."""
    found = _fields(info.pid, b"smaps_rollup", (b"Pss:", b"Pss_Shmem:"))
    if b"Pss:" not in found:
        return info.rss_bytes
    return max(0, found[b"Pss:"] - found.get(b"Pss_Shmem:", 0))


def _fields(pid: int, name: bytes, keys: tuple[bytes, ...]) -> dict[bytes, int]:
    """The ``KEY: N kB`` fields of ``/proc/PID/<name>`` asked for, in bytes; those unreadable left out."""
    found: dict[bytes, int] = {}
    try:
        with open(b"/proc/%d/%s" % (pid, name), "rb") as handle:
            for line in handle:
                key = line.split(b" ", 1)[0].split(b"\t", 1)[0]
                if key in keys:
                    found[key] = int(line.split()[1]) * 1024
                    if len(found) == len(keys):
                        break
    except (OSError, ValueError, IndexError):
        pass
    return found


def live_processes() -> list[ProcessInfo]:
    """One scan of ``/proc``: every live process. A zombie whose other threads still run counts as live
    (state ``Z``, ``threads`` above 1): its main thread exited (``syscall(SYS_exit)``), the rest of it
    runs, and what it forks has it for parent. Left out as a zombie, it and everything under it went
    unseen by every limit and by the quiet timing's stop (an audit, 2026-12-01); the supervisor now
    ends a candidate that holds one for seconds (``Evaluation._police``: a process exiting is in that
    state too, briefly)."""
    found = []
    for pid in _all_pids():
        info = _read_stat(pid)
        if info is not None and (info.state not in ("Z", "X") or info.threads > 1):
            found.append(info)
    return found


def descendants(roots: Iterable[int], processes: Iterable[ProcessInfo]) -> list[int]:
    """The pids of ``roots`` and of every live process descended from them (roots first)."""
    children: dict[int, list[int]] = {}
    for info in processes:
        children.setdefault(info.ppid, []).append(info.pid)
    found = list(dict.fromkeys(roots))
    seen, frontier = set(found), list(found)
    while frontier:
        for child in children.get(frontier.pop(), ()):
            if child not in seen:
                seen.add(child)
                found.append(child)
                frontier.append(child)
    return found


def tree_members(root: int, processes: Iterable[ProcessInfo]) -> list[ProcessInfo]:
    """``root``, the rest of its session, and everything descended from them, from one scan.

    For a sandboxed candidate ``root`` is the outer bwrap, whose child is the init of the sandbox's
    PID namespace: the kernel re-parents every orphan of a namespace to its init, so the descendants
    are exactly the namespace, whatever ``setsid()``, double forks or a cleared environment did.
    Unsandboxed, the session (and what its members still parent) is what is left to go by.
    """
    by_pid = {info.pid: info for info in processes}
    roots = [root, *(info.pid for info in by_pid.values() if info.session == root)]
    return [by_pid[pid] for pid in descendants(roots, by_pid.values()) if pid in by_pid]


class _ProcessTable:
    """One scan of /proc shared by every evaluation polling within ``max_age_s``.

    Each evaluation polices its candidate a few times a second; with dozens in flight, a scan each
    (hundreds of stat files) would keep a core busy on a GPU host, which is noise for the timing
    running beside it.
    """

    def __init__(self, max_age_s: float = 0.1):
        self.max_age_s = max_age_s
        self._lock = threading.Lock()
        self._taken = -1.0
        self._processes: list[ProcessInfo] = []

    def processes(self) -> list[ProcessInfo]:
        with self._lock:
            if time.monotonic() - self._taken > self.max_age_s:
                self._processes, self._taken = live_processes(), time.monotonic()
            return self._processes


_TABLE = _ProcessTable()


def sandbox_members(root: int, *, fresh: bool = False) -> list[ProcessInfo]:
    """Live processes of the sandbox started as ``root``: its PID namespace (``tree_members``).

    From a scan at most 0.1 s old (shared between evaluations); ``fresh`` scans now.
    """
    return tree_members(root, live_processes() if fresh else _TABLE.processes())


def session_members(session: int, *, fresh: bool = False) -> list[ProcessInfo]:
    """Live (non-zombie) processes of one session: the candidate and everything it started there."""
    processes = live_processes() if fresh else _TABLE.processes()
    return [info for info in processes if info.session == session]


def _marked(marker: bytes, session: int | None) -> list[int]:
    """Processes carrying this evaluation's marker, plus members of its session when ``session``.

    Descendants that left the session (``setsid``) still carry the marker in their environment.
    """
    own = os.getpid()
    found = []
    for pid in _all_pids():
        if pid == own:
            continue
        info = _read_stat(pid)
        if info is None or info.state in ("Z", "X"):
            continue
        if (session is not None and info.session == session) or has_marker(pid, marker):
            found.append(pid)
    return found


def process_start(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (clock ticks since boot): with the pid, one process for good."""
    info = _read_stat(pid)
    return info.start if info is not None else None


@functools.cache
def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return "unknown"


def marker_environment(marker: str) -> dict[str, str]:
    """The variables that tie a process we start to this evaluation and to this harness process.

    The owner names its pid namespace too: seen from the host, a containerised worker's pids mean
    other processes, so only owners in the sweeper's own namespace can be judged dead.
    """
    return {MARKER_ENV: marker, OWNER_ENV: f"{_pid_namespace()}/{os.getpid()}/{process_start(os.getpid())}"}


def _owner_gone(owner: str) -> bool:
    parts = owner.rsplit("/", 2)
    if len(parts) != 3 or parts[0] != _pid_namespace() or not parts[1].isdigit():
        return False
    return str(process_start(int(parts[1]))) != parts[2]


def _namespace_number() -> str:
    return "".join(ch for ch in _pid_namespace() if ch.isdigit()) or "0"


def owner_name() -> str:
    """This harness process for a file name: its pid namespace's number, pid and start time, joined by
    dots (``owner_name_gone``)."""
    return f"{_namespace_number()}.{os.getpid()}.{process_start(os.getpid())}"


def owner_name_gone(name: str) -> bool:
    """Whether the harness process ``owner_name`` named is gone: never for one of another pid namespace
    (a containerised harness sharing the host's ``/dev/shm``: its pids mean other processes here) or a
    name not of that form."""
    parts = name.split(".")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        return False
    return parts[0] == _namespace_number() and str(process_start(int(parts[1]))) != parts[2]


def sweep_orphans(*, rounds: int = 20) -> int:
    """SIGKILL marked processes whose harness is gone; returns how many were killed.

    Normally every candidate, builder and pre-started process dies with its evaluation. A harness
    killed with SIGKILL cannot clean up: its running children exit when their pipe closes, but the
    ones it had stopped for quiet timing (SIGSTOP) would sleep forever, holding GPU memory. An
    evaluator calls this when it starts; processes of a harness that is still running are left alone.
    """
    own = os.getpid()
    killed: set[int] = set()
    for _ in range(rounds):
        found = []
        for pid in _all_pids():
            if pid == own or pid in killed:
                continue
            try:
                with open(f"/proc/{pid}/environ", "rb") as handle:
                    entries = handle.read().split(b"\0")
            except OSError:
                continue
            values = dict(e.split(b"=", 1) for e in entries if b"=" in e)
            owner = values.get(OWNER_ENV.encode())
            if MARKER_ENV.encode() in values and owner is not None and _owner_gone(owner.decode("ascii", "replace")):
                found.append(pid)
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        if not found:
            break
        time.sleep(0.02)
    return len(killed)


def kill_all(popen: subprocess.Popen, marker: str, *, rounds: int = 50) -> None:
    """SIGKILL the candidate's session and every marked descendant until none is left.

    Repeated because a fork bomb keeps forking while it is being killed; each round kills what it
    sees, and the bomb runs out once its parents are gone. The session id is the child's pid, so it
    is only trusted while the child is unreaped (its pid cannot be reused); after that, only the
    marker identifies our processes.
    """
    needle = f"{MARKER_ENV}={marker}".encode()
    for _ in range(rounds):
        session = popen.pid if popen.returncode is None else None
        tree = []
        if session is not None:
            # The sandbox's namespace first: killing its init (bwrap's child) makes the kernel kill
            # every process of the namespace, those that left the session or cleared the marker too.
            tree = [info.pid for info in sandbox_members(session, fresh=True) if info.pid != session]
            for pid in tree:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(session, signal.SIGKILL)
        left = sorted(set(_marked(needle, session)) | set(tree))
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                popen.kill()
        if not left and popen.poll() is not None:
            break
        time.sleep(0.02)
    with contextlib.suppress(subprocess.TimeoutExpired):
        popen.wait(timeout=10)


def make_scratch(root: Path, name: str) -> Path:
    """A fresh private directory: the candidate's cwd, HOME and TMPDIR, deleted after the evaluation."""
    root.mkdir(parents=True, exist_ok=True)
    path = root / name
    path.mkdir(mode=0o700)
    (path / "tmp").mkdir()
    return path


def signal_name(returncode: int) -> str:
    """``-11`` -> ``SIGSEGV``: a dead child's status in words."""
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"

