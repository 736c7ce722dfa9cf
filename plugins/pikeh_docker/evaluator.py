"""The ``docker`` evaluator: eval workers in locked-down containers it starts and stops itself.

It starts one worker container per GPU (or one for all GPUs, or one on the CPU), each serving a
private queue folder bind-mounted as the container's only writable host path, and then behaves as
the ``queue`` evaluator on that folder. The worker's key reaches it on standard input, never on the
command line, in the environment or in a file, so a candidate inside the container, which can write
into the folder, cannot forge a signed verdict. A container that dies is started again under the
same worker id, which gives the requests it held back to the queue. docs/containers.md.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import stat
import subprocess
import tempfile
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pike_harness.api import (
    EvalRequest,
    EvalResult,
    Evaluator,
    EvaluatorError,
    EvaluatorOptions,
    apply_options,
    check_protocol,
    evaluator_config,
    printable,
)
from pike_harness.worker.api import remove_tree, tail

from .engine import ContainerSpec, Engine, HostPython, Limits, default_memory, host_gpu_count

log = logging.getLogger("pikeh.docker")
MAX_FAILED_STARTS = 3  # containers that die before their worker beats once, in a row: a broken setup
LOG_MAX_BYTES = 16 << 20  # a container's log starts again past this; the one before stays as <log>.1
_LOG_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class ContainerLog:
    """A worker container's log: what the container prints, copied here from its output pipe.

    A candidate can make its worker print without end, so the file is kept under ``max_bytes``: past
    that it is renamed to ``<name>.1`` (replacing the one before) and begun again, and the host's disk
    holds at most twice that. The copying thread never stops reading (a container must never block on
    a full pipe), whatever happens to the file. Reading the end (``tail``) reads only the end."""

    def __init__(self, path: Path, max_bytes: int = LOG_MAX_BYTES):
        self.path = Path(path)
        self.previous = self.path.with_name(self.path.name + ".1")
        self.max_bytes = max_bytes
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        data = data[-self.max_bytes:]
        with self._lock:
            fd = os.open(self.path, _LOG_FLAGS, 0o600)
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    return  # not the file this evaluator made: nothing is written into it
                if info.st_size and info.st_size + len(data) > self.max_bytes:
                    os.close(fd)
                    fd = -1
                    os.replace(self.path, self.previous)
                    fd = os.open(self.path, _LOG_FLAGS | os.O_TRUNC, 0o600)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                if fd >= 0:
                    os.close(fd)

    def attach(self, pipe: IO[bytes], name: str) -> threading.Thread:
        """Copy ``pipe`` (a container's stdout and stderr) into the log until it closes, on a thread."""
        thread = threading.Thread(target=self._copy, args=(pipe,), name=f"pikeh-log-{name}", daemon=True)
        thread.start()
        return thread

    def _copy(self, pipe: IO[bytes]) -> None:
        try:
            while True:
                data = os.read(pipe.fileno(), 1 << 16)
                if not data:
                    return
                with contextlib.suppress(OSError):
                    self.write(data)
        except (OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(OSError):
                pipe.close()

    def tail(self, chars: int) -> str:
        """The last ``chars`` characters, from the end of the file only (and of ``<name>.1`` when the
        file was begun again just now): never the whole of a log a candidate made huge."""
        text = tail(self.path, chars)
        if len(text) < chars:
            text = tail(self.previous, chars - len(text)) + text
        return text


@dataclass
class _Container:
    spec: ContainerSpec
    log_path: Path
    popen: subprocess.Popen | None = None
    restarts: int = 0
    failed_starts: int = 0
    given_up: bool = False
    started: float = 0.0  # wall-clock time of the last start
    command: list[str] | None = None
    log: ContainerLog = field(init=False)

    def __post_init__(self) -> None:
        self.log = ContainerLog(self.log_path)

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the container's log, shown and never obeyed: the worker's output, with whatever
        a candidate made it print, reaches the user's terminal through errors and warnings."""
        return printable(self.log.tail(chars).strip())


def plan_gpus(device: str, count: int) -> list[int] | None:
    """``--device`` -> the host GPU indices the containers get (None: CPU only); ``count`` is what
    ``nvidia-smi -L`` lists, since the harness's own torch may see no GPU at all."""
    from pike_harness.worker.api import resolve_devices

    try:
        devices = resolve_devices(device, count)
    except ValueError as exc:
        raise EvaluatorError(f"{exc} (nvidia-smi lists {count} GPU(s) on this host)") from None
    if devices == ["cpu"]:
        return None
    return [int(d.split(":")[1]) for d in devices]


class DockerEvaluator(Evaluator):
    """Worker containers on this host, fed through a private queue folder."""

    name = "docker"

    def __init__(self, options: EvaluatorOptions):
        from pike_harness.worker.api import QueueClient

        check_protocol(options)
        from . import DockerConfig

        config = evaluator_config(options, DockerConfig)
        self.options = options
        self.engine = Engine(config.docker_engine or "docker")
        self.engine.check_daemon()
        gpus = plan_gpus(options.device, host_gpu_count())
        if gpus is not None:
            self.engine.check_gpu_runtime()
        self.image = config.docker_image or ("pikeh-worker:cuda" if gpus is not None else "pikeh-worker:cpu")
        self.engine.check_image(self.image)
        self.host_python = HostPython.detect() if config.docker_host_python else None
        split = config.docker_gpus or "per-gpu"
        containers = len(gpus) if gpus is not None and split != "shared" else 1
        self.limits = Limits(memory=config.docker_memory or default_memory(containers),
                             pids=int(config.docker_pids or 4096),
                             scratch=config.docker_scratch or "8g", runtime=config.docker_runtime)
        self.max_active = config.docker_max_active
        self.start_timeout_s = float(config.docker_start_timeout or 180.0)
        self._own_workdir = options.workdir is None
        self.workdir = Path(options.workdir or tempfile.mkdtemp(prefix="pikeh-docker-")).absolute()
        self.workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.io_dir = Path(config.io_dir or self.workdir / "io").absolute()
        self._key = secrets.token_hex(32).encode()
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self.client = QueueClient(self.io_dir, key=self._key, error_type=EvaluatorError,
                                  wait_for_worker_s=self.start_timeout_s)
        session = self.client.session
        if gpus is None:
            specs = [ContainerSpec(f"pikeh-{session}-cpu", f"docker-{session}-cpu", None, "cpu")]
        elif split == "shared":
            specs = [ContainerSpec(f"pikeh-{session}-gpus", f"docker-{session}-gpus", gpus, "cuda")]
        else:
            specs = [ContainerSpec(f"pikeh-{session}-gpu{i}", f"docker-{session}-gpu{i}", [i], "cuda") for i in gpus]
        self.containers = [_Container(spec, self.workdir / f"{spec.name}.log") for spec in specs]
        self._monitor: threading.Thread | None = None
        try:
            for container in self.containers:
                self._start(container, replace=False)
            self.client.wait_for_workers({c.spec.worker_id for c in self.containers}, self.start_timeout_s,
                                         give_up=self._start_failure)
        except BaseException:
            self.close()
            raise
        self._monitor = threading.Thread(target=self._watch, name="pikeh-docker-monitor", daemon=True)
        self._monitor.start()

    # -- containers -----------------------------------------------------------------------------------
    def _worker_args(self, spec: ContainerSpec, replace: bool) -> list[str]:
        args = ["--io-dir", "/io", "--device", spec.worker_device, "--worker-id", spec.worker_id,
                "--workdir", "/scratch/worker", "--key-stdin", "--stdin-lifeline", "--sandbox-optional"]
        if self.max_active:
            args += ["--max-active", str(self.max_active)]
        if replace:
            args.append("--replace")
        return args

    def _start(self, container: _Container, *, replace: bool) -> None:
        command = self.engine.run_command(
            container.spec, image=self.image, io_dir=self.io_dir, limits=self.limits, host_python=self.host_python,
            labels={"pikeh.session": self.client.session, "pikeh.worker": container.spec.worker_id},
            worker_args=self._worker_args(container.spec, replace))
        container.command = command
        container.started = time.time()
        with contextlib.suppress(OSError):
            container.log.write(f"$ {' '.join(command)}\n".encode())
        # Its own session: a Ctrl-C meant for pikeh must not kill the container before close()
        # gives its requests back. If pikeh dies, the pipe closes and the worker exits (lifeline).
        container.popen = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           stderr=subprocess.STDOUT, start_new_session=True)
        assert container.popen.stdin is not None and container.popen.stdout is not None
        container.log.attach(container.popen.stdout, container.spec.name)
        try:
            container.popen.stdin.write(self._key + b"\n")
            container.popen.stdin.flush()
        except BrokenPipeError:
            pass  # it died at once; the caller sees it exit and reports its log

    def _start_failure(self) -> str | None:
        for container in self.containers:
            if container.popen is not None and container.popen.poll() is not None:
                return (f"the worker container {container.spec.name} exited with status "
                        f"{container.popen.returncode} while starting; its log ({container.log_path}) ends:\n"
                        f"{container.log_tail()}")
        return None

    def _served(self, container: _Container) -> bool:
        """Whether the container's worker got as far as beating (its heartbeat is from this start)."""
        from pike_harness.worker.api import queue_channel as qc

        # The container's candidate can write this file: whatever it holds is at worst "not served".
        try:
            beat = qc.read_json(self.client.qdir.workers, f"{container.spec.worker_id}.json",
                                max_bytes=qc.HEARTBEAT_BYTES)
        except (ValueError, OSError):
            return False
        started = beat.get("started") if beat is not None else None
        return isinstance(started, int | float) and started >= container.started - 1.0

    def _watch(self) -> None:
        """Start again a container that died: its candidate may have killed the worker, which is the
        candidate's verdict (worker_lost after three deaths), not a reason to stop evaluating. Only
        containers that keep dying before their worker ever beats (a broken image or setup) are left
        dead; the client then reports that no worker answers. Nothing a candidate plants ends this
        thread: an error is logged and the next round goes on."""
        while not self._closing.wait(0.5):
            self._watch_once()

    def _watch_once(self) -> None:
        for container in self.containers:
            if self._closing.is_set():
                return
            try:
                self._restart_if_dead(container)
            except Exception:  # noqa: BLE001 - the monitor must outlive anything it meets
                log.exception("the docker monitor failed on %s (going on)", container.spec.name)

    def _restart_if_dead(self, container: _Container) -> None:
        popen = container.popen
        if popen is None or popen.poll() is None or container.given_up:
            return
        with self._lock:
            if self._closing.is_set():
                return
            container.failed_starts = 0 if self._served(container) else container.failed_starts + 1
            if container.failed_starts >= MAX_FAILED_STARTS:
                container.given_up = True
                log.error("worker container %s died %d times in a row before its worker started; giving "
                          "up. Its log (%s) ends: %s", container.spec.name, MAX_FAILED_STARTS,
                          container.log_path, container.log_tail(1000))
                return
            container.restarts += 1
            log.warning("worker container %s exited (status %s); starting it again. Log ends: %s",
                        container.spec.name, popen.returncode, container.log_tail(500))
            self.engine.remove(container.spec.name)
            self._start(container, replace=True)

    # -- the evaluator interface ---------------------------------------------------------------------
    def submit(self, request: EvalRequest) -> Future[EvalResult]:
        if self._closing.is_set():
            raise EvaluatorError("this evaluator is closed")
        return self.client.submit(apply_options(request, self.options))

    def describe(self) -> dict[str, Any]:
        from pike_harness.worker.api import get_protocol, host_info

        protocol = get_protocol(self.options.protocol, self.options.protocol_params)
        return {"evaluator": self.name, "engine": self.engine.name, "image": self.image,
                "containers": [{"name": c.spec.name, "gpus": c.spec.gpus, "restarts": c.restarts}
                               for c in self.containers],
                "host_python": self.host_python is not None,
                "limits": {"memory": self.limits.memory, "pids": self.limits.pids, "scratch": self.limits.scratch,
                           "runtime": self.limits.runtime},
                "queue": self.client.describe(),
                "protocol": {**protocol.describe(), "params": dict(self.options.protocol_params)},
                "host": host_info()}

    def close(self) -> None:
        """Withdraw queued work, let each worker exit (stdin closes), remove the containers."""
        if self._closing.is_set():
            return
        self._closing.set()
        with self._lock:
            pass  # a restart in progress finishes before the containers are stopped
        self.client.close()
        for container in self.containers:
            if container.popen is not None and container.popen.stdin is not None:
                with contextlib.suppress(OSError):
                    container.popen.stdin.close()
        deadline = time.monotonic() + 20
        for container in self.containers:
            if container.popen is None:
                continue
            try:
                container.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.engine.remove(container.spec.name)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    container.popen.wait(timeout=30)
        if self._own_workdir:
            remove_tree(self.workdir)  # never recursive, never follows a candidate's link
