"""What runs on the cluster's nodes: one device actor per GPU, one task per candidate.

* ``DeviceActor`` holds one whole device: a GPU (``num_gpus=1``) or, on a CPU-only cluster, one unit
  of the custom resource ``pikeh_device``. Ray's resource accounting keeps every other GPU user of the
  cluster off that GPU; the actor lets a bounded number of candidates bind to its device
  (``admit``), and its ``DeviceGate`` lets one at a time run correctness and timing on it, oldest
  first: the per-device exclusivity of the ``local`` evaluator. It also owns the device's trusted
  reference process and the quiet-timing registry of the candidates bound to the device. Actors are
  named per node and slot and detached, so every ``pikeh run`` on the cluster shares them (two runs
  never time on one GPU at once); an actor that has served nobody for ``idle_exit_s`` exits and
  gives its GPU back to the cluster.
* ``run_candidate`` is one candidate's evaluation, a Ray task with ``num_cpus=1`` pinned to the
  actor's node. Phase 1 (load, builds, JIT warm-up) holds that CPU; then the task waits for the
  actor's gate. Ray gives a task's CPU back while the task is blocked in ``ray.get`` (documented,
  and checked in tests/ray_eval), and every wait here is a loop of blocking calls to the actor, so a
  candidate waiting for admission or for its GPU holds no CPU slot. Phase 2 (correctness,
  comparison, timing) runs under the gate. The supervisor, sandbox and records are the worker's own
  (``pike_harness.worker.supervisor.Evaluation``): the same code as ``local``.

The candidate's process lives on the node where it was loaded and is bound to its GPU from the start
(``CUDA_VISIBLE_DEVICES``), so the device is chosen before loading, as ``local`` does: the bridge
picks a device actor and the task runs on that actor's node. A supervisor that dies (its worker,
its node's raylet, its driver) is noticed by the actor, which frees its place and kills what its
candidate left behind. Imported only on cluster nodes and by the bridge, never by the harness.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import shutil
import signal
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray

from pike_harness.worker import sandbox
from pike_harness.worker.liveness import HOLD_GRACE_S, STALE_AFTER_S, HoldTimer, hold_deadline_s, is_dead

JIT_FLAGS = ("technique:triton", "technique:torch.compile")
DEVICE_RESOURCE = "pikeh_device"  # the custom resource that stands for "one whole device" without GPUs
RAY_CALL_GRACE_S = 60.0  # added to a blocking actor call's own timeout before the actor counts as lost
ADMIT_POLL_S = 2.0  # how long one blocking "admit" call waits before the task asks again
RESERVATION_TTL_S = 600.0  # a place reserved by a bridge and not claimed by its task lapses after this
REAP_EVERY_S = 1.0
SWEEP_EVERY = 5  # reaper rounds between sweeps for orphaned candidate processes


@dataclass
class _Member:
    """One admitted or waiting evaluation: its supervisor (a Ray worker on this node) and candidate."""

    pid: int
    start: int | None  # the supervisor process's start time: its epoch (a reused pid has another)
    timer: HoldTimer | None = None  # its working time against its deadline, from admission
    candidate: tuple[int, str] | None = None  # (pid, sandbox marker) once spawned
    quiet_token: int | None = None

    def alive(self) -> bool:
        """The shared worker-death rule, for a supervisor on this node: dead once its process is."""
        start = sandbox.process_start(self.pid)
        gone = start is None or (self.start is not None and start != self.start)
        return not is_dead(0.0, STALE_AFTER_S, process_gone=gone)

    def kill_supervisor(self) -> None:
        """SIGKILL the supervisor (only if the pid is still that process): its Ray task fails, and the
        bridge retries the request elsewhere under the retry policy."""
        if sandbox.process_start(self.pid) == self.start and self.start is not None:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signal.SIGKILL)


class DeviceActor:
    """One device of one node, shared by every run on the cluster."""

    def __init__(self, kind: str, node_dir: str, admit_limit: int, idle_exit_s: float):
        from pike_harness.worker.reference import ReferenceOracle
        from pike_harness.worker.scheduling import DeviceGate, QuietRegistry

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
        self.actor_id = context.get_actor_id()
        self.admit_limit = max(1, int(admit_limit))
        self.idle_exit_s = float(idle_exit_s)
        self.node_dir = Path(node_dir)
        self.node_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.workdir = self.node_dir / f"device-{self.device.replace(':', '')}-{self.actor_id[:8]}"
        self.workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.gate = DeviceGate(self.device, keep_log=False)
        self.oracle = ReferenceOracle(self.device, self.workdir / "reference", environ=physical_environ())
        threading.Thread(target=self.oracle.start, name="pikeh-reference-start", daemon=True).start()
        self.quiet = QuietRegistry()
        self._quiet_context: tuple[int, Any] | None = None
        self._cond = threading.Condition()
        self._members: dict[int, _Member] = {}
        self._admitted: set[int] = set()
        self._reserved: dict[int, float] = {}  # seq -> when a bridge reserved a place for it
        self._waiting: list[int] = []  # heap of seqs waiting for admission (oldest first)
        self._last_activity = time.monotonic()
        self.served = 0
        threading.Thread(target=self._reap_loop, name="pikeh-device-reaper", daemon=True).start()

    def info(self) -> dict[str, Any]:
        return {"node_id": self.node_id, "device": self.device, "host": socket.gethostname(),
                "node_ip": ray.util.get_node_ip_address(), "pid": os.getpid(), "actor_id": self.actor_id,
                "admit_limit": self.admit_limit}

    def lifeline(self) -> bool:
        """Never returns while the actor lives: a bridge learns of the actor's end from this call."""
        threading.Event().wait()
        return True

    # -- admission: at most admit_limit candidates bound to this device, across all runs ---------
    def reserve(self, seq: int) -> bool:
        """A bridge asks before it starts a task for this device: True holds a place for ``seq``.

        So across every run, only about ``admit_limit`` tasks per device exist at once, instead of
        each run's tasks queueing here as idle Ray workers. A place not claimed (``admit``) within
        ``RESERVATION_TTL_S`` lapses (its bridge may have died); a task that comes late queues."""
        now = time.monotonic()
        with self._cond:
            self._last_activity = now
            for old in [s for s, at in self._reserved.items() if now - at > RESERVATION_TTL_S]:
                del self._reserved[old]
            if len(self._admitted) + len(self._reserved) + len(self._waiting) >= self.admit_limit:
                return False
            self._reserved[seq] = now
            return True

    def admit(self, seq: int, pid: int, start: int | None, timeout: float, hold_deadline_s: float | None = None) -> bool:
        """Admit the evaluation ``seq`` (its supervisor ``pid``); ``hold_deadline_s`` bounds how long it
        may work once admitted, waits for the gate not counted (``liveness.HoldTimer``): the reaper
        kills a supervisor past it, so a stuck evaluation cannot hold a place for ever."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._cond:
            self._last_activity = time.monotonic()
            if seq in self._admitted:
                return True
            if self._reserved.pop(seq, None) is not None:
                self._members[seq] = _Member(pid=pid, start=start)
                self._admitted.add(seq)
                self._start_timer(seq, hold_deadline_s)
                return True
            if seq not in self._members:
                self._members[seq] = _Member(pid=pid, start=start)
                heapq.heappush(self._waiting, seq)
            while not (len(self._admitted) < self.admit_limit and self._waiting and self._waiting[0] == seq):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or seq not in self._members:
                    return False
                self._cond.wait(remaining)
            heapq.heappop(self._waiting)
            self._admitted.add(seq)
            self._start_timer(seq, hold_deadline_s)
            self._cond.notify_all()
            return True

    def _start_timer(self, seq: int, hold_deadline_s: float | None) -> None:
        member = self._members.get(seq)
        if member is not None and hold_deadline_s is not None and member.timer is None:
            member.timer = HoldTimer(float(hold_deadline_s))

    def leave(self, seq: int, sweep: bool = True) -> None:
        """The evaluation ``seq`` is over (or its supervisor died): free its place and the device,
        and (``sweep``) kill its candidate's processes if they outlived their supervisor. A
        supervisor that ended normally has killed them itself and passes ``sweep=False``."""
        self.quiet_end(seq)
        ticket = self.gate.ticket(seq)
        ticket.cancel()
        ticket.release()
        with self._cond:
            member = self._members.pop(seq, None)
            self._admitted.discard(seq)
            self._reserved.pop(seq, None)
            if seq in self._waiting:
                self._waiting.remove(seq)
                heapq.heapify(self._waiting)
            self._last_activity = time.monotonic()
            self._cond.notify_all()
        if member is not None:
            self.served += 1
            if member.quiet_token is not None:
                self.quiet.remove(member.quiet_token)
            if sweep and member.candidate is not None:
                sandbox.kill_marked(*member.candidate)

    def _reap_loop(self) -> None:
        rounds = 0
        while True:
            time.sleep(REAP_EVERY_S)
            rounds += 1
            if rounds % SWEEP_EVERY == 0:
                sandbox.sweep_orphans()
            with self._cond:
                dead = [seq for seq, member in self._members.items() if not member.alive()]
                overdue = [(seq, member) for seq, member in self._members.items()
                           if seq not in dead and member.timer is not None and member.timer.overdue()]
                idle = (not self._members and not self._reserved and self.gate.holder is None
                        and time.monotonic() - self._last_activity > self.idle_exit_s)
            for seq, member in overdue:
                print(f"[pikeh-device {self.device}] evaluation {seq} ran past its deadline of "
                      f"{member.timer.deadline_s:.0f} s: its supervisor is killed", flush=True)
                member.kill_supervisor()
                dead.append(seq)
            for seq in dead:
                self.leave(seq)
            if idle:
                self.close()
                os._exit(0)  # the GPU goes back to the cluster; bridges holding a handle see the actor end

    # -- the gate ------------------------------------------------------------------------------
    def acquire(self, seq: int, timeout: float) -> bool:
        member = self._members.get(seq)
        timer = member.timer if member is not None else None
        if timer is not None:
            timer.waiting()  # waiting for the gate is the other evaluations' time, not this one's
        granted = self.gate.ticket(seq).acquire(timeout=max(0.0, timeout))
        if timer is not None and granted:
            timer.working()
        return granted

    def release(self, seq: int) -> None:
        self.gate.ticket(seq).release()

    def cancel(self, seq: int) -> None:
        self.gate.ticket(seq).cancel()

    # -- the reference -------------------------------------------------------------------------
    def reference_outputs(self, request_json: str, seeds: list[int], timeout_s: float) -> dict[str, Any]:
        from pike_harness.worker.errors import InfrastructureError
        from pike_harness.worker.records import EvalRequest

        try:
            return {"outputs": self.oracle.outputs(EvalRequest.from_json(request_json), seeds, timeout_s)}
        except InfrastructureError as exc:
            return {"error": str(exc)}

    # -- quiet timing (see pike_harness.worker.scheduling.QuietRegistry) -----------------------
    def spawned(self, seq: int, pid: int, marker: str, quiet: bool) -> None:
        token = self.quiet.add(pid, marker, self.device) if quiet else None
        with self._cond:
            member = self._members.get(seq)
            if member is not None:
                member.candidate, member.quiet_token = (pid, marker), token
                return
        if token is not None:  # already left (reaped): do not keep it registered
            self.quiet.remove(token)

    def quiet_exempt(self, seq: int) -> None:
        """The candidate ``seq`` holds the device now: it is never paused."""
        with self._cond:
            member = self._members.get(seq)
            token = member.quiet_token if member is not None else None
            if member is not None:
                member.quiet_token = None
        if token is not None:
            self.quiet.remove(token)

    def quiet_begin(self, seq: int, exempt_pid: int | None) -> None:
        if self.gate.holder != seq:
            return
        context = self.quiet.quiet(self.device, exempt_pid)
        context.__enter__()
        self._quiet_context = (seq, context)

    def quiet_end(self, seq: int) -> None:
        held = self._quiet_context
        if held is not None and held[0] == seq:
            self._quiet_context = None
            held[1].__exit__(None, None, None)

    def close(self) -> None:
        self.oracle.close()
        shutil.rmtree(self.workdir, ignore_errors=True)


class ActorLock:
    """The ``DeviceLock`` an ``Evaluation`` waits on: each ``acquire`` blocks in ``ray.get`` (so Ray
    lends this task's CPU to other tasks meanwhile) for at most ``timeout`` seconds."""

    def __init__(self, actor: Any, seq: int):
        self.actor, self.seq = actor, seq

    def _call(self, method: str, *args: Any, timeout: float = 0.0) -> Any:
        return call_actor(self.actor, method, *args, timeout=timeout)

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        wait = 0.0 if not blocking else (timeout if timeout is not None and timeout >= 0 else 3600.0)
        return bool(self._call("acquire", self.seq, wait, timeout=wait))

    def release(self) -> None:
        self._call("release", self.seq)


def call_actor(actor: Any, method: str, *args: Any, timeout: float = 0.0) -> Any:
    """A blocking actor call; a lost actor is an infrastructure failure, never a verdict."""
    from pike_harness.worker.errors import InfrastructureError

    try:
        return ray.get(getattr(actor, method).remote(*args), timeout=timeout + RAY_CALL_GRACE_S)
    except ray.exceptions.RayError as exc:
        raise InfrastructureError(f"lost the device actor ({type(exc).__name__}: {str(exc)[:300]})") from None


class ActorOracle:
    """The device actor's reference process, as the supervisor's ``oracle``."""

    def __init__(self, actor: Any):
        self.actor = actor

    def outputs(self, request: Any, seeds: list[int], timeout_s: float) -> list[list[Any]]:
        from pike_harness.worker.errors import InfrastructureError

        reply = call_actor(self.actor, "reference_outputs", request.to_json(), list(seeds), timeout_s,
                           timeout=timeout_s)
        if "error" in reply:
            raise InfrastructureError(reply["error"])
        return reply["outputs"]


_SETTINGS: dict[tuple[str, str | None], Any] = {}
_SETTINGS_LOCK = threading.Lock()


def _settings(node_dir: str, cache: str | None) -> Any:
    """WorkerSettings for this Ray worker process, kept across the tasks it runs (the build cache's
    toolchain probe is paid once per process, not per candidate)."""
    from pike_harness.worker.buildcache import BuildCache
    from pike_harness.worker.supervisor import WorkerSettings

    key = (node_dir, cache)
    with _SETTINGS_LOCK:
        if key not in _SETTINGS:
            workdir = Path(node_dir) / f"worker-{os.getpid()}"
            workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
            root = Path(cache).expanduser() if cache else None
            if root is not None:
                root.mkdir(parents=True, exist_ok=True, mode=0o700)
            _SETTINGS[key] = WorkerSettings(
                workdir=workdir, build_cache=BuildCache(root / "build") if root is not None else None,
                jit_cache_root=(root / "jit") if root is not None else None, environ=physical_environ())
        return _SETTINGS[key]


def physical_environ() -> dict[str, str]:
    """This process's environment without ``CUDA_VISIBLE_DEVICES``: a device actor's ``cuda:N`` is the
    physical index Ray gave it, not an index into what Ray set for this process."""
    return {name: value for name, value in os.environ.items() if name != "CUDA_VISIBLE_DEVICES"}


def default_cache_dir() -> str:
    """This node's build cache: $PIKEH_CACHE_DIR, else the user's cache folder (as ``local``)."""
    if os.environ.get("PIKEH_CACHE_DIR"):
        return os.environ["PIKEH_CACHE_DIR"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pike-harness")


def _wants_warm(evaluation: Any, prewarm: str) -> bool:
    from pike_harness.worker.baseline_modes import JIT_MODES

    if prewarm == "all":
        return True
    if prewarm == "jit":
        return any(flag in evaluation.flags for flag in JIT_FLAGS) or evaluation.request.baseline_mode in JIT_MODES
    return False


def run_candidate(request_json: str, actor: Any, seq: int, attempt: int, config: dict[str, Any]) -> dict[str, Any]:
    """One candidate's whole evaluation on this node; returns ``{"result": record}`` or ``{"infra": why}``.

    ``InfrastructureError`` (the reference failed, the actor vanished) comes back as ``infra`` so the
    bridge can retry elsewhere; any verdict is final and comes back as the worker's result record.
    """
    from pike_harness.worker.errors import InfrastructureError

    def call(method: str, *args: Any) -> None:
        with contextlib.suppress(ray.exceptions.RayError):
            ray.get(getattr(actor, method).remote(*args), timeout=RAY_CALL_GRACE_S)

    cache = config.get("cache")
    if cache == "default":
        cache = default_cache_dir()
    quiet = bool(config.get("quiet", True))
    window: dict[str, Any] = {"node_id": ray.get_runtime_context().get_node_id(),
                              "node_ip": ray.util.get_node_ip_address(), "attempt": attempt,
                              "submitted": time.time()}
    evaluation = None
    try:
        from pike_harness.worker.records import EvalRequest

        request = EvalRequest.from_json(request_json)
        grace = config.get("hold_grace_s")
        hold_s = hold_deadline_s(request.limits, HOLD_GRACE_S if grace is None else float(grace))
        while not call_actor(actor, "admit", seq, os.getpid(), sandbox.process_start(os.getpid()), ADMIT_POLL_S,
                             hold_s, timeout=ADMIT_POLL_S):
            pass
        from pike_harness.worker.supervisor import Evaluation  # torch comes with it: only once admitted

        settings = _settings(str(config["node_dir"]), cache)
        window["load_start"] = time.time()
        evaluation = Evaluation(request, ActorOracle(actor), settings)

        def listener(event: str, ev: Any) -> None:
            if event == "spawned":
                call("spawned", seq, ev.popen.pid, ev.marker, quiet)
            elif event == "timing_start":
                window["timing_start"] = time.time()
                if quiet:
                    call("quiet_begin", seq, ev.session)
            elif event == "timing_end":
                window["timing_end"] = time.time()
                if quiet:
                    call("quiet_end", seq)

        evaluation.listener = listener
        result = evaluation.load()
        if result is None and _wants_warm(evaluation, str(config.get("prewarm") or "jit")):
            result = evaluation.warm()
        window["loaded"] = time.time()
        if result is None:
            lock = ActorLock(actor, seq)
            early = evaluation.wait_for(lock)
            if early is not None:
                result = early
            else:
                window["granted"] = time.time()
                try:
                    call("quiet_exempt", seq)
                    result = evaluation.finish()
                finally:
                    window["released"] = time.time()
                    lock.release()
        result.environment["ray"] = window
        return {"result": result.to_dict()}
    except InfrastructureError as exc:
        return {"infra": str(exc), "node_id": window["node_id"]}
    finally:
        if evaluation is not None:
            evaluation.close()
        call("leave", seq, False)  # evaluation.close() has killed what the candidate started
