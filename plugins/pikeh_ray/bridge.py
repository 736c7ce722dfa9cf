"""``python -m pikeh_ray.bridge``: the Ray driver, in a process of its own.

The harness never imports Ray. It starts this process and talks to it in JSON lines over a pipe
(``pike_harness.worker.channel``): requests in, result records out. A separate process because Ray
ends a driver whose cluster has gone (it exits the whole process once the head has been unreachable
for a minute): here that ends the bridge, the harness turns it into ``EvaluatorError`` for the
evaluations in flight, and the run's journal stays consistent.

What the bridge does:

* connects (``ray.init(address)``) after checking that the head answers at all, so an absent
  cluster is a one-line error within seconds;
* finds the cluster's devices: one ``DeviceActor`` per GPU of every live node (``num_gpus=1``;
  ``pikeh_device`` units on CPU-only clusters), named ``pikeh-device-<node>-<slot>`` and detached, so
  concurrent runs share them instead of racing for GPUs; it notices nodes that join or die and
  actors that end (each actor's never-returning ``lifeline`` call tells);
* places each request, oldest first: ``task`` placement (default) sends every evaluation of one
  task to one node, chosen by rendezvous hashing of the task and the node's address, so the task's
  baseline and its candidates are timed on the same host, and every run and every resume agrees on
  that host while it is up; ``spread`` placement takes the least busy device anywhere;
* sends it to the device's actor (``DeviceActor.evaluate``), which runs it through the device's
  evaluation engine (``pike_harness.worker.supervise.engine``, as ``local`` and the queue workers do); this
  bridge keeps at most ``inflight`` per device in flight (default: the engine's capacity), and the
  engine queues what every run sends it first come, first served;
* retries an evaluation whose node or actor failed, on whatever device is live, under
  the one ``EvalRetryPolicy`` (``pike_harness.api``: at most ``max_attempts`` tries in all),
  then reports it as an infrastructure error that says how many tries it spent, so the run loop
  does not try it again on top; a verdict is never retried. An evaluation stuck past its deadline
  (its stage limits plus a grace, ``liveness.HoldTimer``) is aborted by the device actor and comes
  back as one more infrastructure failure;
* watches the head's GCS port and exits when it stays unreachable for the window of the shared
  worker-death rule (``liveness.BeatWatch``: no successful probe for about four seconds).

Messages in: ``start`` (the configuration), ``submit`` (id, request), ``close``. Out: ``ready``,
``status`` (devices and queue), ``result`` (id, record), ``error`` (id, reason), ``fatal`` (reason).
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import logging
import os
import queue
import socket
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from pike_harness.api import EvalRequest, EvalRetryPolicy
from pike_harness.worker.api import HOLD_GRACE_S, BeatWatch, Channel, ChannelClosed
from pikeh_ray.node import DEVICE_RESOURCE, DeviceActor, engine_options

DISCOVER_EVERY_S = 2.0
PROBE_EVERY_S = 1.0
PROBE_FAILURES = 4  # probes without an answer from the head before the cluster counts as gone
NO_DEVICE_GRACE_S = 120.0  # requests waiting this long while the cluster has no usable device fail
ACTOR_THREADS = 256  # blocking calls a device actor serves at once (evaluations of every run, lifelines)
STATS_TIMEOUT_S = 30.0


@dataclass
class Config:
    address: str = "auto"
    device: str = "auto"  # auto, cuda or cpu
    placement: str = "task"  # task or spread
    retry: dict[str, Any] = field(default_factory=dict)  # a EvalRetryPolicy's fields; empty: the default
    hold_grace_s: float = HOLD_GRACE_S
    inflight: int | None = None  # per device, this bridge's; None: the device engine's capacity
    node_dir: str | None = None
    cache: str = "default"  # "default" (the node's cache folder), "off", or a folder
    prewarm: str | None = None  # None: the engine's default (as for local)
    quiet: bool | None = None
    jobs: int | None = None  # the device engines' CPU slots; None: the node's share (node.py)
    unsafe_no_sandbox: bool = False  # candidates unisolated (--unsafe-no-sandbox)
    idle_exit_s: float = 300.0
    no_device_grace_s: float = NO_DEVICE_GRACE_S

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Config:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names and v is not None})


@dataclass
class Device:
    actor: Any
    name: str  # the actor's name: pikeh-device-<node id>-<slot>
    node_id: str
    node_address: str
    head: bool = False  # on the head node (status and tests tell nodes apart by it)
    ready: bool = False
    dead: bool = False
    info: dict[str, Any] = field(default_factory=dict)
    inflight: int = 0
    limit: int = 2
    last_dispatch: float = 0.0
    done: int = 0

    @property
    def label(self) -> str:
        return f"{self.node_address}/{self.node_id[:8]}/{self.info.get('device', '?')}"


@dataclass
class Job:
    id: str
    request: EvalRequest
    submitted: float = field(default_factory=time.monotonic)
    attempts: int = 0
    errors: list[str] = field(default_factory=list)


class ClusterGone(Exception):
    """The head cannot be reached, or the cluster cannot serve this evaluator: one line for the user."""


def head_endpoint(address: str) -> tuple[str, int] | None:
    """(host, port) the head listens on for ``host:port`` (its GCS) or ``ray://host:port`` (its Ray
    Client server); None for ``auto``."""
    if address in ("", "auto", "local"):
        return None
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return None
    return host.strip("[]"), int(port)


def reachable(endpoint: tuple[str, int], timeout: float = 2.0) -> bool:
    try:
        with socket.create_connection(endpoint, timeout=timeout):
            return True
    except OSError:
        return False


def rendezvous(task: str, nodes: list[tuple[str, str]]) -> str | None:
    """The node (id) a task's evaluations go to, from (node id, node address) pairs.

    Highest hash of (task, address) wins, so the choice depends only on the task and on which hosts
    are up: every run, every resume and every bridge agree, and a node that dies moves only its own
    tasks. Nodes sharing an address (several raylets on one host) are told apart by their ids.
    """
    def score(node: tuple[str, str]) -> tuple[bytes, bytes]:
        node_id, address = node
        return (hashlib.sha256(f"{task}|{address}".encode()).digest(),
                hashlib.sha256(f"{task}|{node_id}".encode()).digest())

    return max(nodes, key=score)[0] if nodes else None


class Bridge:
    def __init__(self, config: Config, channel: Channel):
        self.config = config
        self.retry = EvalRetryPolicy.from_dict(config.retry)
        self.channel = channel
        self.inbox: queue.Queue[dict[str, Any]] = queue.Queue()
        self.pending: collections.deque[Job] = collections.deque()
        self.devices: dict[str, Device] = {}  # by actor name (live or dead)
        self.running: dict[Any, tuple[Job, Device]] = {}  # evaluate call ref -> (job, device)
        self.watch: dict[Any, tuple[str, Device]] = {}  # actor ref -> ("ready" | "lifeline", device)
        self.kind = "cpu"
        self.gcs: tuple[str, int] | None = None
        self.closing = False
        self.no_device_since: float | None = None
        self.last_work = time.monotonic()
        self._send_lock = threading.Lock()
        self._status_sent = ""

    # -- talking to the harness ----------------------------------------------------------------
    def send(self, message: dict[str, Any]) -> None:
        with self._send_lock:
            try:
                self.channel.send(message)
            except OSError:  # the harness went away: nothing left to do
                os._exit(0)

    def read_loop(self) -> None:
        while True:
            try:
                message = self.channel.receive(deadline=None, poll_s=1.0)
            except ChannelClosed:
                self.inbox.put({"op": "close"})
                return
            except Exception as exc:  # noqa: BLE001 - a garbled line from our own harness: stop cleanly
                self.inbox.put({"op": "close", "why": str(exc)})
                return
            if message is not None:
                self.inbox.put(message)

    def log(self, text: str) -> None:
        print(f"[pikeh-ray-bridge {time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)

    # -- connecting ----------------------------------------------------------------------------
    def connect(self) -> None:
        endpoint = head_endpoint(self.config.address)
        if endpoint is not None and not reachable(endpoint):
            raise ClusterGone(f"no Ray head answers at {self.config.address} (start one with `ray start --head`)")
        # "auto": RAY_ADDRESS, else the cluster started on this machine (never a new private one).
        ray.init(address=self.config.address or "auto", namespace="pikeh", logging_level=logging.ERROR,
                 log_to_driver=False)
        self.remote_actor = ray.remote(DeviceActor)  # wrapped once: each wrapping is exported to the cluster
        self.gcs = endpoint  # what the head answers on; for "auto", the GCS address Ray found
        if self.gcs is None:
            with contextlib.suppress(Exception):
                self.gcs = head_endpoint(ray.get_runtime_context().gcs_address or "")
        resources = ray.cluster_resources()
        wanted = self.config.device
        if wanted == "auto":
            wanted = "cuda" if resources.get("GPU", 0) > 0 else "cpu"
        if wanted == "cuda" and not resources.get("GPU"):
            raise ClusterGone("the Ray cluster has no GPUs (start its nodes with --num-gpus, or use --device cpu "
                              f"with nodes that declare the resource {DEVICE_RESOURCE})")
        if wanted == "cpu" and not resources.get(DEVICE_RESOURCE):
            raise ClusterGone(f"--device cpu on Ray needs nodes that declare the custom resource {DEVICE_RESOURCE} "
                              f"(ray start ... --resources '{{\"{DEVICE_RESOURCE}\": 1}}'), one per device")
        self.kind = wanted
        self.node_dir = self.config.node_dir or "/tmp/pikeh-ray"

    @property
    def resource(self) -> str:
        return "GPU" if self.kind == "cuda" else DEVICE_RESOURCE

    # -- devices -------------------------------------------------------------------------------
    def discover(self, *, create: bool) -> None:
        """Track live nodes; get (or create) the named device actors of their devices."""
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        alive = {n["NodeID"] for n in nodes}
        for device in list(self.devices.values()):
            if device.node_id not in alive and not device.dead:
                self._device_died(device, "its node left the cluster")
        if not create:
            return
        for node in nodes:
            resources = node.get("Resources") or {}
            count = int(resources.get(self.resource, 0))
            cpus = max(1, int(resources.get("CPU", 1)))
            options = engine_options(self.config.cache, self.config.prewarm, self.config.quiet, self.config.jobs,
                                     max(1, cpus // max(1, count)), self.config.unsafe_no_sandbox)
            for slot in range(count):
                name = f"pikeh-device-{node['NodeID']}-{slot}"
                known = self.devices.get(name)
                if known is not None and not known.dead:
                    continue
                actor_options: dict[str, Any] = {
                    "name": name, "namespace": "pikeh", "lifetime": "detached", "get_if_exists": True,
                    "num_cpus": 0, "max_restarts": 0, "max_concurrency": ACTOR_THREADS,
                    "scheduling_strategy": NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)}
                if self.kind == "cuda":
                    actor_options["num_gpus"] = 1
                else:
                    actor_options["resources"] = {DEVICE_RESOURCE: 1}
                actor = self.remote_actor.options(**actor_options).remote(self.kind, self.node_dir, options,
                                                                          self.config.idle_exit_s, count)
                device = Device(actor=actor, name=name, node_id=node["NodeID"],
                                node_address=str(node.get("NodeManagerAddress") or node["NodeID"]),
                                head="node:__internal_head__" in resources,
                                limit=self.config.inflight or Device.limit)
                self.devices[name] = device
                self.watch[actor.info.remote()] = ("ready", device)
                self.watch[actor.lifeline.remote()] = ("lifeline", device)

    def _device_died(self, device: Device, why: str) -> None:
        """Forget a device here; the actor is shared, so it is never killed from here."""
        if not device.dead:
            device.dead = True
            self.log(f"device {device.label} lost: {why}")
            self.status()

    def live_devices(self) -> list[Device]:
        return [d for d in self.devices.values() if d.ready and not d.dead]

    # -- placing and dispatching ---------------------------------------------------------------
    def devices_for(self, job: Job, live: list[Device]) -> list[Device]:
        if self.config.placement == "spread":
            return live
        nodes = sorted({(d.node_id, d.node_address) for d in live})
        home = rendezvous(job.request.task, nodes)
        return [d for d in live if d.node_id == home]

    def dispatch(self) -> None:
        live = self.live_devices()
        if not live:
            return
        for job in list(self.pending):
            free = sorted((d for d in self.devices_for(job, live) if d.inflight < d.limit),
                          key=lambda d: (d.inflight, d.last_dispatch))
            if not free:
                continue  # its devices are full (this run's share): later jobs may still go
            device = free[0]
            self.pending.remove(job)
            job.attempts += 1
            ref = device.actor.evaluate.remote(job.request.to_json(), job.attempts, self.config.hold_grace_s)
            device.inflight += 1
            device.last_dispatch = time.monotonic()
            self.running[ref] = (job, device)

    def finished(self, ref: Any) -> None:
        job, device = self.running.pop(ref)
        device.inflight -= 1
        try:
            out = ray.get(ref)
        except ray.exceptions.RayError as exc:
            out = {"infra": f"{type(exc).__name__}: {_first_lines(str(exc))}"}
            if isinstance(exc, ray.exceptions.RayActorError | ray.exceptions.NodeDiedError
                          | ray.exceptions.TaskUnschedulableError):
                self._device_died(device, type(exc).__name__)
        if "result" in out:
            device.done += 1
            self.send({"op": "result", "id": job.id, "result": out["result"]})
            return
        job.errors.append(f"attempt {job.attempts} on {device.label}: {out['infra']}")
        if self.retry.may_retry(job.attempts):
            self.pending.appendleft(job)
        else:
            self.send({"op": "error", "id": job.id, "attempts": job.attempts,
                       "reason": f"{job.attempts} attempts failed for reasons not the candidate's: "
                                 + " | ".join(job.errors)})

    def watched(self, ref: Any) -> None:
        what, device = self.watch.pop(ref)
        try:
            value = ray.get(ref)
        except ray.exceptions.RayError as exc:
            self._device_died(device, f"{type(exc).__name__}: {_first_lines(str(exc), 1)}")
            return
        if what == "ready" and not device.dead:
            device.ready, device.info = True, value
            device.limit = self.config.inflight or int(value.get("capacity") or device.limit)
            self.status()
        elif what == "lifeline":
            self._device_died(device, "the actor ended")

    # -- the loop ------------------------------------------------------------------------------
    def handle(self, message: dict[str, Any]) -> None:
        op = message.get("op")
        if op == "submit":
            try:
                request = EvalRequest.from_dict(message["request"])
            except Exception as exc:  # noqa: BLE001 - a request this worker cannot read is an error, not a verdict
                self.send({"op": "error", "id": message.get("id"), "reason": f"unreadable request: {exc}"})
                return
            self.pending.append(Job(id=str(message["id"]), request=request))
        elif op == "stats":
            self.send({"op": "stats", "id": message.get("id"), "devices": self.device_stats()})
        elif op == "close":
            self.closing = True

    def device_stats(self) -> dict[str, Any]:
        """Each live device actor's engine settings and figures, by actor name."""
        live = self.live_devices()
        refs = {d.name: d.actor.stats.remote() for d in live}
        out = {}
        for name, ref in refs.items():
            try:
                out[name] = ray.get(ref, timeout=STATS_TIMEOUT_S)
            except ray.exceptions.RayError as exc:
                out[name] = {"error": f"{type(exc).__name__}: {_first_lines(str(exc), 1)}"}
        return out

    def check_starvation(self) -> None:
        """Requests cannot wait forever for a device that never comes (all GPUs taken, none left)."""
        if self.live_devices() or not self.pending:
            self.no_device_since = None
            return
        now = time.monotonic()
        if self.no_device_since is None:
            self.no_device_since = now
        if now - self.no_device_since > self.config.no_device_grace_s:
            waiting = any(not d.dead for d in self.devices.values())
            why = ("no device actor could start in time (are the cluster's GPUs held by other Ray jobs?)"
                   if waiting else f"no live node of the cluster has the resource {self.resource}")
            while self.pending:
                job = self.pending.popleft()
                self.send({"op": "error", "id": job.id, "reason": why})
            self.no_device_since = None

    def probe_loop(self) -> None:
        """The head is judged by the shared worker-death rule: each answered probe is a beat; the
        cluster is gone once none came for the whole window (a probe lost now and then is no news)."""
        head = BeatWatch(PROBE_FAILURES * PROBE_EVERY_S - PROBE_EVERY_S / 2)
        probes = 0
        while not self.closing:
            time.sleep(PROBE_EVERY_S)
            if self.gcs is None:
                continue
            probes += 1
            if reachable(self.gcs, timeout=2.0):
                head.saw("head", probes)
            else:
                head.looked("head")
            if head.is_dead("head"):
                # From this thread: the main loop may be stuck inside a Ray call that retries for a minute.
                self.send({"op": "fatal", "reason": f"the Ray head at {self.gcs[0]}:{self.gcs[1]} stopped "
                                                    f"answering ({PROBE_FAILURES} checks, {PROBE_EVERY_S:g} s apart)"})
                os._exit(3)

    def status(self) -> None:
        devices = [{"name": d.name, "node_id": d.node_id, "head": d.head, "node_ip": d.info.get("node_ip"),
                    "host": d.info.get("host"), "device": d.info.get("device"), "ready": d.ready, "dead": d.dead,
                    "inflight": d.inflight, "limit": d.limit, "capacity": d.info.get("capacity"), "done": d.done}
                   for d in self.devices.values()]
        message = {"op": "status", "kind": self.kind, "placement": self.config.placement, "devices": devices,
                   "pending": len(self.pending), "running": len(self.running)}
        text = json.dumps(message, sort_keys=True)
        if text != self._status_sent:
            self._status_sent = text
            self.send(message)

    def run(self) -> None:
        threading.Thread(target=self.probe_loop, name="pikeh-ray-probe", daemon=True).start()
        self.discover(create=True)
        self.send({"op": "ready", "kind": self.kind, "node_dir": self.node_dir, "ray_version": ray.__version__})
        next_discovery = time.monotonic() + DISCOVER_EVERY_S
        while not self.closing:
            try:
                while True:
                    self.handle(self.inbox.get_nowait())
            except queue.Empty:
                pass
            now = time.monotonic()
            if self.pending or self.running:
                self.last_work = now
            if now >= next_discovery:
                # Idle device actors exit after a while and give their GPUs back; an idle bridge does
                # not make them again until it has work.
                self.discover(create=now - self.last_work < self.config.idle_exit_s)
                next_discovery = now + DISCOVER_EVERY_S
            self.dispatch()
            self.check_starvation()
            refs = list(self.running) + list(self.watch)
            ready = ray.wait(refs, num_returns=len(refs), timeout=0.2)[0] if refs else []
            if not refs:
                time.sleep(0.1)
            for ref in ready:
                if ref in self.running:
                    self.finished(ref)
                elif ref in self.watch:
                    self.watched(ref)
            self.status()


def _first_lines(text: str, count: int = 3) -> str:
    return " ".join(line.strip() for line in text.strip().splitlines()[:count])[:600]


def main() -> int:
    # The protocol owns the real stdout; Ray and everything else print to stderr (the bridge's log).
    protocol_out = os.dup(1)
    os.dup2(2, 1)
    channel = Channel(0, protocol_out)
    try:
        start = None
        while start is None:
            start = channel.receive(deadline=time.monotonic() + 60, poll_s=1.0)
    except Exception:  # noqa: BLE001 - no harness, nothing to do
        return 2
    bridge = Bridge(Config.from_dict(start.get("config") or {}), channel)
    threading.Thread(target=bridge.read_loop, name="pikeh-ray-inbox", daemon=True).start()
    try:
        bridge.connect()
        bridge.run()
    except ClusterGone as exc:
        bridge.send({"op": "fatal", "reason": str(exc)})
        os._exit(3)  # Ray's own shutdown can hang on a vanished head
    except Exception as exc:  # noqa: BLE001 - report anything to the harness as an infrastructure failure
        bridge.send({"op": "fatal", "reason": f"{type(exc).__name__}: {_first_lines(str(exc), 4)}"})
        traceback.print_exc()
        os._exit(4)
    # Closing: tasks this driver started end with it; the shared device actors stay for other runs
    # and exit on their own once idle.
    with contextlib.suppress(Exception):
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
