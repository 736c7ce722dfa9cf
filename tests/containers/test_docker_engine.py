"""The docker evaluator's checks that need no running engine: what a user sees when Docker is missing
or unreachable, how --device maps to containers, and when the host's Python cannot be mounted."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest
from pikeh_docker.engine import Engine, HostPython
from pikeh_docker.evaluator import plan_gpus

from pike_harness.contracts.evaluation import EvaluatorError


def test_missing_or_unreachable_engine_is_a_clear_error(tmp_path, monkeypatch):
    docker = shutil.which("docker")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EvaluatorError, match=r"docker is not installed.*--docker-engine podman.*--evaluator local"):
        Engine("docker")
    if docker is None:
        return
    monkeypatch.setenv("PATH", str(Path(docker).parent))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no.sock")
    with pytest.raises(EvaluatorError, match="cannot reach the docker engine.*systemctl start docker"):
        Engine("docker").check_daemon()


def test_devices_map_to_containers():
    assert plan_gpus("cpu", 8) is None
    assert plan_gpus("auto", 0) is None and plan_gpus("auto", 2) == [0, 1]
    assert plan_gpus("cuda:1,3", 4) == [1, 3]
    with pytest.raises(EvaluatorError, match="no CUDA device is available here"):
        plan_gpus("cuda", 0)
    with pytest.raises(EvaluatorError, match=r"cuda:2 not available .*nvidia-smi lists 2 GPU"):
        plan_gpus("cuda:2", 2)
    with pytest.raises(EvaluatorError, match="bad device"):
        plan_gpus("gpu0", 2)


def test_host_python_mounts_its_own_prefixes_only(monkeypatch):
    found = HostPython.detect()
    assert found.executable == sys.executable and os.path.realpath(sys.base_prefix) in found.mounts
    assert found.package.endswith("pike_harness") and "/" not in found.mounts
    monkeypatch.setattr(sys, "base_prefix", "/usr")
    with pytest.raises(EvaluatorError, match="the system's own folder"):
        HostPython.detect()


def test_the_worker_starts_with_s_and_P_in_a_folder_candidates_cannot_write(tmp_path):
    """Candidates run as the worker's uid and can write /scratch ($HOME) and /tmp: the worker, which holds
    the queue's key, starts as ``python3 -s -P -m ...`` (no user site-packages, no working folder on
    sys.path) in the read-only root, whether the image's Python or this host's runs it."""
    from pikeh_docker.engine import ContainerSpec, Limits

    engine = Engine.__new__(Engine)  # the command line only: no docker needed
    engine.name, engine.exe, engine.rootless = "docker", "/usr/bin/docker", False
    spec = ContainerSpec("pikeh-x-cpu", "docker-x-cpu", None, "cpu")
    host = HostPython(executable="/opt/py/bin/python3", mounts=["/opt/py"], package="/opt/pkg/pike_harness")
    for host_python, python in ((None, "python3"), (host, "/opt/py/bin/python3")):
        command = engine.run_command(spec, image="pikeh-worker:cpu", io_dir=tmp_path, limits=Limits(),
                                     host_python=host_python, labels={}, worker_args=["--io-dir", "/io"])
        assert command[command.index("--entrypoint") + 1] == python
        at = command.index("pikeh-worker:cpu")
        assert command[at + 1:] == ["-s", "-P", "-m", "pike_harness.worker.supervise.service", "--io-dir", "/io"]
        assert command[command.index("-w") + 1] == "/"


def test_default_memory_splits_half_the_host_between_containers():
    from pikeh_docker.engine import default_memory

    half_mb = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // (2 * 1024 * 1024)
    assert default_memory() == f"{max(2048, half_mb)}m"
    assert default_memory(8) == f"{max(2048, half_mb // 8)}m", "eight per-GPU containers share one half"


def test_a_containers_log_tail_is_shown_not_obeyed(tmp_path):
    """A worker container's log holds what its worker printed, a candidate's doing included; its tail
    reaches the terminal in errors and warnings (a container that died), as visible characters."""
    from pikeh_docker.engine import ContainerSpec
    from pikeh_docker.evaluator import _Container

    log = tmp_path / "pikeh-worker-0.log"
    log.write_text("$ docker run ...\nTraceback: \x1b]52;c;SGVsbG8=\x07 \x1b[2J\u202elave\r\n[/x] done\n",
                   encoding="utf-8")
    tail = _Container(ContainerSpec("pikeh-worker-0", "w0", None, "cpu"), log).log_tail()
    assert tail.endswith("Traceback: \\x1b]52;c;SGVsbG8=\\x07 \\x1b[2J\\u202elave\n[/x] done")
    assert not any(ord(c) < 0x20 and c != "\n" or c == "\u202e" for c in tail)
    assert _Container(ContainerSpec("gone", "w1", None, "cpu"), tmp_path / "missing.log").log_tail() == ""


def _bytes_read() -> int:
    """What this process has read so far (``rchar`` of /proc/self/io: every read, whatever the file)."""
    with open("/proc/self/io") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("rchar:"))


def test_a_huge_container_log_is_read_from_its_end_only(tmp_path):
    """A candidate can make its worker print without end; when the container dies the monitor shows the
    log's end, and must read only that much, never the whole file into memory."""
    from pikeh_docker.engine import ContainerSpec
    from pikeh_docker.evaluator import _Container

    log = tmp_path / "pikeh-worker-0.log"
    with open(log, "wb") as handle:
        handle.truncate(256 << 20)  # sparse: no disk used, yet a whole read reads 256 MiB
        handle.seek(0, os.SEEK_END)
        handle.write(b"\nthe end of the log\n")
    container = _Container(ContainerSpec("pikeh-worker-0", "w0", None, "cpu"), log)
    before = _bytes_read()
    tail = container.log_tail(1000)
    assert _bytes_read() - before < 1 << 20
    assert tail.endswith("the end of the log")
    os.symlink(log, tmp_path / "link.log")
    assert _Container(ContainerSpec("x", "w1", None, "cpu"), tmp_path / "link.log").log_tail() == ""


def test_a_container_log_is_kept_under_its_cap(tmp_path):
    """The evaluator copies a container's output into its log and starts the log again past the cap
    (the one before kept as <log>.1), so a worker made to print without end cannot fill the host's disk.
    A real process and pipe; the copying thread ends when the process's output closes."""
    import subprocess

    from pikeh_docker.evaluator import ContainerLog

    log = ContainerLog(tmp_path / "c.log", max_bytes=1 << 20)
    log.write(b"$ docker run ...\n")
    printer = ("import sys\nfor i in range(200_000):\n    sys.stdout.write(f'line {i:07d} ' + 'x' * 30 + '\\n')\n"
               "sys.stdout.write('last line\\n')\n")
    proc = subprocess.Popen([sys.executable, "-c", printer], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert proc.stdout is not None
    log.attach(proc.stdout, "c").join(timeout=120)
    assert proc.wait(timeout=60) == 0
    assert log.path.stat().st_size <= 1 << 20 and log.previous.stat().st_size <= 1 << 20
    assert log.tail(100).endswith("line 0199999 " + "x" * 30 + "\nlast line\n")


def test_the_docker_monitor_outlives_planted_heartbeats(tmp_path):
    """The monitor thread reads a dead container's heartbeat to tell a broken image from a candidate that
    killed its worker; a candidate can write that file. JSON nested 100,000 deep (RecursionError) or a
    start time that is no number once ended the thread, and with it every later restart: the run then
    failed with "no worker answers". Real processes stand in for the containers (no Docker needed)."""
    import threading

    from pikeh_docker.engine import ContainerSpec
    from pikeh_docker.evaluator import DockerEvaluator, _Container

    from pike_harness.worker.queue_client import QueueClient

    class StandIn:  # the engine's two calls the monitor makes, without Docker
        def __init__(self) -> None:
            self.removed: list[str] = []

        def run_command(self, spec, **_options) -> list[str]:
            return [sys.executable, "-c", "import sys; sys.stdin.readline(); print('worker gone')"]

        def remove(self, name: str) -> None:
            self.removed.append(name)

    evaluator = DockerEvaluator.__new__(DockerEvaluator)
    evaluator.engine = StandIn()
    evaluator.image, evaluator.limits, evaluator.host_python, evaluator.max_active = "img", None, None, None
    evaluator._key = b"k" * 32
    evaluator._closing = threading.Event()
    evaluator._lock = threading.Lock()
    evaluator.io_dir = tmp_path / "io"
    evaluator.client = QueueClient(evaluator.io_dir, wait_for_worker_s=60)
    container = _Container(ContainerSpec("pikeh-c", "docker-c", None, "cpu"), tmp_path / "c.log")
    evaluator.containers = [container]
    heartbeat = evaluator.client.qdir.workers / "docker-c.json"
    try:
        evaluator._start(container, replace=False)
        for planted in (b"[" * 100_000, b'{"worker_id": "docker-c", "started": "long ago"}'):
            heartbeat.write_bytes(planted)
            assert container.popen is not None
            container.popen.wait(timeout=60)
            evaluator._watch_once()
        assert container.restarts == 2 and container.failed_starts == 2
        assert evaluator.engine.removed == ["pikeh-c", "pikeh-c"]
    finally:
        evaluator._closing.set()
        evaluator.client.close()
        if container.popen is not None:
            container.popen.wait(timeout=60)
