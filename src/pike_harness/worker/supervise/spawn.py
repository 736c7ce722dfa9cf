"""Starting a candidate's sandboxed process, either when its evaluation begins or ahead of time.

A fresh Python process that imports torch and initialises CUDA costs one to three seconds before a
candidate's first line runs; that is most of the per-candidate overhead of a trivial candidate. So
the process can be started early (``prestart=True``): it imports torch and the worker's own modules,
initialises the device, reports ``ready`` and then waits for the one request it will ever serve.
Either way the process is the same sandbox: its own session, a scrubbed environment, a fresh
private scratch directory, the evaluation's marker. Standard library only.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pike_harness.worker.channel import Channel
from pike_harness.worker.supervise import exchange, sandbox, seccomp, trusted_files

if TYPE_CHECKING:
    from pike_harness.worker.supervise.supervisor import WorkerSettings

# How long the supervisor waits for room in the pipe to a candidate's process. Our child reads each
# message as it comes, so the pipe (64 KiB) is nearly empty; only a candidate that sends requests and
# never reads the replies fills it, and that is a protocol violation, not a reason to wait forever.
SEND_TIMEOUT_S = 20.0


@dataclass
class Spawned:
    """A started candidate process and everything needed to drive it and clean up after it."""

    popen: subprocess.Popen
    channel: Channel
    scratch: Path
    marker: str
    device: str
    prestarted: bool = False
    started: float = field(default_factory=time.monotonic)
    environment: dict[str, Any] | None = None  # what a pre-started child reported with "ready"
    exchange: Path | None = None  # its exchange folder (hidden inputs in, outputs out), bound into its sandbox
    # Its stdout and stderr as the supervisor opened them before it started: the tails are read from
    # these descriptors, never by a path the candidate could have swapped for a link or a FIFO.
    logs: tuple[int, int] | None = None

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tails(self, chars: int) -> tuple[str, str]:
        """The last ``chars`` characters of its stdout and stderr."""
        if self.logs is None:
            return "", ""
        return trusted_files.tail_fd(self.logs[0], chars), trusted_files.tail_fd(self.logs[1], chars)

    def close_logs(self) -> None:
        logs, self.logs = self.logs, None
        for fd in logs or ():
            os.close(fd)

    def discard(self) -> None:
        """Kill it and delete its scratch directory (an unused pre-started process, or a failed start)."""
        sandbox.kill_all(self.popen, self.marker)
        self.channel.close()
        self.close_logs()
        for folder in (self.scratch, self.exchange):
            if folder is not None:
                trusted_files.remove_tree(folder)


def visible_devices(device: str, environ: Mapping[str, str] | None = None) -> str:
    """``CUDA_VISIBLE_DEVICES`` for a device: the GPU that ``cuda:N`` means here, or nothing for the CPU.

    ``cuda:N`` is torch's index in the harness, which counts only the GPUs the harness's own
    ``CUDA_VISIBLE_DEVICES`` lists (Slurm sets it): ``cuda:0`` under ``3,5`` is GPU 3, not GPU 0.
    """
    if not device.startswith("cuda"):
        return ""
    index = device.split(":", 1)[1] if ":" in device else "0"
    source = os.environ if environ is None else environ
    inherited = [entry.strip() for entry in source.get("CUDA_VISIBLE_DEVICES", "").split(",") if entry.strip()]
    if index.isdigit() and int(index) < len(inherited):
        return inherited[int(index)]
    return index


def candidate_environment(settings: WorkerSettings, scratch: Path, device: str, marker: str) -> dict[str, str]:
    """The scrubbed environment of a candidate's process; caches point into its private scratch.

    The request may later point the Triton/Inductor caches at a shared, per-source directory (the
    child applies that before importing the candidate); a candidate never sees another's caches.
    """
    return sandbox.scrubbed_environment(settings.source_environ(), {
        "HOME": str(scratch), "TMPDIR": str(scratch / "tmp"), "USER": "pikeh-candidate",
        "LOGNAME": "pikeh-candidate", "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
        "CUDA_VISIBLE_DEVICES": visible_devices(device, settings.source_environ()),
        "TORCH_EXTENSIONS_DIR": str(scratch / "torch_extensions"),
        "TRITON_CACHE_DIR": str(scratch / "triton"),
        "TORCHINDUCTOR_CACHE_DIR": str(scratch / "inductor"),
        "TORCHINDUCTOR_COMPILE_THREADS": "1",  # compile in-process: no worker pool, no helper threads
        **sandbox.marker_environment(marker),
    })


def spawn_child(settings: WorkerSettings, device: str, *, prestart: bool = False,
                cpus: set[int] | None = None) -> Spawned:
    """Start ``python -m pike_harness.worker.inside.child`` for ``device``; ``prestart`` makes it warm up first.

    ``cpus``, when given, is the set of cores the process (and everything it starts) may run on:
    schedulers keep loading candidates off the cores reserved for timing.
    """
    settings.workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
    root = settings.scratch_root or settings.workdir / "scratch"
    scratch = sandbox.make_scratch(root, f"eval-{secrets.token_hex(8)}")
    marker = secrets.token_hex(12)
    env = candidate_environment(settings, scratch, device, marker)
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    argv = [settings.python, "-m", "pike_harness.worker.inside.child", str(to_child_r), str(from_child_w)]
    if prestart:
        argv += ["--prestart", device]
    folder = exchange.make(settings.exchange_root, scratch)
    logs = open_logs(scratch)
    try:
        with thread_affinity(cpus), seccomp.program_fd() as filter_fd:
            argv = sandboxed(settings, argv, scratch, [root], extra_writable=[folder], seccomp_fd=filter_fd)
            fds = (to_child_r, from_child_w) + (() if filter_fd is None else (filter_fd,))
            popen = subprocess.Popen(argv, pass_fds=fds, stdin=subprocess.DEVNULL,
                                     stdout=logs[0], stderr=logs[1], cwd=str(scratch), env=env,
                                     start_new_session=True)
    except BaseException:
        for fd in (to_child_r, to_child_w, from_child_r, from_child_w, *logs):
            os.close(fd)
        trusted_files.remove_tree(scratch)
        trusted_files.remove_tree(folder)
        raise
    os.close(to_child_r)
    os.close(from_child_w)
    if cpus:
        set_affinity(popen.pid, cpus)
    channel = Channel(from_child_r, to_child_w, send_timeout_s=SEND_TIMEOUT_S)
    return Spawned(popen=popen, channel=channel, scratch=scratch, marker=marker,
                   device=device, prestarted=prestart, exchange=folder, logs=logs)


def open_logs(scratch: Path) -> tuple[int, int]:
    """New ``.stdout`` and ``.stderr`` files in a fresh scratch folder, opened before the candidate
    starts; the supervisor keeps the descriptors and reads the tails through them (the candidate may
    unlink or replace the names, which then changes nothing the supervisor reads)."""
    folder = trusted_files.open_directory(scratch)
    try:
        out = trusted_files.create_exclusive(".stdout", dir_fd=folder, readable=True)
        try:
            err = trusted_files.create_exclusive(".stderr", dir_fd=folder, readable=True)
        except BaseException:
            os.close(out)
            raise
    finally:
        os.close(folder)
    return out, err


def sandboxed(settings: WorkerSettings, argv: list[str], folder: Path, hide: list[Path], *,
              extra_writable: Sequence[Path] = (), seccomp_fd: int | None = None) -> list[str]:
    """``argv`` inside the evaluator's isolation (``settings.isolation``), writing only to ``folder``
    (and ``extra_writable``); the work folder, the shared build and JIT caches and ``hide`` are
    invisible (reference outputs, other candidates' scratch and builds). Unchanged where there is
    no isolation."""
    isolation = settings.isolation
    if isolation is None or not isolation.active:
        return argv
    # The shared caches are the supervisor's alone: a candidate gets copies (jit_caches, buildcache).
    caches = [Path(root) for root in (settings.jit_cache_root, getattr(settings.build_cache, "root", None)) if root]
    return isolation.wrap(argv, cwd=folder, hide=[settings.workdir, *caches, *hide],
                          writable=[folder, *extra_writable], seccomp_fd=seccomp_fd)


@contextlib.contextmanager
def thread_affinity(cpus: set[int] | None):
    """Run the block with this thread pinned to ``cpus``: a process it starts inherits the mask from
    its first instruction (pinning it afterwards would miss what it forked meanwhile, such as bwrap's
    sandboxed child)."""
    if not cpus:
        yield
        return
    try:
        before = os.sched_getaffinity(0)
        os.sched_setaffinity(0, cpus)
    except (AttributeError, OSError):
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, before)


def set_affinity(pid: int, cpus: set[int]) -> None:
    """Pin every thread of one process to ``cpus`` (threads it starts later inherit the mask).

    ``sched_setaffinity`` on a pid moves only the thread with that id, so each task is moved.
    A process or thread that exits meanwhile is not an error.
    """
    try:
        tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        tids = [pid]
    for tid in tids:
        with contextlib.suppress(OSError, AttributeError):
            os.sched_setaffinity(tid, cpus)


def set_session_affinity(session: int, cpus: set[int]) -> None:
    """Pin every process of a candidate's session (and each of their threads) to ``cpus``."""
    for member in sandbox.session_members(session, fresh=True):
        set_affinity(member.pid, cpus)
