"""The host's end of the directory channel: submit requests, get futures of results.

Shared by the ``queue`` evaluator (workers started by hand, by Slurm, anywhere that shares the
folder) and the ``docker`` evaluator (workers it starts in containers), which is why it lives with
the channel and imports only the standard library and the wire records. One thread polls the folder
for this session's results (20 ms, backing off to 250 ms while nothing arrives), watches the
workers' heartbeats, gives back requests held by dead workers, and fails the session's futures with
a clear error when no worker answers.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pike_harness.worker import queue_channel as qc
from pike_harness.worker.records import RUNTIME_ERROR, EvalRequest, EvalResult
from pike_harness.worker.supervise.liveness import STALE_AFTER_S
from pike_harness.worker.supervise.retry import MAX_ATTEMPTS

log = logging.getLogger("pikeh.queue")
CHECK_WORKERS_S = 0.5
LOST_AFTER_CHECKS = 4  # a request seen nowhere this many checks in a row is written again
SWEEP_S = 60.0


class QueueError(Exception):
    """No worker answers, or a worker could not evaluate a request: never a verdict on a candidate."""


@dataclass
class _Pending:
    ticket: str
    request: EvalRequest
    future: Future
    message: dict[str, Any]
    submitted: float = field(default_factory=time.monotonic)
    missing: int = 0  # consecutive checks that found it nowhere in the folder
    rewrites: int = 0


class QueueClient:
    """Sends requests into ``io_dir`` and resolves their futures from the results workers write."""

    def __init__(self, io_dir: Path, *, key: bytes | None = None, wait_for_worker_s: float = 60.0,
                 stale_after_s: float = STALE_AFTER_S, max_attempts: int = MAX_ATTEMPTS,
                 error_type: type[Exception] = QueueError,
                 poll_low_s: float = 0.02, poll_high_s: float = 0.25):
        self.qdir = qc.QueueDir(io_dir)
        try:
            self.qdir.ensure()
        except qc.ChannelError as exc:
            raise error_type(str(exc)) from None
        self.key = key
        self.wait_for_worker_s = wait_for_worker_s
        self.max_attempts = max_attempts
        self.error_type = error_type
        self.session = qc.new_session()
        self.liveness = qc.Liveness(stale_after_s)
        self.stats = {"results": 0, "errors": 0, "stale": 0, "forged": 0, "failed": 0, "given_back": 0}
        self._pending: dict[str, _Pending] = {}
        self._counter = itertools.count(1)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._wake = threading.Event()
        self._live: dict[str, dict[str, Any]] = {}
        self._ever_seen: dict[str, float] = {}  # worker id -> when this session last saw it alive
        self._no_worker_since: float | None = None
        self._backoff = qc.Backoff(poll_low_s, poll_high_s)
        self._started = time.time()
        self._register()
        self._thread = threading.Thread(target=self._loop, name="pikeh-queue", daemon=True)
        self._thread.start()

    def _register(self) -> None:
        qc.register_host(self.qdir, self.session, {"host": socket.gethostname(), "pid": os.getpid(),
                                                   "started": self._started})

    # -- the public side ------------------------------------------------------------------------------
    def submit(self, request: EvalRequest) -> Future[EvalResult]:
        if self._closed.is_set():
            raise self.error_type("the queue client is closed")
        ticket = qc.new_ticket(self.session, next(self._counter))
        future: Future[EvalResult] = Future()
        message = qc.sign({"protocol": qc.PROTOCOL, "kind": "request", "ticket": ticket,
                           "request": dataclasses.asdict(request), "submitted": time.time()}, self.key)
        with self._lock:
            self._pending[ticket] = _Pending(ticket, request, future, message)
        try:
            qc.write_json(self.qdir.requests, qc.request_name(ticket, 0), message)
        except OSError as exc:
            with self._lock:
                self._pending.pop(ticket, None)
            raise self.error_type(f"cannot write to the queue folder {self.qdir.root}: {exc}") from None
        with self._lock:
            withdrawn = ticket not in self._pending
        if withdrawn:  # _fail_all ran between registering and writing: take back what it could not see
            with contextlib.suppress(OSError):
                qc.remove(self.qdir.requests, qc.request_name(ticket, 0))
        self._wake.set()
        return future

    def live_workers(self) -> dict[str, dict[str, Any]]:
        """The workers whose heartbeats are current, as of the last check (twice a second)."""
        with self._lock:
            return dict(self._live)

    def wait_for_workers(self, worker_ids: set[str], timeout_s: float, *,
                         give_up: Callable[[], str | None] | None = None) -> None:
        """Block until every id in ``worker_ids`` beats; ``give_up()`` may return a reason to stop early."""
        deadline = time.monotonic() + timeout_s
        while True:
            beats = qc.read_heartbeats(self.qdir)
            if worker_ids <= set(beats):
                return
            reason = give_up() if give_up is not None else None
            if reason:
                raise self.error_type(reason)
            if time.monotonic() > deadline:
                missing = ", ".join(sorted(worker_ids - set(beats)))
                raise self.error_type(f"no heartbeat from worker(s) {missing} in {self.qdir.workers} "
                                      f"after {timeout_s:g} s")
            time.sleep(0.05)

    def close(self) -> None:
        """Withdraw what is still queued, cancel the futures, and tell workers this session has gone."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._wake.set()
        self._thread.join(timeout=10)
        with contextlib.suppress(OSError):  # hosts/ replaced by a link: refused, and the rest still runs
            qc.unregister_host(self.qdir, self.session)
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
        for item in pending:
            if not item.future.cancel():
                _settle(item.future, exception=self.error_type("the queue client was closed"))
        marker = f"-{self.session}-"
        for folder in (self.qdir.requests, self.qdir.results, self.qdir.failed):
            for name in qc.names(folder):
                if marker in name:
                    with contextlib.suppress(OSError):
                        qc.remove(folder, name)

    def describe(self) -> dict[str, Any]:
        return {"io_dir": str(self.qdir.root), "session": self.session, "signed": bool(self.key),
                "workers": sorted(self.live_workers()), "stats": dict(self.stats)}

    # -- the polling thread ---------------------------------------------------------------------------
    def _loop(self) -> None:
        next_check = next_sweep = 0.0
        while not self._closed.is_set():
            # Each step on its own: one broken folder (results/ unreadable) must not stop the others.
            progressed = _guarded(self._collect_results, 0) + _guarded(self._collect_failed, 0) > 0
            now = time.monotonic()
            if now >= next_check:
                _guarded(self._check_workers, None)
                next_check = now + CHECK_WORKERS_S
            if now >= next_sweep:
                _guarded(lambda: qc.sweep_orphans(self.qdir), None)
                next_sweep = now + SWEEP_S
            self._backoff.wait(self._wake, progressed)
            self._wake.clear()

    def _mine(self, folder: qc.Folder) -> list[str]:
        marker = f"-{self.session}-"
        return [name for name in qc.names(folder) if marker in name]

    def _collect_results(self) -> int:
        count = 0
        for name in self._mine(self.qdir.results):
            ticket = qc.parse_result_name(name)
            if ticket is None:
                continue
            # Take the file away first, so a worker's later (re)write lands as a new file, never lost.
            # By descriptor, as everything here: a link planted in place of results/ is never followed.
            folder = self.qdir.results
            taken = f".taken-{name}-{secrets.token_hex(3)}"
            try:
                qc.move(folder, name, folder, taken)
            except FileNotFoundError:
                continue
            try:
                message = qc.read_json(folder, taken)
            except ValueError as exc:
                qc.quarantine(self.qdir, folder, taken, f"unreadable result: {exc}")
                continue
            with contextlib.suppress(OSError):
                qc.remove(folder, taken)
            if message is not None and self._accept(ticket, message):
                count += 1
        return count

    def _accept(self, ticket: str, message: dict[str, Any]) -> bool:
        if message.get("kind") == "refused" and message.get("ticket") == ticket:
            # Unsigned by design (the worker could not trust the request): it may fail a request, never
            # give it a verdict, so accepting it unchecked costs at most what deleting the request would.
            with self._lock:
                pending = self._pending.pop(ticket, None)
            if pending is None:
                return False
            worker = message.get("worker") or {}
            self.stats["errors"] += 1
            _settle(pending.future, exception=self.error_type(
                f"worker {worker.get('id')} refused the request for {pending.request.task}: {message.get('error')}"))
            return True
        if not qc.verified(message, self.key) or message.get("ticket") != ticket:
            self.stats["forged"] += 1
            log.warning("ignored a result for %s that is not signed with this session's key", ticket)
            return False
        with self._lock:
            pending = self._pending.get(ticket)
            if pending is None:
                self.stats["stale"] += 1
                return False
            worker = message.get("worker") or {}
            if message.get("error"):
                failure = f"could not evaluate {pending.request.task}: {message['error']}"
            else:
                try:
                    result = EvalResult.from_dict(message["result"])
                    failure = ""
                except (AttributeError, KeyError, TypeError, ValueError) as exc:
                    # Signed with this session's key, so its worker's (another version, or compromised):
                    # the worker failed, and the candidate gets no verdict from it.
                    failure = f"sent a result for {pending.request.task} that this harness cannot read: {exc}"
            if failure:
                del self._pending[ticket]
                self.stats["errors"] += 1
                error = self.error_type(f"worker {worker.get('id')} {failure}")
                # Tries spent on this request: the workers that died on it, and this one.
                attempt = message.get("attempt")
                error.attempts = (attempt if isinstance(attempt, int) and attempt >= 0 else 0) + 1  # type: ignore[attr-defined]
                _settle(pending.future, exception=error)
                return True
            if result.request_id != pending.request.request_id:
                self.stats["stale"] += 1
                return False
            del self._pending[ticket]
            self.stats["results"] += 1
        _settle(pending.future, result=result)
        return True

    def _collect_failed(self) -> int:
        count = 0
        for name in self._mine(self.qdir.failed):
            parsed = qc.parse_request_name(name)
            if parsed is None:
                continue
            ticket, attempts = parsed
            with contextlib.suppress(OSError):
                qc.remove(self.qdir.failed, name)
            with self._lock:
                pending = self._pending.pop(ticket, None)
            if pending is None:
                continue
            self.stats["failed"] += 1
            request = pending.request
            _settle(pending.future, result=EvalResult(
                request_id=request.request_id, task=request.task, category=RUNTIME_ERROR, check="worker_lost",
                reason=f"{attempts} worker(s) died, or held it past its deadline, while evaluating this "
                       "candidate (it may kill or stall the process that evaluates it); given up",
                protocol={"name": request.protocol, "params": dict(request.protocol_params)},
                environment={"queue": str(self.qdir.root)}))
            count += 1
        return count

    def _check_workers(self) -> None:
        if not qc.host_waiting(self.qdir, self.session) and not self._closed.is_set():
            # Deleted by a hand or a candidate (containers can write here): workers drop the requests
            # of a host without one, so this session would wait forever. Say again that it waits.
            log.warning("the host file of session %s vanished from %s: writing it again", self.session, self.qdir.root)
            with contextlib.suppress(OSError):
                self._register()
        beats = qc.read_heartbeats(self.qdir)
        self.liveness.update(beats)
        moved = qc.recover_dead_workers(self.qdir, self.liveness, beats, max_attempts=self.max_attempts)
        if moved:
            self.stats["given_back"] += len(moved)
            log.info("gave back %d request(s) held by dead workers", len(moved))
        self._find_lost()
        alive, _dead = self.liveness.split(beats)
        now = time.monotonic()
        with self._lock:
            self._live = alive
            for worker_id in alive:
                self._ever_seen[worker_id] = now
            waiting = bool(self._pending)
        if alive or not waiting:
            self._no_worker_since = None
            return
        if self._no_worker_since is None:
            self._no_worker_since = now
        if now - self._no_worker_since >= self.wait_for_worker_s:
            self._fail_all(self._no_worker_message(now))

    def _find_lost(self) -> None:
        """Write again a request that is nowhere: not queued, not claimed, not answered.

        Files only move forwards (queued -> claimed -> answered) or back to the queue, each move an
        atomic rename, so a request is always somewhere; one that is missing on several checks in a
        row was deleted (by a hand, or by a candidate in a container, which can write to the folder).
        """
        with self._lock:
            if not self._pending:
                return
        seen: set[str] = set()
        for name in qc.names(self.qdir.requests):
            seen.add(name.split(".")[0])
        for worker_id in qc.names(self.qdir.claimed):
            seen.update(name.split(".")[0] for name in qc.names(self.qdir.claimed.sub(worker_id)))
        for folder in (self.qdir.results, self.qdir.failed):
            seen.update(name.split(".")[0] for name in qc.names(folder))
        rewrite: list[Any] = []
        give_up: list[Any] = []
        with self._lock:
            for item in self._pending.values():
                item.missing = 0 if item.ticket in seen else item.missing + 1
                if item.missing >= LOST_AFTER_CHECKS:
                    item.missing = 0
                    item.rewrites += 1
                    (give_up if item.rewrites >= self.max_attempts else rewrite).append(item)
            for item in give_up:
                del self._pending[item.ticket]
        for item in rewrite:
            log.warning("request %s vanished from %s: writing it again", item.ticket, self.qdir.root)
            with contextlib.suppress(OSError):
                qc.write_json(self.qdir.requests, qc.request_name(item.ticket, item.rewrites), item.message)
        for item in give_up:
            _settle(item.future, exception=self.error_type(
                f"the request for {item.request.task} vanished from the queue folder {self.qdir.root} "
                f"{item.rewrites} times (is something deleting files there?)"))

    def _no_worker_message(self, now: float) -> str:
        root = self.qdir.root
        if self._ever_seen:
            last = max(self._ever_seen, key=lambda w: self._ever_seen[w])
            detail = (f"the workers stopped answering (last heartbeat from {last}, "
                      f"{now - self._ever_seen[last]:.0f} s ago)")
        else:
            detail = f"no worker has written a heartbeat to {root / 'workers'} in {self.wait_for_worker_s:g} s"
        return (f"no worker answers on the queue folder {root}: {detail}. Start one that shares this folder: "
                f"`pikeh worker --io-dir {root}` (docs/cluster.md)")

    def _fail_all(self, message: str) -> None:
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
        # Withdraw the requests before settling: a caller woken by the error must find them gone.
        marker = f"-{self.session}-"
        for name in qc.names(self.qdir.requests):
            if marker in name:
                with contextlib.suppress(OSError):
                    qc.remove(self.qdir.requests, name)
        self._no_worker_since = None
        for item in pending:
            _settle(item.future, exception=self.error_type(message))


def _guarded(step: Callable[[], Any], default: Any) -> Any:
    """Run one poller step; a poller that dies strands every future, so log and keep going."""
    try:
        return step()
    except Exception:
        log.exception("queue poller error")
        return default


def _settle(future: Future, *, result: Any = None, exception: BaseException | None = None) -> None:
    with contextlib.suppress(InvalidStateError):
        if exception is not None:
            future.set_exception(exception)
        else:
            future.set_result(result)
