"""Reference outputs, computed in a trusted process of their own: never where a candidate runs.

PIKE computed the reference in the candidate's process, right after it, which is how a candidate can
find the reference's output in a freed buffer or make the reference "match" by mutating the inputs
they share. Here one long-lived reference process per device (``ReferenceOracle``) builds each task's
``Model`` once and serves three requests:

* ``write_inputs``: the task's input sets for the hidden seeds, written (``torch.save``) into the
  evaluation's exchange folder, so the candidate's process receives tensors and never a seed (a seed
  it printed could otherwise reach a later prompt through its logs);
* ``compare``: the reference outputs for the public and hidden seeds, computed once per (task,
  weights, precision, device, seed sequence) on a fresh deep copy of the model (a stateful model
  sees the same call sequence as the candidate's) and kept on the device in a byte-capped LRU
  (``refcache.ByteLRU``), then compared on the device with the candidate's outputs read from the
  exchange folder (``output_file.read_outputs``). Only the comparison goes back: reference outputs never
  leave this process, and nothing is written to disk.
* ``stats``: cache counters, for tests and benchmarks.

Hidden seeds come from a per-run secret pool (``hidden_seeds``): drawn once per task by this client,
so every candidate of a task meets the same hidden inputs and the references are reused. Task code
is trusted; it still gets a scrubbed environment. Server side: torch and the standard library.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import functools
import hashlib
import json
import os
import secrets
import stat
import subprocess
import sys
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pike_harness.worker.channel import Channel, ChannelClosed, ChannelTimeout, ProtocolViolation
from pike_harness.worker.check_plan import PlannedCall, instance_weight_seed
from pike_harness.worker.output_file import MalformedOutputs, read_outputs, reader_fault
from pike_harness.worker.records import EvalRequest
from pike_harness.worker.supervise import trusted_files
from pike_harness.worker.supervise.errors import InfrastructureError
from pike_harness.worker.supervise.no_space import NO_SPACE, NoSpace
from pike_harness.worker.supervise.refcache import ByteLRU, tensor_bytes
from pike_harness.worker.supervise.sandbox import TRUSTED_PYTHON, marker_environment, scrubbed_environment
from pike_harness.worker.supervise.spawn import visible_devices

MODELS_KEPT = 4
REFERENCE_CACHE_MB = 8192  # reference outputs kept per device (and as much again for input sets, on the host)
# What a candidate's outputs file may ask the reader to allocate: a few times the reference's outputs
# (a float64 or complex output where the reference's is float32 still fits, and is judged by the
# comparison), plus slack for small outputs. More is no output of this task: the file is refused.
OUTPUTS_CAP_FACTOR = 4
OUTPUTS_CAP_SLACK = 64 * 1024 * 1024
LOG_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
PR_SET_DUMPABLE, PR_GET_DUMPABLE = 4, 3  # prctl(2)
# A write into an exchange folder that fails with ``NO_SPACE`` (no room left) is never the reference's
# failure: the candidate's doing (it can fill its folder up to its disk limit) or the host's (a full
# /dev/shm or disk), which the supervisor tells apart by measuring (``no_space.blame``).
# How often a request waiting for the reference process (held by other candidates' comparisons, input
# writes and timings, for minutes) calls its ``tick``: the supervisor polices its idle candidate there.
TICK_S = 0.25


def draw_seeds(count: int, exclude: set[int]) -> list[int]:
    """Secret seeds for hidden or fresh input sets, none of ``exclude``."""
    seeds: list[int] = []
    while len(seeds) < count:
        seed = secrets.randbelow(2**31 - 1) + 1
        if seed not in exclude and seed not in seeds:
            seeds.append(seed)
    return seeds


class _PriorityLock:
    """A lock whose urgent holders go before waiting ordinary ones.

    A comparison runs while its evaluation holds the device gate; writing input sets runs before the
    gate is taken. With everything submitted at once, dozens of writes can be waiting: a comparison
    then waits for the one write in progress, not for all of them.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held = False
        self._urgent = 0

    @contextlib.contextmanager
    def hold(self, urgent: bool, tick: Callable[[], None] | None = None) -> Any:
        """Hold the lock for the block; ``tick`` is called every ``TICK_S`` while waiting for it, outside
        the lock's own guard (whatever it raises ends the wait, the lock not taken)."""
        with self._cond:
            self._urgent += urgent
            try:
                while self._blocked(urgent):
                    self._cond.wait(None if tick is None else TICK_S)
                    if tick is not None and self._blocked(urgent):
                        self._cond.release()
                        try:
                            tick()
                        finally:
                            self._cond.acquire()
            except BaseException:
                self._cond.notify_all()  # an ordinary waiter held back by this urgent one may go
                raise
            finally:
                self._urgent -= urgent
            self._held = True
        try:
            yield
        finally:
            with self._cond:
                self._held = False
                self._cond.notify_all()

    def _blocked(self, urgent: bool) -> bool:
        return self._held or (not urgent and self._urgent > 0)


def _task_key(request: EvalRequest) -> str:
    return hashlib.sha256(request.reference_source.encode()).hexdigest()


class ReferenceOracle:
    """Client of one reference process for one device; thread-safe, started on first use."""

    def __init__(self, device: str, workdir: Path, *, environ: Mapping[str, str] | None = None,
                 python: str = sys.executable, cache_mb: int | None = None):
        self.device = device
        self.workdir = Path(workdir)
        self.python = python
        self.environ = dict(os.environ if environ is None else environ)
        self.cache_mb = int(cache_mb if cache_mb is not None
                            else self.environ.get("PIKEH_REFERENCE_CACHE_MB", REFERENCE_CACHE_MB))
        self._lock = _PriorityLock()
        self._pool_lock = threading.Lock()
        self._pools: dict[tuple[Any, ...], list[int]] = {}
        self._set_bytes: dict[str, int] = {}  # task -> one input set's bytes, as the reference process made it
        self._popen: subprocess.Popen | None = None
        self._channel: Channel | None = None
        self.log_path = self.workdir / f"reference-{device.replace(':', '')}.log"
        self._figures_lock = threading.Lock()
        self._busy: dict[str, list[float]] = {}  # op -> [requests, seconds from send to reply]

    def _start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True, mode=0o700)
        visible = visible_devices(self.device, self.environ)
        # Marked like a candidate, so that the next sweep kills it if its harness dies without closing it.
        env = scrubbed_environment(self.environ, {"CUDA_VISIBLE_DEVICES": visible, "PYTHONUNBUFFERED": "1",
                                                  "HOME": str(self.workdir),
                                                  **marker_environment(secrets.token_hex(12))})
        # TRUSTED_PYTHON: in the docker evaluator without bubblewrap a candidate can write the work
        # folder (its HOME), so nothing there may be imported by this process.
        log = self._open_log()
        try:
            self._popen = subprocess.Popen([self.python, *TRUSTED_PYTHON, "-m", "pike_harness.worker.supervise.reference",
                                            str(self.cache_mb)],
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                           cwd=self.workdir, env=env, start_new_session=True)
        finally:
            os.close(log)
        assert self._popen.stdin is not None and self._popen.stdout is not None
        self._channel = Channel(self._popen.stdout.fileno(), self._popen.stdin.fileno())

    def _open_log(self) -> int:
        """A descriptor to append the process's log to, never blocking and never through a link.

        Where candidates share the harness's uid and can write the work folder (the docker evaluator
        without bubblewrap), a FIFO planted at the log's name blocked ``open(..., "ab")`` forever, the
        oracle's lock held. So: no-follow and non-blocking, used only if ``fstat`` says a regular file;
        anything else there leaves it alone and the log goes to a fresh name, created exclusively."""
        try:
            fd = os.open(self.log_path, LOG_FLAGS, 0o600)
        except OSError:  # a link (ELOOP), a FIFO without a reader (ENXIO), a folder (EISDIR), ...
            fd = None
        if fd is not None and not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            fd = None
        if fd is None:
            self.log_path = self.workdir / f"reference-{self.device.replace(':', '')}-{secrets.token_hex(8)}.log"
            try:
                fd = trusted_files.create_exclusive(self.log_path)
            except trusted_files.UntrustedFile as exc:
                raise InfrastructureError(f"the reference process's log could not be made: {exc}") from None
        os.set_blocking(fd, True)  # the process's stderr: its writes wait, never fail with EAGAIN
        return fd

    @property
    def pid(self) -> int | None:
        """The reference process's pid while it runs (it carries a sandbox marker, but is ours)."""
        popen = self._popen
        return popen.pid if popen is not None and popen.poll() is None else None

    def start(self) -> None:
        """Start the reference process now (idempotent, thread-safe): its torch import and device
        initialisation then happen before the first evaluation instead of under its device lock."""
        with self._lock.hold(urgent=False):
            if self._popen is None or self._popen.poll() is not None:
                self._start()

    def hidden_seeds(self, request: EvalRequest) -> list[int]:
        """This run's secret hidden seeds for the request's task: drawn on first use, then reused."""
        key = (_task_key(request), request.weight_seed, tuple(request.input_seeds), request.hidden_input_sets)
        with self._pool_lock:
            if key not in self._pools:
                self._pools[key] = draw_seeds(request.hidden_input_sets, exclude=set(request.input_seeds))
            return list(self._pools[key])

    def write_inputs(self, request: EvalRequest, seeds: list[int], path: Path, timeout_s: float,
                     tick: Callable[[], None] | None = None) -> tuple[str | None, str]:
        """The task's input sets for ``seeds`` (CPU tensors, ``torch.save``) into a new file ``path``.

        (None, the file's SHA-256) when written; else (why not, in words, ""): the candidate planted
        something at ``path`` (a link, a FIFO, a file) before the reference could create it there, which
        is its verdict. A write that found no space there (``NO_SPACE``) raises ``no_space.NoSpace``
        (why, and the bytes it was writing): whose that is, the candidate's or the host's, the
        supervisor measures (``no_space.blame``). The candidate's process checks the digest before
        loading the file.
        ``tick`` is called every ``TICK_S`` while the request waits for the process (never once it is
        sent: a request is never left without its reply); what it raises ends the wait, nothing sent.
        """
        reply = self._call(request, {"op": "inputs", "seeds": seeds, "out": str(path)}, timeout_s, urgent=False,
                           tick=tick)
        if reply.get("no_space"):
            needed = reply.get("needed_bytes")
            raise NoSpace(str(reply["no_space"]), needed if isinstance(needed, int) else 0)
        if reply.get("planted"):
            return str(reply["planted"]), ""
        size = reply.get("set_bytes")
        if isinstance(size, int) and size > 0:
            self._set_bytes[_task_key(request)] = size
        return None, str(reply.get("sha256") or "")

    def set_bytes(self, request: EvalRequest) -> int | None:
        """The bytes of one of the request's task's input sets, once this process wrote some (all of a
        task's sets are of one size: ``_Server._made``); None before."""
        return self._set_bytes.get(_task_key(request))

    def compare(self, request: EvalRequest, seeds: list[int], outputs: Path, labels: list[str],
                plan: list[PlannedCall], *, warmed: bool, timeout_s: float) -> dict[str, Any]:
        """Judge the candidate's outputs file (one entry per planned call) against the reference's.

        The reference replays the plan (``check_plan``): per instance, a fresh copy of the model called
        with the same sequence of input sets, so a stateful reference matches call for call; the
        verdict names the observed pattern (``checked_calls.judge``). The reply: ``malformed`` (a reason)
        when the file is not one list of tensors per planned call or they could not be compared, else ``comparison``
        (``compare.Comparison.to_dict()``), ``reference_bytes`` (the first call's output bytes),
        ``computed`` (whether any reference output was computed now rather than reused) and
        ``seconds`` (``reference``, ``compare``).
        """
        return self._call(request, {"op": "compare", "seeds": seeds, "outputs": str(outputs), "labels": labels,
                                    "plan": [[c.instance, c.set_index, c.repeat] for c in plan], "warmed": warmed,
                                    "atol": request.atol, "rtol": request.rtol}, timeout_s, urgent=True)

    def compare_timed(self, request: EvalRequest, seeds: list[int], outputs: Path, sets: list[int],
                      labels: list[str], plan: list[PlannedCall], *, timeout_s: float,
                      fresh_seeds: Sequence[int] = ()) -> dict[str, Any]:
        """Judge the timed calls' drawn outputs (one entry per set of ``sets``, then one per seed of
        ``fresh_seeds``) against the reference's output for each set's checked call of ``plan``, and for
        each fresh seed on a fresh copy of the timed instance's model (``timed_outputs.judge``). The
        reply: ``malformed`` (a reason) or ``comparison``, as ``compare``'s."""
        return self._call(request, {"op": "compare_timed", "seeds": seeds, "outputs": str(outputs), "sets": sets,
                                    "fresh_seeds": list(fresh_seeds), "labels": labels,
                                    "plan": [[c.instance, c.set_index, c.repeat] for c in plan],
                                    "atol": request.atol, "rtol": request.rtol}, timeout_s, urgent=True)

    @contextlib.contextmanager
    def idle(self) -> Any:
        """Keep the reference process idle for the block: requests made meanwhile wait (their time limits
        start once they are sent). A timing holds this, so no input set is written beside it."""
        with self._lock.hold(urgent=True):
            yield

    def figures(self) -> dict[str, dict[str, float]]:
        """Per request kind (``inputs``, ``compare``): how many were served and the seconds from
        sending each to its reply. One process serves them one at a time, so the sum is how long it
        was busy: with many candidates, whether it is the serial step of the check phase."""
        with self._figures_lock:
            return {op: {"requests": int(n), "busy_s": round(s, 3)} for op, (n, s) in self._busy.items()}

    def stats(self, timeout_s: float = 60.0) -> dict[str, Any]:
        """The reference process's cache counters (``outputs``/``inputs``: hits, misses, evictions)."""
        return self._send({"op": "stats"}, timeout_s, urgent=False)

    def _call(self, request: EvalRequest, message: dict[str, Any], timeout_s: float, *,
              urgent: bool, tick: Callable[[], None] | None = None) -> dict[str, Any]:
        device = "cuda" if self.device.startswith("cuda") else "cpu"
        return self._send({**message, "source": request.reference_source, "weight_seed": request.weight_seed,
                           "precision": request.precision, "device": device}, timeout_s, urgent=urgent, tick=tick)

    def _send(self, message: dict[str, Any], timeout_s: float, *, urgent: bool,
              tick: Callable[[], None] | None = None) -> dict[str, Any]:
        """One request and its reply; ``urgent`` for requests made while holding the device gate; ``tick``
        called while waiting for the process (``_PriorityLock.hold``)."""
        with self._lock.hold(urgent, tick):
            if self._popen is None or self._popen.poll() is not None:
                self._start()
            assert self._channel is not None
            began = time.monotonic()
            try:
                self._channel.send(message)
                deadline = began + timeout_s
                reply = None
                while reply is None:
                    reply = self._channel.receive(deadline)
            except (ChannelClosed, ChannelTimeout, ProtocolViolation, BrokenPipeError) as exc:
                self._stop()
                raise InfrastructureError(f"the reference process failed ({type(exc).__name__}); its log ends: "
                                          f"{trusted_files.tail(self.log_path, 2000)}") from None
            with self._figures_lock:
                served = self._busy.setdefault(str(message.get("op")), [0, 0.0])
                served[0] += 1
                served[1] += time.monotonic() - began
            if not reply.get("ok"):
                raise InfrastructureError(f"the task's reference Model failed: {reply.get('error')}")
            return reply

    def _stop(self) -> None:
        if self._popen is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._popen.pid, 9)
            self._popen.wait()
            for stream in (self._popen.stdin, self._popen.stdout):
                if stream is not None:
                    stream.close()
        self._popen = None
        self._channel = None

    def close(self) -> None:
        with self._lock.hold(urgent=True):
            self._stop()


# -- the server: python -m pike_harness.worker.supervise.reference [CACHE_MB] -------------------------------

class TaskInputsVary(ValueError):
    """A task whose input sets differ in shape or dtype from seed to seed (``_Server._made``)."""


def _shapes(signature: tuple[Any, ...]) -> str:
    return ", ".join("not a tensor" if item is None else f"{item[1].removeprefix('torch.')} {list(item[0])}"
                     for item in signature) or "no inputs"


class _Server:
    """The reference process's state: task modules, pristine models, and the two byte-capped caches."""

    def __init__(self, cache_bytes: int):
        import torch

        from pike_harness.worker.inside import backend_flags, loading

        self.torch, self.flags, self.loading = torch, backend_flags, loading
        self.modules: OrderedDict[str, Any] = OrderedDict()
        self.models: OrderedDict[str, Any] = OrderedDict()
        self.inputs = ByteLRU(cache_bytes)  # (task, seed) -> the input set on the CPU, as get_inputs made it
        self.signatures: dict[str, tuple[int, Any]] = {}  # task -> (a seed, its set's ``input_signature``)
        self.references = ByteLRU(cache_bytes)  # (task, weights, precision, device, seeds) -> outputs on the device

    def handle(self, message: dict[str, Any]) -> dict[str, Any]:
        op = message.get("op")
        if op == "stats":
            return {"ok": True, "outputs": self.references.stats.to_dict(), "inputs": self.inputs.stats.to_dict(),
                    "held_bytes": {"outputs": self.references.held_bytes, "inputs": self.inputs.held_bytes},
                    "dumpable": _prctl(PR_GET_DUMPABLE)}
        if op == "inputs":
            return self._write_inputs(message)
        if op == "compare":
            return self._compare(message)
        if op == "compare_timed":
            return self._compare_timed(message)
        raise ValueError(f"unknown request {op!r}")

    def _write_inputs(self, message: dict[str, Any]) -> dict[str, Any]:
        """The input sets into a file this process creates: never through a link or into a FIFO that
        the candidate planted in its exchange folder (that is its verdict, not a hang or a write elsewhere).

        The folder is the candidate's to fill, up to its disk limit, and a folder in ``/dev/shm`` shares
        its room with the host: a write that finds no space left there (``NO_SPACE``) is the reply's
        ``no_space`` (with ``needed_bytes``, what the sets hold), never this request's failure. The
        supervisor measures whose it is (``no_space.blame``): the candidate's verdict, or the host's
        infrastructure error. What was written is removed first, by this descriptor and by name only
        if the name is still this file (never following a link)."""
        sets = [self._input_set(message["source"], seed) for seed in message["seeds"]]
        try:
            folder, name = trusted_files.folder_of(message["out"])
        except trusted_files.UntrustedFile as exc:
            return {"ok": True, "planted": f"the hidden inputs could not be written: {exc}"}
        try:
            try:
                fd = trusted_files.create_exclusive(name, dir_fd=folder)
            except trusted_files.UntrustedFile as exc:
                return {"ok": True, "planted": f"the hidden inputs could not be written: {exc}"}
            try:
                hashed = _Hashing(None)
                failure = self._save(sets, fd, hashed)
                if failure is not None:
                    _discard_written(folder, name, fd)
                    return {"ok": True, "no_space": f"the hidden inputs could not be written: no space was left in "
                                                    f"the exchange folder ({failure})",
                            "needed_bytes": tensor_bytes(sets)}
            finally:
                os.close(fd)
        finally:
            os.close(folder)
        return {"ok": True, "sha256": hashed.digest.hexdigest(), "set_bytes": tensor_bytes(sets[0]) if sets else 0}

    def _save(self, sets: list[Any], fd: int, hashed: _Hashing) -> str | None:
        """``torch.save`` the sets into ``fd`` through ``hashed``; None when written, else why (in words)
        the folder had no room (``NO_SPACE``). Any other failure raises. ``torch.save`` turns a failed
        write into a ``RuntimeError`` of its zip writer ("unexpected pos"), or passes on success: the
        write's own error is what ``hashed`` kept."""
        try:
            with os.fdopen(fd, "wb", closefd=False) as handle:  # the descriptor stays ours to truncate
                hashed.handle = handle
                writer: Any = hashed  # a file to torch.save, which needs only write
                self.torch.save(sets, writer)
        except Exception as exc:
            failure = hashed.failure or (exc if isinstance(exc, OSError) else None)
            if failure is None or failure.errno not in NO_SPACE:
                raise
            return failure.strerror or errno.errorcode.get(failure.errno or 0, "no space")
        if hashed.failure is not None:  # swallowed on the way: the file is short all the same
            if hashed.failure.errno not in NO_SPACE:
                raise hashed.failure
            return hashed.failure.strerror or "no space"
        return None

    def _module(self, source: str) -> Any:
        key = hashlib.sha256(source.encode()).hexdigest()
        if key not in self.modules:
            self.modules[key] = self.loading.load_source(source, self.loading.module_name_for(source, "pikeh_reference"))
            while len(self.modules) > MODELS_KEPT:
                self.modules.popitem(last=False)
        self.modules.move_to_end(key)
        return self.modules[key]

    def _input_set(self, source: str, seed: int) -> list[Any]:
        key = (hashlib.sha256(source.encode()).hexdigest(), int(seed))
        value, _ = self.inputs.get_or_make(key, lambda: self._made(source, int(seed)), tensor_bytes)
        return value

    def _made(self, source: str, seed: int) -> list[Any]:
        """The task's input set for ``seed``, held to the shapes of the first set this process made for
        the task: a task whose shapes follow the seed fails here, as the task's fault (an
        infrastructure error naming it), not in a candidate's timed loop as the candidate's."""
        values = self.loading.make_inputs(self._module(source), seed)
        signature = self.loading.input_signature(values)
        first_seed, first = self.signatures.setdefault(hashlib.sha256(source.encode()).hexdigest(), (seed, signature))
        if signature != first:
            raise TaskInputsVary(f"the task's get_inputs makes inputs of other shapes or dtypes for another seed "
                                 f"(seed {first_seed}: {_shapes(first)}; seed {seed}: {_shapes(signature)}): every "
                                 "timed call reuses one buffer per input, so a task's input shapes must not "
                                 "depend on the seed")
        return values

    def _pristine(self, message: dict[str, Any], device: Any, weight_seed: int) -> Any:
        key = json.dumps([hashlib.sha256(message["source"].encode()).hexdigest(), weight_seed,
                          message["precision"], message["device"]])
        if key not in self.models:
            module = self._module(message["source"])
            self.flags.apply(message["precision"])
            self.models[key] = self.loading.build_model(self.loading.model_class(module, ("Model",)),
                                                        self.loading.init_inputs(module),
                                                        weight_seed=weight_seed, device=device)
            while len(self.models) > MODELS_KEPT:
                self.models.popitem(last=False)
        self.models.move_to_end(key)
        return self.models[key]

    def _reference(self, message: dict[str, Any], device: Any, weight_seed: int, seeds: list[int], *,
                   keep_inputs: bool = True) -> list[list[Any]]:
        """The outputs of one fresh copy of the model built under ``weight_seed``, called with ``seeds`` in
        order (their input sets kept in the inputs cache unless ``keep_inputs`` is False)."""
        import copy

        torch = self.torch
        model = copy.deepcopy(self._pristine(message, device, weight_seed))
        self.flags.apply(message["precision"])
        outputs = []
        for seed in seeds:
            made = self._input_set(message["source"], seed) if keep_inputs else \
                self._made(message["source"], int(seed))
            inputs = self.loading.to_device(made, device)
            with torch.no_grad():
                out = model(*inputs)
            items = list(out) if isinstance(out, tuple | list) else [out]
            outputs.append([item.detach().clone() for item in items])
        return outputs

    @staticmethod
    def _task(message: dict[str, Any]) -> tuple[Any, ...]:
        """What a kept reference output is keyed by, besides its weight seed and its seed sequence."""
        return (hashlib.sha256(message["source"].encode()).hexdigest(), message["weight_seed"], message["precision"],
                message["device"])

    def _planned(self, message: dict[str, Any], device: Any, plan: list[PlannedCall]) -> tuple[list[Any], bool]:
        """The reference's outputs for every call of ``plan`` (kept, or computed now: the second value)."""
        seeds = [int(seed) for seed in message["seeds"]]
        task = self._task(message)
        per_instance, computed = {}, False
        for instance in sorted({call.instance for call in plan}):
            sequence = tuple(seeds[call.set_index] for call in plan if call.instance == instance)
            weight_seed = instance_weight_seed(int(message["weight_seed"]), instance)
            make = functools.partial(self._reference, message, device, weight_seed, list(sequence))
            outputs, made = self.references.get_or_make((*task, weight_seed, sequence), make, tensor_bytes)
            per_instance[instance], computed = iter(outputs), computed or made
        reference = [next(per_instance[call.instance]) for call in plan]
        if device.type == "cuda":
            self.torch.cuda.synchronize()
        return reference, computed

    def _compare(self, message: dict[str, Any]) -> dict[str, Any]:
        from pike_harness.worker.supervise import checked_calls

        torch = self.torch
        device = torch.device(message["device"])
        began = time.monotonic()
        plan = [PlannedCall(int(instance), int(index), bool(repeat)) for instance, index, repeat in message["plan"]]
        reference, computed = self._planned(message, device, plan)
        reference_s = time.monotonic() - began
        began = time.monotonic()
        judged = self._judge_file(message, device, len(plan), tensor_bytes(reference), functools.partial(
            checked_calls.judge, reference=reference, plan=plan, labels=message["labels"], atol=message["atol"],
            rtol=message["rtol"], warmed=bool(message.get("warmed"))))
        if "malformed" in judged:
            return {"ok": True, **judged}
        return {"ok": True, **judged, "computed": computed,
                "reference_bytes": tensor_bytes(reference[0]) if reference else 0,
                "seconds": {"reference": reference_s, "compare": time.monotonic() - began}}

    def _judge_file(self, message: dict[str, Any], device: Any, count: int, reference_bytes: int,
                    judge: Callable[[list[list[Any]]], Any]) -> dict[str, Any]:
        """The candidate's outputs file (``count`` entries) read onto ``device`` and judged: ``comparison``
        (``judge``'s ``Comparison`` as a dict), or ``malformed`` (a reason).

        From here on the candidate's outputs are read and judged: a failure is its verdict (the reply's
        "malformed"), never this request's failure, which the supervisor takes for the harness's (an
        infrastructure error: retried, and it stops a run). Only the reader's own faults (out of device
        memory beside others' models, a CUDA error) stay failures. The reference's outputs are made
        before, by the task's code alone: a failure there is the task's, an infrastructure error."""
        try:
            candidate = read_outputs(message["outputs"], count, device,
                                     max_total_bytes=OUTPUTS_CAP_FACTOR * reference_bytes + OUTPUTS_CAP_SLACK)
        except MalformedOutputs as exc:
            return {"malformed": str(exc)}
        try:
            return {"comparison": judge(candidate).to_dict()}
        except Exception as exc:
            if reader_fault(exc):
                raise
            traceback.print_exc()  # the log says where, should it ever be the comparison's own bug
            return {"malformed": f"the outputs could not be compared: {type(exc).__name__}: {exc}"[:500]}
        finally:
            del candidate
            if device.type == "cuda":  # what the candidate's outputs took goes back to the candidates
                self.torch.cuda.empty_cache()

    def _compare_timed(self, message: dict[str, Any]) -> dict[str, Any]:
        """The timed calls' drawn outputs (one entry per set of ``sets``) against the reference's output
        for each set's checked call (``timed_outputs``); the reply as ``_compare``'s, without the
        figures the check's reply carries."""
        from pike_harness.worker.supervise import timed_outputs

        device = self.torch.device(message["device"])
        plan = [PlannedCall(int(instance), int(index), bool(repeat)) for instance, index, repeat in message["plan"]]
        timed = [call for call in plan if call.instance == 0]  # the timed instance's calls: kept since its check
        reference, _ = self._planned(message, device, timed)
        first = timed_outputs.first_sights(timed)
        sets = [int(index) for index in message["sets"]]
        wanted = [reference[first[index]] for index in sets]
        weight_seed = instance_weight_seed(int(message["weight_seed"]), 0)
        # Each fresh seed alone, on a fresh copy of the model; neither its inputs nor its outputs are kept
        # (fresh seeds are drawn for each evaluation: nothing would ever hit).
        fresh = [self._reference(message, device, weight_seed, [int(seed)], keep_inputs=False)[0]
                 for seed in message.get("fresh_seeds") or []]
        count = len(sets) + len(fresh)
        return {"ok": True, **self._judge_file(message, device, count, tensor_bytes(wanted + fresh), functools.partial(
            timed_outputs.judge, reference=wanted, sets=sets, labels=message["labels"], atol=message["atol"],
            rtol=message["rtol"], fresh_reference=fresh))}


class _Hashing:
    """A binary file that also hashes what is written to it: the digest of the hidden inputs file as this
    process wrote it, which the candidate's process checks before it loads the file (the candidate can
    change it in between: its exchange folder is its own to write). A write's or flush's ``OSError`` is
    kept (``failure``) before it is raised: ``torch.save`` replaces it with an error of its own."""

    def __init__(self, handle: Any):
        self.handle, self.digest = handle, hashlib.sha256()
        self.failure: OSError | None = None

    def write(self, data: Any) -> int:
        self.digest.update(data)
        try:
            return int(self.handle.write(data))
        except OSError as exc:
            self.failure = self.failure or exc
            raise

    def flush(self) -> None:
        try:
            self.handle.flush()
        except OSError as exc:
            self.failure = self.failure or exc
            raise


def _discard_written(folder: int, name: str, fd: int) -> None:
    """Free what a failed write left: the file's bytes through its descriptor (wherever its name went),
    then its name in ``folder`` if the entry there is still this file (the candidate may have swapped a
    link or a file of its own in: neither is followed or removed). Never raises."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
    try:
        mine, there = os.fstat(fd), os.stat(name, dir_fd=folder, follow_symlinks=False)
        if (mine.st_dev, mine.st_ino) == (there.st_dev, there.st_ino):
            os.unlink(name, dir_fd=folder)
    except OSError:
        pass


def _prctl(option: int, value: int = 0) -> int | None:
    """``prctl(option, value)``'s result; None where it cannot be called (not Linux)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0))
    except (OSError, AttributeError):
        return None


def serve(cache_mb: int = REFERENCE_CACHE_MB) -> None:
    # Not dumpable: a candidate running as the same user (the docker evaluator without bubblewrap) can
    # then neither read this process's memory (the reference outputs, the hidden inputs) through
    # /proc/<pid>/mem nor attach to it; its /proc files belong to root.
    _prctl(PR_SET_DUMPABLE, 0)
    # The protocol owns the real stdout; anything the task prints goes to the log instead.
    protocol_out = os.dup(1)
    os.dup2(2, 1)
    channel = Channel(0, protocol_out)
    server = _Server(cache_mb * 1024 * 1024)
    while True:
        try:
            message = channel.receive(deadline=None, poll_s=5.0)
        except ChannelClosed:
            return
        if message is None:
            continue
        try:
            reply = server.handle(message)
        except Exception as exc:
            traceback.print_exc()
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:2000]}
            if type(exc).__name__ == "OutOfMemoryError":
                import torch  # loaded already: the server computes with it

                torch.cuda.empty_cache()  # the failed request's blocks go back (a retry may run alone)
        channel.send(reply)


if __name__ == "__main__":
    serve(int(sys.argv[1]) if len(sys.argv) > 1 else REFERENCE_CACHE_MB)
    sys.exit(0)
