"""The harness's side of the ``ray`` evaluator: futures in this process, the Ray driver in another.

``RayEvaluator`` starts ``python -m pikeh_ray.bridge`` (the only process that imports Ray), sends it
each prepared request and resolves the request's future with the result record the bridge sends
back. When the bridge ends (the cluster went away, Ray stopped it, it crashed), every evaluation it
held fails with ``EvaluatorError``, never with a verdict, and the next submission starts a new
bridge: if the cluster is back, the run carries on; if not, the error comes within seconds and the
run loop stops the run for a later resume (docs/cluster.md, "Ray").
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import itertools
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from pike_harness.api import (
    EvalRequest,
    EvalResult,
    Evaluator,
    EvaluatorError,
    EvaluatorOptions,
    apply_options,
    check_protocol,
    evaluator_config,
)
from pike_harness.worker.api import remove_tree

INSTALL_HINT = "Ray is not installed here: pip install 'pike-harness[ray]' (on this machine and every node)"
CONNECT_TIMEOUT_S = 120.0
RETRY_BRIDGE_AFTER_S = 3.0  # after a failed start, submissions fail at once for this long
DEVICES = ("auto", "cuda", "cpu")
PLACEMENTS = ("task", "spread")


def ray_available() -> bool:
    """Whether Ray is importable here, without importing it (that is the bridge's job)."""
    try:
        return importlib.util.find_spec("ray") is not None
    except (ImportError, ValueError):
        return False


def bridge_environment() -> dict[str, str]:
    """The harness's environment minus its secrets (API keys stay here); Ray's own settings kept."""
    from pike_harness.worker.api import is_secret_name

    return {name: value for name, value in os.environ.items()
            if name.startswith("RAY_") or not is_secret_name(name)}


def answer(message: dict[str, Any]) -> EvalResult | EvaluatorError:
    """What the bridge's ``result`` or ``error`` message means for its evaluation: the verdict, or
    the cluster's failure. A result record this harness cannot read (a device actor of another
    version, or a compromised node: an unknown category, a missing field) is the cluster's failure
    too, never a verdict on the candidate."""
    if message.get("op") == "result":
        try:
            return EvalResult.from_dict(message["result"])
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            return EvaluatorError(f"ray: a device actor sent a result this harness cannot read: {exc}")
    attempts = message.get("attempts")
    return EvaluatorError(f"ray: {message.get('reason')}", attempts=attempts if isinstance(attempts, int) else 1)


class _Link:
    """One bridge process and the reader thread that resolves futures from its messages."""

    def __init__(self, owner: RayEvaluator, number: int):
        from pike_harness.worker.api import Channel

        self.owner = owner
        self.log_path = owner.workdir / f"ray-bridge-{number}.log"
        self.jobs: dict[str, Future[EvalResult]] = {}
        self.ready = threading.Event()
        self.ended = threading.Event()
        self.reason: str | None = None
        self.fatal = False  # the bridge said why it stopped (its log adds nothing then)
        self.status: dict[str, Any] = {}
        self.info: dict[str, Any] = {}
        self.stats_waiters: dict[str, tuple[threading.Event, dict[str, Any]]] = {}
        self._lock = threading.Lock()
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen([sys.executable, "-m", "pikeh_ray.bridge"], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, stderr=log, env=bridge_environment(),
                                          cwd=owner.workdir, start_new_session=True)
        assert self.popen.stdin is not None and self.popen.stdout is not None
        self.channel = Channel(self.popen.stdout.fileno(), self.popen.stdin.fileno())
        self.send({"op": "start", "config": owner.bridge_config})
        self.thread = threading.Thread(target=self._read, name="pikeh-ray-link", daemon=True)
        self.thread.start()

    def send(self, message: dict[str, Any]) -> bool:
        with self._lock:
            if self.ended.is_set():
                return False
            try:
                self.channel.send(message)
                return True
            except OSError:
                return False

    def submit(self, job_id: str, request: EvalRequest, future: Future[EvalResult]) -> bool:
        with self._lock:
            if self.ended.is_set():
                return False
            self.jobs[job_id] = future
        if not self.send({"op": "submit", "id": job_id, "request": dataclasses.asdict(request)}):
            with self._lock:
                self.jobs.pop(job_id, None)
            return False
        return True

    def device_stats(self, timeout: float) -> dict[str, Any]:
        """Ask the bridge for every live device actor's engine figures; {} if it does not answer."""
        key = f"stats-{time.monotonic_ns()}"
        waiter: tuple[threading.Event, dict[str, Any]] = (threading.Event(), {})
        with self._lock:
            self.stats_waiters[key] = waiter
        if self.send({"op": "stats", "id": key}):
            waiter[0].wait(timeout)
        with self._lock:
            self.stats_waiters.pop(key, None)
        return dict(waiter[1])

    def _read(self) -> None:
        from pike_harness.worker.api import ChannelClosed, ProtocolViolation

        try:
            while True:
                message = self.channel.receive(deadline=None, poll_s=1.0)
                if message is None:
                    if self.popen.poll() is not None:
                        break
                    continue
                self._handle(message)
        except (ChannelClosed, ProtocolViolation, OSError):
            pass
        self._end(self.reason or "the Ray bridge process ended")

    def _handle(self, message: dict[str, Any]) -> None:
        op = message.get("op")
        if op == "ready":
            self.info = message
            self.ready.set()
        elif op == "status":
            self.status = message
        elif op == "stats":
            with self._lock:
                waiter = self.stats_waiters.pop(str(message.get("id")), None)
            if waiter is not None:
                waiter[1].update(message.get("devices") or {})
                waiter[0].set()
        elif op in ("result", "error"):
            job_id = str(message.get("id"))
            with self._lock:
                future = self.jobs.pop(job_id, None)
                answered = job_id in self.owner.answered
                self.owner.answered.add(job_id)
            if answered:
                self.owner.duplicates += 1  # cannot happen by design; if it did, the first answer stands
            if future is None or future.done():
                return
            outcome = answer(message)
            if isinstance(outcome, EvalResult):
                future.set_result(outcome)
            else:
                future.set_exception(outcome)
        elif op == "fatal":
            self.reason, self.fatal = str(message.get("reason")), True

    def _end(self, reason: str) -> None:
        with self._lock:
            if self.ended.is_set():
                return
            self.ended.set()
            jobs, self.jobs = self.jobs, {}
        self.ready.set()
        self.reason = reason
        if jobs:
            message = f"ray: {reason}; {len(jobs)} evaluation(s) in flight were not judged{self.log_hint()}"
            for future in jobs.values():
                if not future.done():
                    future.set_exception(EvaluatorError(message))
        self.kill()

    def log_hint(self) -> str:
        from pike_harness.worker.api import tail

        text = tail(self.log_path, 1500).strip()
        return f" (bridge log {self.log_path}: ...{text[-600:]})" if text else ""

    def close(self, timeout: float = 20.0) -> None:
        self.send({"op": "close"})
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=timeout)
        self._end("the evaluator was closed")

    def kill(self) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.popen.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=10)
        for stream in (self.popen.stdin, self.popen.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()


class RayEvaluator(Evaluator):
    """Candidates checked and timed on a Ray cluster's GPUs, through the bridge process."""

    name = "ray"

    def __init__(self, options: EvaluatorOptions):

        if not ray_available():
            raise EvaluatorError(INSTALL_HINT)
        check_protocol(options)
        device = (options.device or "auto").strip().lower()
        if device not in DEVICES:
            raise EvaluatorError(f"--device {options.device}: with the ray evaluator, Ray assigns whole GPUs; "
                                 "write auto, cuda or cpu")
        from . import RayConfig

        config = evaluator_config(options, RayConfig)
        self.options = options
        self.address = str(config.ray_address or os.environ.get("RAY_ADDRESS") or "auto")
        cache = config.ray_build_cache
        if cache is not None and str(cache).strip().lower() in ("off", "none", "no", ""):
            cache = None
        elif cache is None:
            cache = "default"
        placement = str(config.ray_placement or "task")
        if placement not in PLACEMENTS:
            raise EvaluatorError(f"--ray-placement must be one of {', '.join(PLACEMENTS)}")
        if config.ray_retries is not None:  # retries after the first try: the policy's attempts - 1
            self.retry_policy = dataclasses.replace(self.retry_policy, max_attempts=int(config.ray_retries) + 1)
        self.bridge_config: dict[str, Any] = {
            "address": self.address, "device": device, "placement": placement,
            "retry": self.retry_policy.to_dict(),
            # Added to a request's stage limits: how long it may be worked on before the device actor
            # counts it stuck (liveness.HoldTimer).
            "hold_grace_s": float(config.ray_hold_grace) if config.ray_hold_grace is not None else None,
            "inflight": int(config.ray_inflight) if config.ray_inflight else None,
            "node_dir": str(config.ray_node_dir) if config.ray_node_dir else None,
            "cache": str(cache) if cache is not None else "off",
            "unsafe_no_sandbox": bool(config.unsafe_no_sandbox),
        }
        self.connect_timeout_s = float(config.ray_connect_timeout or CONNECT_TIMEOUT_S)
        self._own_workdir = options.workdir is None
        self.workdir: Path = Path(options.workdir or tempfile.mkdtemp(prefix="pikeh-ray-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._numbers = itertools.count(1)
        self._link: _Link | None = None
        self._failed_at = 0.0
        self._failure = ""
        self._closed = False
        self.bridges_started = 0
        self.duplicates = 0  # answers for an evaluation already answered (0 by design; tests check it)
        self.answered: set[str] = set()
        try:
            self._connect()  # a cluster that is not there is a one-line error now, not at the first candidate
        except EvaluatorError:
            self.close()
            raise

    # -- the bridge ----------------------------------------------------------------------------
    def _connect(self) -> _Link:
        """A ready bridge (starting one if needed); EvaluatorError when the cluster cannot be reached."""
        with self._lock:
            link = self._link
            if link is not None and not link.ended.is_set():
                return link
            if time.monotonic() - self._failed_at < RETRY_BRIDGE_AFTER_S:
                raise EvaluatorError(self._failure)
            link = _Link(self, next(self._numbers))
            self.bridges_started += 1
            if not link.ready.wait(self.connect_timeout_s):
                link._end(f"no answer from the Ray cluster at {self.address} within {self.connect_timeout_s:g} s")
            if link.ended.is_set():
                self._failed_at = time.monotonic()
                self._failure = (f"cannot use the Ray cluster at {self.address}: {link.reason}"
                                 f"{'' if link.fatal else link.log_hint()}")
                raise EvaluatorError(self._failure)
            self._link = link
            return link

    def prepare(self, request: EvalRequest) -> EvalRequest:
        """The request as this evaluator runs it: its protocol and stage limits (the bridge sets the
        device: the GPU of the device actor it dispatches to)."""
        return apply_options(request, self.options)

    def submit(self, request: EvalRequest) -> Future[EvalResult]:
        if self._closed:
            raise EvaluatorError("this evaluator is closed")
        future: Future[EvalResult] = Future()
        prepared = self.prepare(request)
        job_id = f"{next(self._ids)}-{request.request_id}"
        for _ in range(2):  # a bridge that ended between the check and the send gets one replacement
            try:
                link = self._connect()
            except EvaluatorError as exc:
                future.set_exception(exc)
                return future
            if link.submit(job_id, prepared, future):
                return future
        future.set_exception(EvaluatorError(f"ray: the bridge ended while submitting: {link.reason}"))
        return future

    # -- reporting -----------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        """The bridge's latest view: devices (node, GPU, in flight, done), queue length."""
        link = self._link
        return dict(link.status) if link is not None else {}

    def stats(self) -> dict[str, Any]:
        """Each live device actor's engine: ``{"devices": {actor name: {"engine": its settings,
        "stats": its figures, "device", "node_id", "served"}}}`` (the figures ``local`` reports)."""
        link = self._link
        if link is None or link.ended.is_set():
            return {}
        return {"devices": link.device_stats(timeout=60.0)}

    def describe(self) -> dict[str, Any]:
        from pike_harness.worker.api import get_protocol

        protocol = get_protocol(self.options.protocol, self.options.protocol_params)
        status = self.status()
        devices = [d for d in status.get("devices", []) if d.get("ready") and not d.get("dead")]
        link = self._link
        return {"evaluator": self.name, "address": self.address,
                "ray_version": link.info.get("ray_version") if link else None,
                "kind": status.get("kind"),
                "devices": [f"{d.get('host')}/{d.get('node_id', '')[:8]}/{d.get('device')}" for d in devices],
                "nodes": sorted({d.get("node_id") for d in devices}),
                "protocol": {**protocol.describe(), "params": dict(self.options.protocol_params)},
                "placement": self.bridge_config["placement"], "retries": self.retry_policy.max_attempts - 1,
                "inflight_per_device": self.bridge_config["inflight"]}

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._lock:
            link, self._link = self._link, None
        if link is not None:
            with link._lock:
                futures = list(link.jobs.values())
            for future in futures:
                future.cancel()
            link.close()
        if self._own_workdir:

            remove_tree(self.workdir)  # never recursive, never follows a candidate's link
