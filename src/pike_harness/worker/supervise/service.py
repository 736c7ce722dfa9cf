"""``python -m pike_harness.worker.supervise.service --io-dir DIR``: the eval worker as a long-running service.

It takes evaluation requests from a directory channel (``queue_channel``), evaluates each with the
evaluation engine (``engine.Engine``: the same object the ``local`` evaluator runs, with its build
cache, pre-started processes, warm-up, quiet timing and first-in-first-out device gate), and writes
the results back, each after the engine's figures (``workers/<id>.engine-stats``). A request
carries everything an evaluation needs, so a worker has no suites and no run store of its own, and
needs only torch, triton (for candidates that use it), click (its options, declared once in
``worker/supervise/command.py`` for this and ``pikeh worker``) and the standard library: it runs by hand,
under Slurm, in Apptainer, or in the container the ``docker`` evaluator starts.

A worker claims only as many requests as it has slots (``--max-active``), so several workers on one
folder share the work. A restarted worker, or any worker that sees another one die, gives the dead
worker's requests back to the queue (the death rule is ``liveness``'s: an unreadable heartbeat is
no news). A request held past its deadline (its stage limits plus a grace) is given back too. On SIGTERM/SIGINT (or, with ``--stdin-lifeline``, when its
standard input closes) it kills what it is evaluating, gives those requests back, and exits.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import io
import logging
import os
import signal
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from pike_harness.worker import queue_channel as qc
from pike_harness.worker.records import EvalRequest, EvalResult
from pike_harness.worker.supervise import trusted_files
from pike_harness.worker.supervise.devices import resolve_devices
from pike_harness.worker.supervise.engine import EngineConfig, EngineError, resolve
from pike_harness.worker.supervise.errors import InfrastructureError
from pike_harness.worker.supervise.liveness import HOLD_GRACE_S, STALE_AFTER_S, HoldTimer, hold_deadline_s
from pike_harness.worker.supervise.retry import MAX_ATTEMPTS

log = logging.getLogger("pikeh.worker")
MEMORY_SHARE = 0.6  # of a container's memory limit, the most one candidate may use
ENGINE_STATS_SUFFIX = ".engine-stats"  # workers/<id><suffix>: the engine's figures, rewritten after each result


class ServiceError(Exception):
    """A problem with how the worker was started (bad option, folder unusable, id in use): one line."""


@dataclass
class ServiceConfig:
    """How one worker runs; ``pikeh worker`` and ``python -m pike_harness.worker.supervise.service`` fill it."""

    io_dir: Path
    device: str = "auto"  # auto, cpu, cuda, cuda:N or cuda:0,1
    max_active: int | None = None  # requests claimed at once; None: the engine's capacity (as local admits)
    worker_id: str | None = None  # None: <host>-<pid>
    workdir: Path | None = None  # private files (reference outputs, scratch); None: a temporary folder
    heartbeat_s: float = 1.0
    stale_after_s: float = STALE_AFTER_S  # a heartbeat that stands still this long is a dead worker's
    max_attempts: int = MAX_ATTEMPTS  # workers that may die on (or overrun) one request before it is given up
    hold_grace_s: float = HOLD_GRACE_S  # added to a request's stage limits: its deadline while held here
    key: bytes | None = None  # shared HMAC key: requests must carry it, results are signed with it
    stdin_lifeline: bool = False  # exit when standard input reaches end-of-file
    replace: bool = False  # the previous worker with this id is known to be dead: take over at once
    idle_exit_s: float | None = None  # exit after this long without work (batch jobs)
    poll_low_s: float = 0.02
    poll_high_s: float = 0.25
    # The evaluation engine's settings (build cache, pre-start, prewarm, quiet timing, CPU pinning):
    # its device and workdir are the worker's own (``device``, ``workdir`` above).
    engine: EngineConfig = field(default_factory=EngineConfig)


@dataclass
class _Job:
    ticket: str
    session: str
    attempt: int
    claim: str  # its name in this worker's claim folder
    request: EvalRequest
    timer: HoldTimer
    future: Any = None
    started: float = field(default_factory=time.monotonic)
    overran: bool = False  # past its deadline and given back: its late outcome is not written


def cgroup_memory_mb() -> int | None:
    """The memory limit of this process's cgroup (a container's ``--memory``), None when unlimited."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path, encoding="ascii") as handle:
                text = handle.read().strip()
        except OSError:
            continue
        if not text.isdigit():
            return None  # "max": no limit
        value = int(text)
        return None if value >= 1 << 60 else value // (1024 * 1024)  # cgroup v1 writes "no limit" as ~2**63
    return None


def make_undumpable() -> None:
    """Keep same-user processes (candidates included) out of this process's memory and /proc files.

    The worker holds the channel's key; a candidate runs as the same user, and without this it could
    read the key through ``/proc/<worker>/mem`` or ptrace. Children get their own dumpable flag back
    when they exec, so the candidate's own process is unaffected.
    """
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0


class WorkerService:
    """Claims requests, evaluates them on a thread pool, writes results; ``run()`` until ``stop()``."""

    def __init__(self, config: ServiceConfig):
        if config.max_active is not None and config.max_active < 1:
            raise ServiceError("--max-active must be at least 1")
        self.config = config
        try:
            self.qdir = qc.QueueDir(config.io_dir).ensure()
            self.worker_id = qc.check_worker_id(config.worker_id or qc.default_worker_id())
        except qc.ChannelError as exc:
            raise ServiceError(str(exc)) from None
        workdir = Path(config.workdir).absolute() if config.workdir else None
        if workdir is not None and (workdir == self.qdir.root or self.qdir.root in workdir.parents):
            raise ServiceError("--workdir must not be inside --io-dir: the queue folder is shared, the "
                               "workdir holds reference outputs")
        try:
            self.devices = resolve_devices(config.device)
        except ValueError as exc:
            raise ServiceError(str(exc)) from None
        # In a container with a memory limit, each candidate gets at most 60% of it, so the
        # supervisor's policing stops a memory hog before the kernel's OOM killer picks a victim
        # (perhaps the worker itself).
        cgroup_mb = cgroup_memory_mb()
        self.memory_cap_mb = int(cgroup_mb * MEMORY_SHARE) if cgroup_mb else None
        try:
            self.max_active = config.max_active or resolve(config.engine, self.devices).capacity
        except EngineError as exc:
            raise ServiceError(str(exc)) from None
        self.claims = self.qdir.claim_folder(self.worker_id)  # this worker's claim folder
        self.heartbeat = qc.Heartbeat(self.qdir, self.worker_id, {
            "devices": self.devices, "max_active": self.max_active, "version": _version()})
        self.liveness = qc.Liveness(config.stale_after_s)
        self.active: dict[str, _Job] = {}
        self.done = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._own_workdir = workdir is None
        self.workdir = workdir
        self.engine: Any = None  # the evaluation engine, started by _prepare()
        self._stats_lock = threading.Lock()

    def _prepare(self) -> None:
        """The heavy part (the engine imports torch), once the worker id is known to be ours."""
        from pike_harness.worker.supervise.engine import Engine

        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="pikeh-worker-"))
        self.workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        engine_config = dataclasses.replace(self.config.engine, device=self.config.device, workdir=self.workdir)
        try:
            self.engine = Engine(engine_config)
        except EngineError as exc:
            raise ServiceError(str(exc)) from None
        self.stats_name = f"{self.worker_id}{ENGINE_STATS_SUFFIX}"
        self.engine_settings = self.engine.describe()["scheduling"]

    # -- life cycle --------------------------------------------------------------------------------
    def stop(self) -> None:
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self) -> int:
        """Serve until stopped (or idle past ``idle_exit_s``); give back what is unfinished; 0 on success."""
        self._take_over_id()
        if self.stopping:
            return 0
        self._prepare()
        self.heartbeat.beat(active=0, done=0)
        with self.claims.open(create=True):
            pass
        beater = threading.Thread(target=self._beat_loop, name="pikeh-heartbeat", daemon=True)
        beater.start()
        log.info("worker %s serves %s on %s, %d at a time", self.worker_id, self.qdir.root,
                 ", ".join(self.devices), self.max_active)
        backoff = qc.Backoff(self.config.poll_low_s, self.config.poll_high_s)
        next_check = 0.0
        idle_since = time.monotonic()
        try:
            while not self.stopping:
                now = time.monotonic()
                took = 0
                try:
                    if now >= next_check:
                        self._recover_others()
                        self._give_back_overdue()
                        next_check = now + self.config.heartbeat_s
                    took = self._fill_slots()
                except OSError as exc:  # a shared file system's hiccup must not end the worker
                    log.warning("queue folder error (retrying): %s", exc)
                except Exception:  # noqa: BLE001 - nor may anything planted in the folder: log, go on
                    log.exception("error while serving the queue folder (going on)")
                with self._lock:
                    busy = bool(self.active)
                if took or busy:
                    idle_since = now
                elif self.config.idle_exit_s is not None and now - idle_since > self.config.idle_exit_s:
                    log.info("no work for %.0f s: exiting", self.config.idle_exit_s)
                    break
                backoff.wait(self._stop, took > 0)
        finally:
            self._shutdown()
            beater.join(timeout=5)
        return 0

    def _take_over_id(self) -> None:
        """Refuse an id a live worker uses; give back what a dead predecessor with this id held.

        The predecessor is judged by the shared rule: its heartbeat must stand still (or stay
        unreadable, or missing while it still holds claims) for the whole window before its claims
        are taken; a heartbeat caught mid-write is no news, never a death."""
        observer = qc.Liveness(self.config.stale_after_s)
        first: tuple[Any, Any] | None = None  # the first readable beat's (epoch, seq)
        waited = False
        while not self.config.replace:
            beats = self._own_heartbeat()
            beat = beats.get(self.worker_id)
            held = qc.names(self.claims)
            if beat is None and not beats.unreadable and (not waited or not held):
                break  # no heartbeat and nothing held (or a clean stop deleted it): nothing to wait for
            if beat is not None:
                if beat.get("state") == "stopped":
                    break
                token = (beat.get("epoch"), beat.get("seq"))
                if first is not None and token != first:
                    raise ServiceError(f"worker id {self.worker_id} is in use by a live worker on "
                                       f"{beat.get('host')}: pick another --worker-id")
                first = token
            observer.update(beats)
            if not observer.is_alive(self.worker_id, beat):
                break
            here = qc.machine_identity()
            if beat is not None and all(beat.get(k) == v for k, v in here.items()):
                raise ServiceError(f"worker id {self.worker_id} is in use by process {beat.get('pid')} "
                                   "on this machine: pick another --worker-id")
            if not waited:
                log.info("waiting up to %.0f s for the earlier worker %s to fall silent",
                         self.config.stale_after_s, self.worker_id)
                waited = True
            if self._stop.wait(self.config.heartbeat_s):
                return
        moved = qc.release_claims(self.qdir, self.worker_id, died=True, max_attempts=self.config.max_attempts)
        if moved:
            log.info("gave back %d request(s) an earlier worker %s held when it died", len(moved),
                     self.worker_id)

    def _own_heartbeat(self) -> qc.Heartbeats:
        """The heartbeat under this worker's id, as an observer reads it (unreadable noted)."""
        try:
            beat = qc.read_json(self.qdir.workers, self.heartbeat.name, max_bytes=qc.HEARTBEAT_BYTES)
        except (ValueError, OSError):
            return qc.Heartbeats(unreadable={self.worker_id})
        return qc.Heartbeats({self.worker_id: beat} if beat is not None else {})

    def _beat_loop(self) -> None:
        while not self._stop.wait(self.config.heartbeat_s):
            with self._lock:
                active, done = len(self.active), self.done
                overdue = [job.claim for job in self.active.values() if not job.overran and job.timer.overdue()]
            with contextlib.suppress(OSError):
                # Overdue requests are listed, so an observer gives them back should this worker's main
                # loop be stuck while this thread still beats (queue_channel.release_overdue).
                self.heartbeat.beat(active=active, done=done, overdue=overdue)

    def _give_back_overdue(self) -> None:
        """A request held past its own stage limits plus the grace goes back to the queue, counted as
        an attempt (as if this worker had died on it); its evaluation is aborted. Its slot stays taken
        until the evaluation's thread returns, so a stuck thread never lets the worker overcommit."""
        with self._lock:
            late = [job for job in self.active.values() if not job.overran and job.timer.overdue()]
            for job in late:
                job.overran = True
        for job in late:
            moved: str | None = None
            with contextlib.suppress(OSError):  # the evaluation is aborted below all the same
                moved = qc.release_claim(self.qdir, self.claims, job.claim, died=True,
                                         max_attempts=self.config.max_attempts)
            log.warning("%s (%s) ran past its deadline of %.0f s here: given back as %s", job.ticket,
                        job.request.task, job.timer.deadline_s, moved)
            if job.future is not None:
                with contextlib.suppress(Exception):
                    self.engine.abort([job.future])

    def _shutdown(self) -> None:
        """Kill what is in flight, give those requests back uncounted, stop the reference processes."""
        self._stop.set()
        with self._lock:
            futures = [job.future for job in self.active.values() if job.future is not None]
        if self.engine is not None:
            self.engine.abort(futures)  # killed at their next policing step; their requests go back below
            self.engine.close()
            with contextlib.suppress(OSError):
                qc.remove(self.qdir.workers, self.stats_name)  # a stopped worker leaves nothing in workers/
        moved = qc.release_claims(self.qdir, self.worker_id, died=False, max_attempts=self.config.max_attempts)
        if moved:
            log.info("gave back %d unfinished request(s)", len(moved))
        with contextlib.suppress(OSError):
            self.heartbeat.remove()
        qc.remove_claim_folder(self.qdir, self.worker_id)
        if self._own_workdir:
            assert self.workdir is not None  # made by _prepare, which ran before the serving this ends
            trusted_files.remove_tree(self.workdir)  # never recursive, never follows a candidate's link
        log.info("worker %s stopped after %d evaluation(s)", self.worker_id, self.done)

    # -- taking work ---------------------------------------------------------------------------------
    def _recover_others(self) -> None:
        beats = qc.read_heartbeats(self.qdir)
        self.liveness.update(beats)
        moved = qc.recover_dead_workers(self.qdir, self.liveness, beats, max_attempts=self.config.max_attempts,
                                        skip=self.worker_id)
        if moved:
            log.info("gave back %d request(s) held by dead worker(s): %s", len(moved), ", ".join(moved))

    def _fill_slots(self) -> int:
        with self._lock:
            free = self.max_active - len(self.active)
        took = 0
        if free <= 0:
            return 0
        for name in qc.names(self.qdir.requests):
            if took >= free or self.stopping:
                break
            if qc.parse_request_name(name) is None:
                continue
            if qc.claim(self.qdir, name, self.worker_id) is not None and self._start_guarded(name):
                took += 1
        return took

    def _start_guarded(self, name: str) -> bool:
        """``_start``, where nothing a request file holds may end the worker: a request that fails in an
        unforeseen way is set aside in ``bad/`` (a folder error gives it back, counted as an attempt)."""
        try:
            return self._start(name)
        except OSError as exc:
            log.warning("could not start %s (%s): given back", name, exc)
            with contextlib.suppress(OSError):
                qc.release_claim(self.qdir, self.claims, name, died=True, max_attempts=self.config.max_attempts)
        except Exception as exc:  # noqa: BLE001 - see above
            log.exception("could not start %s: set aside in bad/", name)
            qc.quarantine(self.qdir, self.claims, name, f"the worker failed on it: {type(exc).__name__}: {exc}")
        return False

    def _start(self, name: str) -> bool:
        ticket, attempt = qc.parse_request_name(name) or ("", 0)
        try:
            message = qc.read_json(self.claims, name)
        except ValueError as exc:
            qc.quarantine(self.qdir, self.claims, name, f"unreadable request: {exc}")
            return False
        if message is None:
            return False
        if not qc.verified(message, self.config.key) or message.get("ticket") != ticket:
            qc.quarantine(self.qdir, self.claims, name, "the request is not signed with this worker's key")
            if qc.is_ticket(ticket) and qc.host_waiting(self.qdir, qc.ticket_session(ticket)):
                # Unsigned on purpose: a host with another key could not check a signature. A refusal
                # can only fail a request, never give it a verdict.
                qc.write_json(self.qdir.results, qc.result_name(ticket), {
                    "protocol": qc.PROTOCOL, "kind": "refused", "ticket": ticket,
                    "worker": {"id": self.worker_id, "epoch": self.heartbeat.epoch},
                    "error": "the request is not signed with this worker's key (do the host and the worker use "
                             "different keys, or did something alter it in the queue folder?)"})
            return False
        session = qc.ticket_session(ticket)
        if not qc.host_waiting(self.qdir, session):
            log.info("dropped %s: its host has gone", ticket)
            qc.remove(self.claims, name)
            return False
        try:
            request = EvalRequest.from_dict(message["request"])
        except (KeyError, TypeError, ValueError) as exc:
            self._write(ticket, attempt, None, error=f"unreadable request: {exc}")
            qc.remove(self.claims, name)
            return False
        cap = self.memory_cap_mb
        if cap is not None and (request.limits.memory_mb is None or request.limits.memory_mb > cap):
            request = dataclasses.replace(request, limits=dataclasses.replace(request.limits, memory_mb=cap))
        job = _Job(ticket, session, attempt, name, request,
                   HoldTimer(hold_deadline_s(request.limits, self.config.hold_grace_s)))
        job.timer.waiting()  # until its candidate starts: queued behind other requests for a CPU slot
        with self._lock:
            self.active[ticket] = job
        log.info("took %s (%s, attempt %d)", ticket, request.task, attempt + 1)
        # The engine picks the device (the least busy one), as it does for ``local``.
        try:
            job.future = self.engine.submit(request, fixed_device=False, on_event=job.timer.on_event)
        except BaseException:
            with self._lock:
                self.active.pop(ticket, None)  # its slot is free again; the caller sets the request aside
            raise
        job.future.add_done_callback(lambda future: self._evaluated(job, future))
        return True

    # -- one evaluation ------------------------------------------------------------------------------
    def _evaluated(self, job: _Job, future: Any) -> None:
        """The engine's verdict (or its failure) for ``job``: write it back, unless the worker is stopping."""
        result: EvalResult | None = None
        error: str | None = None
        if self.stopping or future.cancelled():
            # Not finished here: the request goes back to the queue (see _shutdown).
            with self._lock:
                self.active.pop(job.ticket, None)
            return
        exc = future.exception()
        if exc is None:
            result = future.result()
        elif isinstance(exc, InfrastructureError):
            error = str(exc)
        else:
            log.error("evaluating %s failed:\n%s", job.ticket,
                      "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)))
            error = f"the worker failed: {type(exc).__name__}: {exc}"
        self._write_stats()  # first: a host that sees this result finds figures that include it
        self._finish(job, result, error)

    def _write_stats(self) -> None:
        """The engine's figures for hosts and benchmarks (``QueueEvaluator.stats()`` reads them)."""
        with self._stats_lock, contextlib.suppress(OSError, TypeError, ValueError):
            qc.write_json(self.qdir.workers, self.stats_name,
                          {"worker_id": self.worker_id, "engine": self.engine_settings,
                           "stats": self.engine.stats()}, fsync=False)

    def _finish(self, job: _Job, result: EvalResult | None, error: str | None) -> None:
        if job.overran:  # given back already: the request is the queue's again
            with self._lock:
                self.active.pop(job.ticket, None)
                self.done += 1
            log.info("%s finished after it was given back: outcome dropped", job.ticket)
            return
        try:
            if result is not None:
                result.environment["worker"] = {"id": self.worker_id, "epoch": self.heartbeat.epoch}
            if qc.host_waiting(self.qdir, job.session):
                self._write(job.ticket, job.attempt, result, error=error)
                outcome = error or f"{result.category if result else '?'}"
                log.info("done %s: %s (%.1f s)", job.ticket, outcome, time.monotonic() - job.started)
            else:
                log.info("done %s, but its host has gone: result dropped", job.ticket)
            qc.remove(self.claims, job.claim)
        except OSError as exc:
            # Undelivered, the request must not stay claimed by a live worker (its host would wait
            # forever): give it back, counted as an attempt, so another try (or the give-up) follows.
            moved: str | None = None
            with contextlib.suppress(OSError):
                moved = qc.release_claim(self.qdir, self.claims, job.claim, died=True,
                                         max_attempts=self.config.max_attempts)
            log.error("could not write the result of %s: %s; request given back as %s", job.ticket, exc, moved)
        finally:
            with self._lock:
                self.active.pop(job.ticket, None)
                self.done += 1

    def _write(self, ticket: str, attempt: int, result: EvalResult | None, *, error: str | None) -> None:
        message: dict[str, Any] = {
            "protocol": qc.PROTOCOL, "kind": "result", "ticket": ticket, "attempt": attempt,
            "worker": {"id": self.worker_id, "epoch": self.heartbeat.epoch, "host": self.heartbeat.info["host"]},
        }
        if result is not None:
            message["request_id"] = result.request_id
            message["result"] = result.to_dict()
        else:
            message["error"] = error or "the worker produced no result"
        qc.write_json(self.qdir.results, qc.result_name(ticket), qc.sign(message, self.config.key))


def _version() -> str:
    from pike_harness import __version__

    return __version__


# -- entry points ------------------------------------------------------------------------------------

def _watch_stdin(service: WorkerService) -> None:
    """Stop the worker when standard input closes: the process that started it has gone."""
    try:
        # A buffered reader at run time (typeshed declares sys.stdin.buffer as BinaryIO, without read1).
        stdin = cast(io.BufferedReader, sys.stdin.buffer)
        while stdin.read1(65536):
            pass
    except (OSError, ValueError):
        pass
    log.info("standard input closed: stopping")
    service.stop()


def serve(config: ServiceConfig) -> int:
    """Run a worker in this process until a signal (or end of stdin with ``stdin_lifeline``) stops it."""
    make_undumpable()
    service = WorkerService(config)
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            previous[signum] = signal.signal(signum, lambda *_: service.stop())
    if config.stdin_lifeline:
        threading.Thread(target=_watch_stdin, args=(service,), name="pikeh-lifeline", daemon=True).start()
    try:
        return service.run()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def read_key_line(stream: Any) -> bytes:
    """The key as the first line of ``stream`` (how the docker evaluator hands it over: never in argv,
    the environment or a file a candidate could read)."""
    key = stream.readline().strip()
    if len(key) < 16:
        raise ServiceError("--key-stdin: expected a key of at least 16 characters on the first line of stdin")
    return key


def setup_logging(quiet: bool) -> None:
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, stream=sys.stderr,
                        format="%(asctime)s pikeh-worker %(message)s", datefmt="%H:%M:%S")


def main(argv: list[str] | None = None) -> int:
    """``python -m pike_harness.worker.supervise.service``: the options are ``pikeh worker``'s (worker/supervise/command.py)."""
    from pike_harness.worker.supervise.command import STANDALONE, standalone

    try:
        standalone.main(args=argv, prog_name=STANDALONE, standalone_mode=True)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


if __name__ == "__main__":
    code = main()
    # Everything is given back and cleaned up by now; skip the interpreter's teardown of torch
    # (1-3 s), which would only delay a restart by Slurm or the docker evaluator.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
