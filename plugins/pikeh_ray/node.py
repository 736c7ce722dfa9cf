"""What runs on the cluster's nodes: one device actor per GPU, each running the evaluation engine.

``DeviceActor`` holds one whole device: a GPU (``num_gpus=1``) or, on a CPU-only cluster, one unit
of the custom resource ``pikeh_device``. Ray's resource accounting keeps every other GPU user of the
cluster off that GPU, and the actor judges candidates with the one evaluation ``Engine``
(``pike_harness.worker.supervise.engine``), the object ``local`` and the queue/docker workers run: its FIFO
device gate (one check-and-time at a time, oldest loaded candidate first), the device's trusted
reference process, quiet timing, CPU slots for loading, the build cache, pre-started candidate
processes and warm-up. So a candidate gets the same verdict and is timed under the same conditions
whatever ``--evaluator`` says. Actors are named per node and slot and detached, so every ``pikeh run``
on the cluster shares them: their evaluations queue first come, first served in one engine, and two
runs never time on one GPU at once. An actor that has served nobody for ``idle_exit_s`` exits and
gives its GPU back to the cluster.

``evaluate`` is one candidate's evaluation, called by a bridge (``bridge.py``); it returns the result
record, or ``{"infra": why}`` for a failure that is not the candidate's (the bridge retries those on
any live device, under the one retry policy). An evaluation that works longer than its stage limits
plus a grace (``liveness.HoldTimer``; waits for a CPU slot or for the device not counted) is aborted
and reported as such a failure, so a stuck evaluation cannot hold a place for ever.

The engine's CPU slots come from the node's share: at most the CPUs Ray declares for the node per
device, and at most what the engine would take on this host by itself. The actor asks Ray for no CPU
(``num_cpus=0``): its loads run in the engine's slots, not as Ray tasks. Imported only on cluster
nodes and by the bridge, never by the harness.
"""

from __future__ import annotations

import concurrent.futures
import os
import socket
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import ray

from pike_harness.worker.api import HOLD_GRACE_S, HoldTimer, hold_deadline_s, remove_tree, sweep_orphans

DEVICE_RESOURCE = "pikeh_device"  # the custom resource that stands for "one whole device" without GPUs
REAP_EVERY_S = 1.0
SWEEP_EVERY = 5  # reaper rounds between sweeps for orphaned candidate processes
POLL_S = 0.5  # how often a waiting ``evaluate`` checks its evaluation's deadline
NODE_GONE_WAIT_S = 2.0  # how long a candidate killed from outside waits to learn whether its node is dying


class DeviceActor:
    """One device of one node, shared by every run on the cluster; hosts its evaluation engine."""

    def __init__(self, kind: str, node_dir: str, engine_options: dict[str, Any], idle_exit_s: float,
                 devices_on_node: int = 1):
        from pike_harness.worker.api import (
            Engine,
            EngineConfig,
            HostShare,
            LocalDevices,
            resolve,
        )

        context = ray.get_runtime_context()
        if kind == "cuda":
            ids = [str(i) for i in ray.get_gpu_ids()]
            if len(ids) != 1 or not ids[0].isdigit():
                raise RuntimeError(f"expected one GPU index from Ray, got {ids!r} (give CUDA_VISIBLE_DEVICES "
                                   "as indices, not UUIDs, when starting Ray)")
            self.device = f"cuda:{ids[0]}"
        else:
            self.device = "cpu"
        self.node_id = context.get_node_id()
        self.actor_id = str(context.get_actor_id())
        self._raylet = os.getppid()  # the raylet started this worker; when it ends, the node is going away
        self.idle_exit_s = float(idle_exit_s)
        self.node_dir = Path(node_dir)
        self.node_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.workdir = self.node_dir / f"device-{self.device.replace(':', '')}-{self.actor_id[:8]}"
        self.workdir.mkdir(parents=True, exist_ok=True, mode=0o700)

        options = dict(engine_options)
        share = options.pop("cpus_per_device", None)  # what Ray declares for the node, per device
        environ = physical_environ()
        config = EngineConfig.from_values(options, device=self.device, workdir=self.workdir / "engine",
                                          environ=environ)
        # The engine's own defaults, for an engine that shares its node with the other devices' actors.
        plan = resolve(config, [self.device], HostShare(cpus=int(share) if share else None,
                                                        engines=int(devices_on_node)))
        provider = LocalDevices(plan, self.workdir / "reference", environ=environ)
        try:
            self.engine = Engine(plan, devices=provider)
        except BaseException:
            provider.close()
            raise
        self._lock = threading.Lock()
        self._inflight = 0
        self._last_activity = time.monotonic()
        self.served = 0
        threading.Thread(target=self._reap_loop, name="pikeh-device-reaper", daemon=True).start()

    def info(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "device": self.device, "host": socket.gethostname(),
                "node_ip": ray.util.get_node_ip_address(), "pid": os.getpid(), "actor_id": self.actor_id,
                "capacity": self.engine.capacity}

    def lifeline(self) -> bool:
        """Never returns while the actor lives: a bridge learns of the actor's end from this call."""
        threading.Event().wait()
        return True

    # -- one evaluation ------------------------------------------------------------------------
    def evaluate(self, request_json: str, attempt: int, hold_grace_s: float | None = None) -> dict[str, Any]:
        """One candidate through this device's engine: ``{"result": record}`` or ``{"infra": why}``.

        ``environment.ray`` of the record says where and when (wall-clock times of the engine's events).
        """
        from pike_harness.api import EvalRequest
        from pike_harness.worker.api import InfrastructureError

        request = replace(EvalRequest.from_json(request_json), device=self.device)
        grace = HOLD_GRACE_S if hold_grace_s is None else float(hold_grace_s)
        timer = HoldTimer(hold_deadline_s(request.limits, grace))
        timer.waiting()  # until its candidate starts: queued for a CPU slot behind other evaluations
        window: dict[str, Any] = {"node_id": self.node_id, "node_ip": ray.util.get_node_ip_address(),
                                  "pid": os.getpid(), "attempt": attempt, "submitted": time.time()}

        def on_event(event: str, _evaluation: Any) -> None:
            timer.on_event(event)
            window["load_start" if event == "spawned" else event] = time.time()

        with self._lock:
            self._inflight += 1
            self._last_activity = time.monotonic()
        try:
            future = self.engine.submit(request, fixed_device=True, on_event=on_event)
            while True:
                try:
                    result = future.result(timeout=POLL_S)
                    break
                except concurrent.futures.TimeoutError:
                    if timer.overdue():
                        self.engine.abort([future])
                        return {"infra": f"the evaluation ran past its deadline of {timer.deadline_s:.0f} s "
                                         "(its stage limits plus a grace) on a live node: aborted",
                                "node_id": self.node_id}
                except InfrastructureError as exc:
                    return {"infra": str(exc), "node_id": self.node_id}
            if result.check == "killed" and self._node_going():
                # Killed by no one in this engine while the node dies (a node kill reaches processes in
                # any order): the node's failure, not the candidate's; the bridge retries elsewhere.
                return {"infra": "the candidate's process was killed from outside as its node went away "
                                 "(the raylet that started this worker has ended)", "node_id": self.node_id}
            result.environment["ray"] = window
            return {"result": result.to_dict()}
        finally:
            with self._lock:
                self._inflight -= 1
                self._last_activity = time.monotonic()
                self.served += 1

    def _node_going(self, wait_s: float = NODE_GONE_WAIT_S) -> bool:
        """Whether the raylet that started this worker has ended (this process re-parented), waiting up to
        ``wait_s`` for it: a kill of the whole node may reach the candidate a moment before the raylet."""
        deadline = time.monotonic() + wait_s
        while os.getppid() == self._raylet:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)
        return True

    def stats(self) -> dict[str, Any]:
        """This device's engine: its settings (``describe()["scheduling"]``) and figures (``stats()``)."""
        return {"device": self.device, "node_id": self.node_id, "served": self.served,
                "engine": self.engine.describe()["scheduling"], "stats": self.engine.stats()}

    # -- housekeeping --------------------------------------------------------------------------
    def _reap_loop(self) -> None:
        rounds = 0
        while True:
            time.sleep(REAP_EVERY_S)
            rounds += 1
            if rounds % SWEEP_EVERY == 0:
                # What a dead node's workers left on this host (candidates paused for quiet timing
                # never resume by themselves).
                sweep_orphans()
            with self._lock:
                idle = not self._inflight and time.monotonic() - self._last_activity > self.idle_exit_s
            if idle:
                self.close()
                os._exit(0)  # the GPU goes back to the cluster; bridges holding a handle see the actor end

    def close(self) -> None:
        self.engine.close()
        remove_tree(self.workdir)  # never recursive, never follows a candidate's link


def physical_environ() -> dict[str, str]:
    """This process's environment without ``CUDA_VISIBLE_DEVICES``: a device actor's ``cuda:N`` is the
    physical index Ray gave it, not an index into what Ray set for this process."""
    return {name: value for name, value in os.environ.items() if name != "CUDA_VISIBLE_DEVICES"}


def engine_options(cache: str | None, prewarm: str | None, quiet: bool | None, jobs: int | None,
                   cpus_per_device: int | None, unsafe_no_sandbox: bool = False) -> dict[str, Any]:
    """The ``EngineConfig`` values a bridge gives the device actors it creates (the first bridge to
    create an actor sets them; later runs share it as it is)."""
    return {"build_cache": "off" if cache is None else (None if cache == "default" else cache),
            "prewarm": prewarm, "quiet_timing": quiet, "jobs": jobs, "cpus_per_device": cpus_per_device,
            "unsafe_no_sandbox": unsafe_no_sandbox}
