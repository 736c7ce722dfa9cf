"""A real Ray cluster on loopback for tests: a head and extra nodes, each a `ray start --block` process.

Every node is a real raylet (its own object store and worker processes) started as a subprocess in a
process group of its own, so a test can kill one node's raylet, or the whole cluster, mid-run, and the
fixture can clean up exactly what it started. Nodes declare ``num_cpus`` and the custom resource
``pikeh_device`` (one "whole device" each: CPU-only machines have no GPUs to hold), plus a resource
named after the node so a test can tell where work ran.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def reachable(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


def children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (by walking /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8", errors="replace") as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        parents.setdefault(ppid, []).append(int(entry))
    found, stack = [], [pid]
    while stack:
        for child in parents.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class LoopbackCluster:
    """``start_head()``, ``add_node()``, ``kill_raylet(name)``, ``kill_all()``, ``stop()``."""

    def __init__(self, root: Path | None = None):
        # Ray's unix sockets live under the temp dir: keep the path short (108-byte limit).
        self.root = Path(tempfile.mkdtemp(prefix="pkr", dir="/tmp")) if root is None else root
        self.port = free_port()
        self.nodes: dict[str, subprocess.Popen] = {}
        self.env = {**os.environ, "OMP_NUM_THREADS": "1", "RAY_USAGE_STATS_ENABLED": "0"}

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _start(self, name: str, args: list[str], cpus: int, devices: int) -> subprocess.Popen:
        resources = json.dumps({"pikeh_device": devices, f"node_{name}": 1})
        log = open(self.root / f"{name}.log", "ab")  # noqa: SIM115 - owned by the process
        popen = subprocess.Popen(
            [RAY, "start", "--block", "--node-ip-address=127.0.0.1", f"--num-cpus={cpus}", "--num-gpus=0",
             f"--resources={resources}", "--disable-usage-stats", *args],
            stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True)
        log.close()
        self.nodes[name] = popen
        return popen

    def start_head(self, cpus: int = 2, devices: int = 1, timeout: float = 90.0) -> None:
        self._start("head", ["--head", f"--port={self.port}", f"--temp-dir={self.root / 'ray'}",
                             "--include-dashboard=false"], cpus, devices)
        deadline = time.monotonic() + timeout
        while not reachable(self.port):
            if self.nodes["head"].poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the Ray head did not start: {self.log('head')}")
            time.sleep(0.2)

    def add_node(self, name: str, cpus: int = 1, devices: int = 1) -> None:
        self._start(name, [f"--address={self.address}"], cpus, devices)

    def log(self, name: str) -> str:
        path = self.root / f"{name}.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def raylet(self, name: str) -> int:
        for pid in children(self.nodes[name].pid):
            if "/raylet/raylet " in cmdline(pid) or cmdline(pid).split(" ")[0].endswith("/raylet"):
                return pid
        raise RuntimeError(f"no raylet under node {name}")

    def kill_raylet(self, name: str) -> None:
        """SIGKILL one node's raylet: the node dies as if its machine failed (its workers follow)."""
        os.kill(self.raylet(name), signal.SIGKILL)

    def kill_node(self, name: str) -> None:
        popen = self.nodes.pop(name)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            popen.wait(timeout=10)

    def kill_all(self, spare: tuple[int, ...] = ()) -> None:
        """Kill every node and every process whose command line names this cluster's folder, except
        this test and ``spare`` (a `pikeh run` under test names the folder in --ray-node-dir)."""
        for name in list(self.nodes):
            self.kill_node(name)
        # Ray's workers run in process groups of their own and outlive a killed raylet for a while;
        # their command lines name this cluster's temporary folder.
        marker = str(self.root)
        keep = {os.getpid(), *spare}
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) not in keep and marker in cmdline(int(entry)):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(entry), signal.SIGKILL)

    def stop(self) -> None:
        """Kill every node (a test cluster holds nothing worth a graceful drain)."""
        self.kill_all()
