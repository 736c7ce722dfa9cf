"""Shared by the queue/worker/docker tests: a tiny task, candidates for it, and real worker processes."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pike_harness.worker import queue_channel as qc
from pike_harness.worker.records import EvalRequest, Limits

TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return torch.relu(x) * self.scale


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return [3.0]
'''

CORRECT = '''
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x.clamp_min(0) * self.scale
'''

INCORRECT = CORRECT.replace("* self.scale", "* (self.scale + 1.0)")


def gated(candidate: str, gate: Path, longest_s: float = 60) -> str:
    """The candidate, made to wait while loading for as long as the file ``gate`` exists (``longest_s`` at
    most), so a test can act on its worker in the middle of an evaluation, however fast the machine is.
    The candidate sandbox shows only an allow-list of folders (and a private /tmp): ``gate`` must lie in
    one of them (``visible_tmp``)."""
    from pike_harness.worker.supervise.isolation import visible_roots

    assert any(str(gate).startswith(root.rstrip("/") + "/") for root in visible_roots()), \
        f"{gate} is invisible to a sandboxed candidate"
    wait = (f"import os\nimport time\n\n_deadline = time.time() + {longest_s!r}\nwhile os.path.exists({str(gate)!r}) "
            f"and time.time() < _deadline:\n    time.sleep(0.05)\n")
    return wait + candidate


# Kills the process that evaluates it (the worker): it must end as worker_lost, not stall the queue.
KILLS_WORKER = CORRECT.replace("import torch\n", "import os\nimport signal\nimport torch\n\n"
                                                 "os.kill(os.getppid(), signal.SIGKILL)\n", 1)


def request(candidate: str, **changes) -> EvalRequest:
    fields = {"task": "test/relu-scale", "reference_source": TASK, "candidate_source": candidate,
              "protocol": "quick", "device": "cpu", "hidden_input_sets": 1,
              "limits": Limits(compile_timeout_s=60, run_timeout_s=60, memory_mb=4096)}
    fields.update(changes)
    return EvalRequest(**fields)


# A worker whose test is not about pre-starting keeps no idle pre-started processes: each would import
# torch (about 4 CPU-seconds on a 2-core runner) and be killed unused when the worker stops.
NO_POOL = ("--prestart", "0")


def worker_env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}


# The worker must run where only torch, triton, click (its options: worker/supervise/command.py) and the
# standard library are installed: the worker processes of these tests start with the harness's other
# dependencies made unimportable.
NOT_ON_GPU_HOSTS = ("rich", "pluggy", "duckdb", "altair", "openai", "anthropic", "pike_harness.api",
                    "pike_harness.cli", "pike_harness.host.plugins")
RUN_SERVICE = ("import runpy, sys\n"
               f"for name in {NOT_ON_GPU_HOSTS!r}:\n    sys.modules[name] = None\n"
               "sys.argv[0] = 'pike_harness.worker.supervise.service'\n"
               "runpy.run_module('pike_harness.worker.supervise.service', run_name='__main__', alter_sys=True)\n")


class WorkerProcess:
    """The worker service (``python -m pike_harness.worker.supervise.service``) as a real subprocess, with fast
    heartbeats, and the harness's host-side dependencies unimportable."""

    def __init__(self, io_dir: Path, log_path: Path, *args: str, worker_id: str | None = None,
                 env: dict[str, str] | None = None, stale_after: float = 30):
        self.io_dir = io_dir
        self.log_path = log_path
        self.worker_id = worker_id
        # --stale-after: 30 s, not 2: live workers on one folder judge each other by it, and a heartbeat
        # write stalled 2 s on a loaded CI runner made one give back the other's claims (a request
        # evaluated twice). A killed worker on this machine is dead at once by its pid, whatever the window.
        command = [sys.executable, "-c", RUN_SERVICE, "--io-dir", str(io_dir), "--device", "cpu",
                   "--heartbeat", "0.2", "--stale-after", str(stale_after), *args]
        if worker_id:
            command += ["--worker-id", worker_id]
        with open(log_path, "ab") as log:  # the child keeps its own copy of the descriptor
            self.popen = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                          env={**worker_env(), **(env or {})})
        if worker_id is None:
            self.worker_id = f"{os.uname().nodename}-{self.popen.pid}"

    def wait_ready(self, timeout: float = 180) -> WorkerProcess:
        """Until the heartbeat appears (the worker imported torch and can take requests): 180 s, as
        importing torch on a 2-core runner shared with other test processes can take minutes."""
        deadline = time.monotonic() + timeout
        path = self.io_dir / "workers" / f"{self.worker_id}.json"
        while time.monotonic() < deadline:
            if path.exists():
                return self
            if self.popen.poll() is not None:
                raise AssertionError(f"worker exited with {self.popen.returncode}:\n{self.log()}")
            time.sleep(0.05)
        raise AssertionError(f"worker not ready after {timeout} s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def claimed(self) -> list[str]:
        # qc.names, not exists() then listdir: the host's client may remove the folder in between
        # (when it gives back a dead worker's claims).
        return qc.names(self.io_dir / "claimed" / str(self.worker_id))

    def kill(self) -> None:
        """SIGKILL: no clean-up at all, as a crash or an OOM kill would leave things."""
        with contextlib.suppress(ProcessLookupError):
            self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(timeout=30)

    def stop(self, timeout: float = 30) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.popen.returncode

    def __enter__(self) -> WorkerProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def heartbeat(io_dir: Path, worker_id: str) -> dict:
    return json.loads((io_dir / "workers" / f"{worker_id}.json").read_text())
