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
