"""The timed loop, run in the candidate's process: the same structure on CUDA and on the CPU.

Every call, warm-up or timed, first copies one input set into fixed input buffers (rotating among
all sets, so caching by pointer, shape or "last input" replays a wrong answer), then writes a buffer
larger than the cache (so no data stays warm), then calls the model. Outside the window, every
output is compared on the device with the output validated for that input set, so a timed call
cannot skip work that correctness did. Only references from ``trusted`` are called. A few uncounted
calls on input sets the process was never shown go among the timed calls (``FreshCalls``), so a cache
keyed on the input's content shows itself.

The timed window on CUDA comes in two shapes (``TimingProtocol.window``):

* ``do_bench`` (default): ``synchronize(); flush; start.record(); model(*inputs); synchronize();
  end.record()``, which is ``triton.testing.do_bench`` around PIKE's ``model(*x);
  torch.cuda.synchronize()``. Only the flush is queued ahead of the start event, as in do_bench, so
  the host launches the model while the GPU still zeroes the flush buffer: launch overhead up to the
  flush's length is hidden, exactly as in the numbers PIKE published. The synchronize that drains our
  input copy and the previous call's output check sits before the flush, where do_bench has none,
  so nothing but the flush overlaps the launch.
* ``strict``: ``flush; synchronize(); start.record(); ...``: the GPU is idle when the start event is
  recorded, so every microsecond of launch overhead is in the window (an isolated call's latency).

Either way the device-wide synchronize is inside the window, so work left on side streams counts
and CUDA graphs pay off. For the host-clock cross-check a third event is recorded before the flush:
the host clock and that event both span flush plus call, so they are compared like with like.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch

from pike_harness.worker.inside import trusted as T
from pike_harness.worker.inside.protocols import TimingProtocol


class OutputProblem(Exception):
    """An output that is not a plain tensor (or a tuple/list of them) on the expected device."""

    def __init__(self, check: str, message: str):
        super().__init__(message)
        self.check = check


def output_tensors(out: Any, device: torch.device) -> list[torch.Tensor]:
    """The outputs as a list of plain tensors with real storage on ``device``, or OutputProblem.

    Exact types only: a tensor subclass can compute lazily or answer comparisons falsely.
    """
    items = list(out) if T.exact_type(out) in (tuple, list) else [out]
    for index, item in enumerate(items):
        kind = T.exact_type(item)
        if kind is not T.Tensor:
            raise OutputProblem("output_type", f"output {index} is a {kind.__module__}.{kind.__qualname__}, "
                                               "not a plain torch.Tensor")
        if item.layout != torch.strided:
            raise OutputProblem("output_type", f"output {index} has layout {item.layout}, not strided")
        if item.device.type != device.type or (device.index is not None and item.device.index != device.index):
            raise OutputProblem("output_device", f"output {index} is on {item.device}, expected {device}")
        if item.numel() and T.Tensor.data_ptr(item) == 0:
            raise OutputProblem("output_storage", f"output {index} has no real storage")
    return items


def _extent(tensor: torch.Tensor) -> tuple[int, int]:
    """The addresses of a tensor's whole storage: [start, end)."""
    held = T.storage(tensor)
    start = held.data_ptr()
    return start, start + held.nbytes()


@dataclass
class TimedRun:
    samples_ms: list[float] = field(default_factory=list)
    host_ms: list[float] = field(default_factory=list)
    span_ms: list[float] = field(default_factory=list)  # CUDA: flush + call by events, what host_ms spans
    host_wall_ms: float = 0.0
    warmup: int = 0
    reps: int = 0
    estimate_ms: float = 0.0
    mismatches: list[int] = field(default_factory=list)  # per set: timed-output elements off tolerance
    # Calls on input sets this process had never been shown (``FreshCalls``), uncounted: their times (by
    # the same clock as ``samples_ms``), and the timed call each came before.
    fresh_ms: list[float] = field(default_factory=list)
    fresh_at: list[int] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return self.__dict__.copy()


class TimedSamples:
    """For each input set, the outputs of one timed call, drawn uniformly from every timed call of that
    set in every timing of this process (a reservoir of one), for the reference process to compare once
    the timings are over (``child.CandidateProcess.samples``).

    Why: the validation step after each call compares in this process, with torch operators a
    candidate can register kernels over (``torch.library`` on ``aten::isclose``), which no switch of
    torch modes undoes; a process the candidate never ran in cannot be answered that way. The draw
    happens after the call returned and its output was validated, so no call can know beforehand that
    it is the one kept: each must be right. The random bytes come from ``os.urandom`` as captured
    before the candidate was imported.
    """

    def __init__(self, n_sets: int):
        self.seen = [0] * n_sets  # timed calls of each set so far
        self.kept: list[list[torch.Tensor] | None] = [None] * n_sets

    def offer(self, index: int, outputs: Sequence[torch.Tensor]) -> None:
        """Keep ``outputs`` (timed call number ``seen`` of set ``index``) with probability 1/``seen``."""
        self.seen[index] += 1
        if int.from_bytes(T.urandom(8), "little") % self.seen[index] == 0:
            with T.DisableTorchFunction(), T.DisableTorchDispatch():
                self.kept[index] = [T.clone(tensor) for tensor in outputs]

    def drawn(self) -> list[tuple[int, list[torch.Tensor]]]:
        """(set, its kept outputs) for every set that was timed."""
        return [(index, kept) for index, kept in enumerate(self.kept) if kept is not None]


MASK_BYTES = 1 << 16  # the random key a held fresh set's bytes are XORed with, tiled over them


def _bytes_of(tensor: torch.Tensor) -> torch.Tensor:
    """A contiguous tensor's bytes as one flat uint8 view of its storage."""
    return T.view(T.reshape(tensor, (-1,)), torch.uint8)


def _xor_plan(data: torch.Tensor, key: torch.Tensor,
              out: torch.Tensor) -> tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor], ...]:
    """The views for ``out = data ^ key``, the key repeated over the bytes (all flat uint8, on one
    device): one (data, key, out) triple for the whole keys' worth, one for the tail."""
    n, k = T.length(data), T.length(key)
    full = n - n % k
    plan = []
    if full:
        plan.append((T.view(T.narrow(data, 0, 0, full), (-1, k)), key, T.view(T.narrow(out, 0, 0, full), (-1, k))))
    if n > full:
        plan.append((T.narrow(data, 0, full, n - full), T.narrow(key, 0, 0, n - full), T.narrow(out, 0, full, n - full)))
    return tuple(plan)


def _xor_tiled(data: torch.Tensor, key: torch.Tensor, out: torch.Tensor) -> None:
    """``out = data ^ key``, the key repeated over the bytes."""
    for part, part_key, part_out in _xor_plan(data, key, out):
        T.bitwise_xor(part, part_key, out=part_out)


@dataclass(frozen=True)
class MaskedTensor:
    """A fresh set's tensor as held until its call: its bytes XORed with ``FreshCalls.key``, its shape
    and dtype apart. Why: a candidate's process can search its own memory (``gc.get_objects()``) for
    tensors shaped like its inputs, compute their answers untimed and replay them; a corpus candidate
    did exactly that (``cache_primed_from_memory``) and replayed the fresh calls too. Held masked,
    the sets match no input's shape, dtype or content; they are unmasked straight into the call's own
    input buffer on the device, right before the fresh call, where the candidate first sees them.
    Masking is not secrecy: the key lies in the same process, and code that knows this class can
    undo it (see docs/evaluator.md, what the checks do not catch)."""

    data: torch.Tensor  # flat uint8
    shape: tuple[int, ...]
    dtype: torch.dtype

    @staticmethod
    def of(value: torch.Tensor, key: torch.Tensor) -> MaskedTensor:
        """``value`` masked (a contiguous copy made on the way is zeroed; ``value`` itself is left to
        the caller, which alone knows whether the task keeps it: ``_held``)."""
        with T.DisableTorchFunction(), T.DisableTorchDispatch():
            contiguous = T.contiguous(value)
            plain = _bytes_of(contiguous)
            data = T.clone(plain)
            _xor_tiled(plain, key, data)
            if contiguous is not value:
                T.zero_(contiguous)
        return MaskedTensor(data, tuple(value.shape), value.dtype)

    @staticmethod
    def can_hold(value: Any) -> bool:
        """A dense tensor without lazy conjugate or negative bits: the kinds whose bytes are its values."""
        return (T.is_instance(value, T.Tensor) and value.layout == torch.strided and not value.is_conj()
                and not value.is_neg())

    def to(self, device: torch.device) -> MaskedTensor:
        return MaskedTensor(T.to(self.data, device), self.shape, self.dtype)

    def unmask_into(self, buffer: torch.Tensor, key: torch.Tensor) -> None:
        """Write the set's values into ``buffer`` (its shape and dtype)."""
        _unmask(self.staged_into(buffer, key), buffer)

    def staged_into(self, buffer: torch.Tensor, key: torch.Tensor) -> Unmasking:
        """Copied to ``buffer``'s device (``key`` lies there), with the XOR that unmasks it into
        ``buffer`` planned now: the fresh call's own step before its window is then one or two kernel
        launches, as a timed call's copy is one. When the views were made at each fresh call instead,
        fresh calls read up to 17 % slower than timed ones on an H200 (2026-11-30, level3-pike 9, 13);
        in this form, level3-pike 9's median 1.04, 13's 0.85-1.02 (the same night)."""
        if tuple(buffer.shape) != self.shape or buffer.dtype != self.dtype:
            raise ValueError(f"a fresh input set's tensor is {self.dtype} {list(self.shape)}, the checked sets' "
                             f"{buffer.dtype} {list(buffer.shape)}: the task's get_inputs varies its shapes")
        with T.DisableTorchFunction(), T.DisableTorchDispatch():
            masked = self.to(buffer.device)
            plan = _xor_plan(masked.data, key, _bytes_of(buffer)) if T.is_contiguous(buffer) else ()
        return Unmasking(plan, masked, key)

    def plain(self, key: torch.Tensor) -> torch.Tensor:
        """The set's tensor itself, unmasked into new memory."""
        plain = T.clone(self.data)
        _xor_tiled(self.data, key, plain)
        return T.reshape(T.view(plain, self.dtype), self.shape)


class Unmasking(NamedTuple):
    """A staged fresh tensor: the XOR calls' operands that unmask it into its call's buffer (``plan``),
    or, for a buffer that is not contiguous (no plan), the masked tensor and key to unmask into new
    memory and copy. Plain data with no method of its own: an object that unmasks when called, found
    by a candidate through ``gc`` beside its own buffer, would unmask for it (an audit did, 2026-11-30)."""

    plan: tuple[tuple[torch.Tensor, torch.Tensor, torch.Tensor], ...]
    masked: MaskedTensor
    key: torch.Tensor


def _unmask(staged: Unmasking, buffer: torch.Tensor) -> None:
    if staged.plan:
        for data, key, out in staged.plan:
            T.bitwise_xor(data, key, out=out)
    else:
        T.copy_(buffer, staged.masked.plain(staged.key))


def _holders(values: Sequence[Any], index: int) -> tuple[int, int] | None:
    """How many references reach ``values[index]`` and how many tensors share its memory, counted the
    same way for any list (so only a comparison with a probe's counts means anything); None where
    this torch cannot count a storage's users, or the memory is not torch's own (``from_numpy``,
    ``frombuffer``: a fixed-size storage whose bytes may be another object's)."""
    if T.storage_users is None:
        return None
    value = values[index]
    held = T.storage(value)
    if not held.resizable():
        return None
    return T.refcount(value), T.storage_users(held._cdata)


def _held(values: Sequence[Any], key: torch.Tensor) -> tuple[Any, ...]:
    """One fresh set as ``FreshCalls`` holds it: each tensor masked where its kind allows
    (``MaskedTensor``), and its plain tensor then zeroed where nothing but ``values`` holds it. Why:
    freed unwiped, a plain tensor's bytes stay in the process's heap (glibc keeps all but the largest
    blocks), where a candidate reading ``/proc/self/mem`` after its import could find them and answer
    the fresh calls from a cache. A tensor the task keeps (a module-level tensor it hands out, a view
    of one, a storage from numpy) is left as it is: zeroing it would change the task's inputs."""
    probe = [torch.zeros(1)]
    alone = _holders(probe, 0)
    held: list[Any] = []
    for index in range(T.length(values)):
        value = values[index]
        if not MaskedTensor.can_hold(value):
            held.append(value)
            continue
        held.append(MaskedTensor.of(value, key))
        del value
        if alone is not None and _holders(values, index) == alone:
            try:
                with T.no_grad(), T.DisableTorchFunction(), T.DisableTorchDispatch():
                    T.zero_(values[index])
            except RuntimeError:  # an inference tensor: left as it is
                pass
    return tuple(held)


class FreshCalls:
    """Input sets the candidate's process is shown only inside a timed loop, each in one call, and the
    outputs of those calls, kept for the reference process to compare.

    Why: the timed calls rotate through the input sets the check showed, so a cache keyed on the
    input's content (even a sample of it: its first and last values) computes each set once and
    replays it in every timed call, a right answer in a fraction of the time that no comparison of
    outputs can see. A call on an input never seen before cannot be replayed: it costs what the
    model costs. The loop makes a few such calls at random places among its timed calls, timed by
    the same clock but not counted; the supervisor compares their times with the timed calls'
    (``supervise/fresh_inputs.py``). Their outputs cannot be compared here (no validated output
    exists for them), so they are kept (every one while they take ``KEEP_BYTES`` at most, else a
    uniform sample drawn after each call returned) and compared in the reference process: answers
    right only on inputs seen during the check fail there. Each set is used once per process: a
    second call on it could be replayed. The sets were made before the candidate was imported
    (``child``), from seeds it never sees, and are held masked (``MaskedTensor``) from then until
    their call.
    """

    KEEP_BYTES = 256 * 1024 * 1024

    def __init__(self, sets: Sequence[Sequence[Any]]):
        self.key = T.frombuffer(bytearray(T.urandom(MASK_BYTES)), dtype=torch.uint8)
        # Masked where the kind allows (a sparse or conjugate-view input is held as it is).
        self.sets = tuple(_held(values, self.key) for values in sets)
        self.used = 0  # sets handed out so far
        self.called = 0  # fresh calls made so far (the sample's count)
        self.kept: list[tuple[int, list[torch.Tensor]]] = []
        self.keep: int | None = None  # how many outputs are kept: set by the first call's size

    def take(self, count: int) -> list[int]:
        """The indexes of up to ``count`` sets never used before, now used."""
        chosen = list(range(self.used, min(self.used + max(0, count), T.length(self.sets))))
        self.used += T.length(chosen)
        return chosen

    def give_back(self, indexes: Sequence[int]) -> None:
        """Sets taken but never called (the last ones taken): usable again by a later run."""
        if indexes and T.length(indexes) <= self.used and indexes[-1] == self.used - 1:
            self.used -= T.length(indexes)

    def offer(self, index: int, outputs: Sequence[torch.Tensor]) -> None:
        """Keep set ``index``'s outputs: every fresh call's while ``keep`` allows, then a uniform sample."""
        self.called += 1
        if self.keep is None:
            size = sum(tensor.numel() * tensor.element_size() for tensor in outputs)
            self.keep = max(2, self.KEEP_BYTES // max(1, size))
        if T.length(self.kept) < self.keep:
            slot = T.length(self.kept)
        else:
            slot = int.from_bytes(T.urandom(8), "little") % self.called
            if slot >= self.keep:
                return
        with T.DisableTorchFunction(), T.DisableTorchDispatch():
            entry = (index, [T.clone(tensor) for tensor in outputs])
        if slot == T.length(self.kept):
            self.kept.append(entry)
        else:
            self.kept[slot] = entry

    def drawn(self) -> list[tuple[int, list[torch.Tensor]]]:
        """(fresh set, its kept outputs), in set order."""
        return sorted(self.kept, key=lambda entry: entry[0])


KERNEL_AUDITS = 16  # extra calls of a run, checked first and not counted (``checked_calls``)


def checked_calls(reps: int) -> int:
    """How many extra, checked calls a run of ``reps`` timed calls makes (``TimedLoop._run``):
    ``KERNEL_AUDITS``, or a quarter of the repetitions where that is fewer, but 4 at least (never more
    than the repetitions): a slow model's run would otherwise be nearly doubled."""
    return min(reps, KERNEL_AUDITS, max(4, reps // 4))


FRESH_MIN_CALLS = 4  # fresh calls a slow model's run makes at least, when it has the sets (the verdict needs 4)
FRESH_SLOW_MS = 50.0  # a call this long (the fastest estimate call) is a slow model's: its run makes fewer fresh calls


def _draw(below: int) -> int:
    """A number in ``range(below)`` from ``os.urandom`` captured before the candidate's import."""
    return int.from_bytes(T.urandom(8), "little") % max(1, below)


def checked_here(left: int, slots_left: int) -> bool:
    """Whether this slot of a run's timed loop is a checked call, ``left`` checks being due in its
    ``slots_left`` slots (this one included): selection sampling, so a run makes exactly its checks,
    each slot as likely as any other, and no slot's fate exists before its turn (``TimedLoop._run``)."""
    return _draw(slots_left) < left


def fresh_here(left: int, timed_left: int) -> int:
    """How many of the ``left`` fresh calls still due go before this timed call, ``timed_left`` timed
    calls remaining (this one included): each lands on any remaining one alike, so every fresh call
    falls before a timed call drawn uniformly, and all have landed by the last."""
    return sum(1 for _ in range(left) if _draw(timed_left) == 0)


def _fits(buffers: Sequence[torch.Tensor | None], values: Sequence[Any]) -> bool:
    """Whether a fresh set has the checked sets' form: a tensor of the buffer's shape and dtype where
    they have one, none where they have none. A set that does not (a task whose shapes follow the
    seed: the reference process fails such a task by name) is not called, so that the candidate is not
    failed for the task's inputs; its run then has fewer fresh calls (``fresh_calls_unjudged``). Safe
    only because the buffers' sets are checked first against the shapes they were made with
    (``child._time``, ``input_mutation``): else a candidate reshaping its kept set 0 in place made
    every fresh set unfit and so made no fresh call at all."""
    if T.length(buffers) != T.length(values):
        return False
    for buffer, value in zip(buffers, values, strict=True):
        tensor = T.is_instance(value, MaskedTensor) or T.is_instance(value, T.Tensor)
        if (buffer is None) == tensor:
            return False
        if buffer is not None and (tuple(buffer.shape) != tuple(value.shape) or buffer.dtype != value.dtype):
            return False
    return True


def _staged_value(buffer: torch.Tensor | None, value: Any, key: torch.Tensor) -> Any:
    """A fresh set's input for the buffer at its position (``_fits``): a masked tensor staged
    (``Unmasking``), any other value as it is."""
    if not T.is_instance(value, MaskedTensor):
        return T.to(value, buffer.device) if T.is_instance(value, T.Tensor) and buffer is not None else value
    assert buffer is not None, "a set that does not fit"
    return value.staged_into(buffer, key)


class TimedLoop:
    """Owns the buffers of one timing run: input buffers, flush buffer, validated outputs, counters."""

    def __init__(self, model: Callable[..., Any], input_sets: Sequence[Sequence[Any]],
                 validated: Sequence[Sequence[torch.Tensor]], *, device: torch.device,
                 protocol: TimingProtocol, atol: float, rtol: float, samples: TimedSamples | None = None,
                 fresh: FreshCalls | None = None, fresh_count: int = 0):
        self.model = model
        self.samples = samples  # offered every timed call's outputs (not the warm-up's)
        self.fresh = fresh  # sets never shown to this process: ``fresh_count`` of them called in this run
        self.fresh_count = fresh_count if fresh is not None else 0
        self._fresh_called: list[int] = []  # this run's fresh sets called so far
        self.device = device
        self.cuda = device.type == "cuda"
        self.protocol = protocol
        self.atol, self.rtol = atol, rtol
        # Tuples, not lists: a timed call that reaches this object cannot swap one element.
        self.sources = tuple(tuple(values) for values in input_sets)
        # One buffer per tensor input position, reused by every call: same pointer, changing contents.
        self.buffers = tuple(T.clone(value) if T.is_instance(value, T.Tensor) else None for value in self.sources[0])
        self.validated = tuple(tuple(outputs) for outputs in validated)
        # Where each validated output's storage lies and its version: no timed output may lie there (the
        # harness's own copy of the answer, reached through the stack) and no call may write there.
        self.held = tuple(tuple(_extent(want) for want in outputs) for outputs in self.validated)
        self.versions = tuple(tuple(want._version for want in outputs) for outputs in self.validated)
        flush_mb = protocol.flush_mb if self.cuda else protocol.cpu_flush_mb
        self.flush_buffer = torch.empty(max(1, flush_mb) * 1024 * 1024 // 4, dtype=torch.int32, device=device)
        self.counters = tuple(torch.zeros((), dtype=torch.int64, device=device) for _ in self.sources)

    def _arguments(self, values: Sequence[Any]) -> list[Any]:
        """The call's arguments: each tensor input copied into its buffer (a staged fresh set's
        unmasked there: ``Unmasking``)."""
        args = []
        with T.DisableTorchFunction(), T.DisableTorchDispatch():  # no mode sees the copy (checked: none is left)
            for buffer, value in zip(self.buffers, values, strict=True):
                if buffer is None:
                    args.append(value)
                elif T.is_instance(value, Unmasking):
                    _unmask(value, buffer)
                    args.append(buffer)
                else:
                    T.copy_(buffer, value)
                    args.append(buffer)
        return args

    def _validate(self, out: Any, index: int, state: tuple[tuple[str, Any], ...], *,
                  compare: bool = True) -> list[torch.Tensor]:
        """The validation step after every call, outside the window: nothing the call left behind can
        see or answer the harness's own work, then the output is compared with the validated one
        (``compare``; a fresh call has none: its shapes are held to set ``index``'s, its values are
        compared in the reference process)."""
        modes = T.active_modes()
        if modes:
            raise OutputProblem("torch_mode", f"a timed call returned with {', '.join(modes[:3])} still active: a mode "
                                              "left on torch's stack sees and can answer the harness's own tensor work")
        hooks = T.active_hooks()
        if hooks:
            raise OutputProblem("trace_hook", f"a timed call set a hook that sees the harness's frames "
                                              f"({', '.join(hooks)})")
        attributes = self.__dict__
        if T.length(attributes) != T.length(state) or any(attributes.get(name, state) is not value
                                                           for name, value in state):
            raise OutputProblem("harness_access", "a timed call changed the timing loop's own state "
                                                  "(its attributes: tolerances, validated outputs, counters, methods)")
        with T.DisableTorchFunction(), T.DisableTorchDispatch():
            outputs = output_tensors(out, self.device)
            expected = self.validated[index]
            if T.length(outputs) != T.length(expected):
                raise OutputProblem("timed_output_mismatch", "a timed call returned a different number of outputs")
            for got, want, version in zip(outputs, expected, self.versions[index], strict=True):
                if want._version != version:
                    raise OutputProblem("harness_access", "a timed call wrote into the harness's copy of a "
                                                          "validated output")
                if got.shape != want.shape or got.dtype != want.dtype:
                    raise OutputProblem("timed_output_mismatch", "a timed call returned an output of another "
                                                                 "shape or dtype than its validated output")
                if got.numel():
                    pointer = T.Tensor.data_ptr(got)
                    if any(start <= pointer < end for held in self.held for start, end in held):
                        raise OutputProblem("harness_access", "a timed call returned the harness's own copy of "
                                                              "its validated output (reached through the stack)")
                if not compare:
                    continue
                if want.dtype.is_floating_point or want.dtype.is_complex:
                    close = T.isclose(got, want, rtol=self.rtol, atol=self.atol, equal_nan=True)
                else:  # integers and bools exactly, as the reference process compares them (``compare``)
                    close = T.eq(got, want)
                T.add_(self.counters[index], T.count_nonzero(T.logical_not(close)))
        return outputs

    def _call(self, index: int, state: tuple[tuple[str, Any], ...], *, flush: bool = True,
              timed: bool = False, fresh: tuple[int, Sequence[Any]] | None = None,
              audit: bool = False) -> tuple[Any, float]:
        """One call of the model on set ``index``: (its CUDA events or None, host-clock ms).

        The events are (before flush, start, end); the host clock spans the same flush and call.
        ``state``: this loop's attributes as ``run`` found them (a local there, out of a call's reach).
        ``timed``: a call whose time counts; its validated outputs are offered to ``samples``.
        ``fresh``: (fresh set, its values on the device): the call is on that set instead (``FreshCalls``),
        held to set ``index``'s shapes. ``audit``: first check that the kernels of the operators the step
        before the clock runs are still torch's (``trusted.patched_kernels``).

        From the call's first step to the moment its clock starts (on CUDA: its ``start`` event), nothing
        of the candidate's may run, since what runs there runs outside the window. So: a torch mode or
        hook in place is refused here, before the step, not only after the call, and the step runs with
        modes off; the cyclic collector is off (its finalizers); and, when ``audit``, the kernels of the
        step's operators and the signals' Python handlers are checked (a handler runs wherever the
        main thread is when its signal comes). Audits of 2026-12-01 armed each after the check that
        preceded: a kernel or a mode by a finalizer on the returned output, a kernel by a timer's
        handler that read the interrupted frame; each was `correct` at 10-100x. Every call does the
        same, so none can tell a checked call from the others. The window itself is as before: the
        modes and the collector are back before the ``start`` event. A thread of the candidate's can
        still run while a torch call of this step has let go of the interpreter lock (its live threads
        are refused at the stage's end).
        """
        collecting = T.gc_is_enabled()
        T.gc_disable()
        try:
            modes, hooks = T.active_modes(), T.active_hooks()
            if modes or hooks:
                raise OutputProblem("torch_mode" if modes else "trace_hook",
                                    f"a call began with {', '.join((modes + hooks)[:3])} in place: it sees and can "
                                    "answer the harness's own work before the clock starts")
            if audit:  # handlers first: one can leave a kernel behind, so the cause is named
                handlers = T.signal_handlers_set()
                if handlers:
                    raise OutputProblem("signal_handler", "a Python signal handler was set, which runs wherever the "
                                                          f"harness is when its signal comes ({', '.join(handlers[:3])})")
                kernels = T.patched_kernels(before_clock=True)
                if kernels:
                    raise OutputProblem("patched_kernel", "the kernel of an operator the harness runs before a timed "
                                                          f"call's clock starts was replaced ({'; '.join(kernels[:3])})")
            with T.DisableTorchFunction(), T.DisableTorchDispatch(), T.DisablePythonDispatcher():
                args = self._arguments(self.sources[index] if fresh is None else fresh[1])
                if self.cuda:
                    strict = self.protocol.window == "strict"
                    before = T.CudaEvent(enable_timing=True)
                    start, end = T.CudaEvent(enable_timing=True), T.CudaEvent(enable_timing=True)
                    if strict and flush:
                        T.zero_(self.flush_buffer)
                    T.cuda_synchronize()
                    t0 = T.perf_counter()
                    T.event_record(before)
                    if flush and not strict:
                        T.zero_(self.flush_buffer)
                elif flush:
                    T.zero_(self.flush_buffer)
        finally:
            if collecting:
                T.gc_enable()
        if self.cuda:
            T.event_record(start)
            out = self.model(*args)
            T.cuda_synchronize()
            T.event_record(end)
            t1 = T.perf_counter()
            self._keep(self._validate(out, index, state, compare=fresh is None), index, timed,
                       None if fresh is None else fresh[0])
            return (before, start, end), (t1 - t0) * 1000.0
        t0 = T.perf_counter()
        out = self.model(*args)
        t1 = T.perf_counter()
        self._keep(self._validate(out, index, state, compare=fresh is None), index, timed,
                   None if fresh is None else fresh[0])
        return None, (t1 - t0) * 1000.0

    def _keep(self, outputs: list[torch.Tensor], index: int, timed: bool, fresh: int | None) -> None:
        if fresh is not None:
            assert self.fresh is not None, "a fresh call without fresh sets"
            self.fresh.offer(fresh, outputs)
        elif timed and self.samples is not None:
            self.samples.offer(index, outputs)

    def _staged(self) -> list[tuple[int, list[Any]]]:
        """This run's fresh sets, copied to the device now, before its first call, still masked, their
        unmasking planned (``MaskedTensor.staged_into``): each fresh call then unmasks its set device to
        device into its buffer, as every timed call copies. Copied from host memory right before
        the call instead, a host-bound model's fresh calls read 1.4-1.7x its timed calls' median on an
        H200 (level3-pike 13, 20, 23's solutions, 2026-11-30): the copy leaves the CPU's caches cold."""
        if self.fresh is None or self.fresh_count <= 0:
            return []
        staged = []
        with T.DisableTorchFunction(), T.DisableTorchDispatch():
            key = T.to(self.fresh.key, self.device)
        for index in self.fresh.take(self.fresh_count):
            values = self.fresh.sets[index]
            if _fits(self.buffers, values):  # else spent uncalled
                staged.append((index, [_staged_value(buffer, value, key)
                                       for buffer, value in zip(self.buffers, values, strict=True)]))
        return staged

    def run(self) -> TimedRun:
        n_sets = T.length(self.sources)
        run = TimedRun()
        state = tuple(self.__dict__.items())  # checked in every call's validation step
        fresh_sets = self._staged()
        try:
            return self._run(run, state, n_sets, fresh_sets)
        except BaseException:
            # Sets not called yet go back (a run ended early, to be taken again alone, keeps its fresh
            # calls for that run); a set once called is spent.
            if self.fresh is not None:
                self.fresh.give_back([index for index, _ in fresh_sets if index not in self._fresh_called])
            raise

    def _run(self, run: TimedRun, state: tuple[tuple[str, Any], ...], n_sets: int,
             fresh_sets: list[tuple[int, list[Any]]]) -> TimedRun:
        self._fresh_called.clear()
        with torch.no_grad():
            self._call(0, state, audit=True)  # first call: lazy compilation (Triton JIT, torch.compile) happens here
            begin = T.perf_counter()
            fastest: float | None = None  # the fastest estimate call's own time
            for i in range(self.protocol.estimate_calls):
                _, host = self._call(i % n_sets, state)
                fastest = host if fastest is None or host < fastest else fastest
            run.estimate_ms = (T.perf_counter() - begin) * 1000.0 / max(1, self.protocol.estimate_calls)
            run.warmup, run.reps = self.protocol.plan(run.estimate_ms)
            for i in range(run.warmup):
                self._call(i % n_sets, state, flush=self.protocol.warmup_flush)
            # A slow model's run (calls of FRESH_SLOW_MS or more) makes fewer fresh calls, a quarter of its
            # repetitions but at least FRESH_MIN_CALLS: they are extra calls, and the device is held through
            # them. Others make every one asked for (8 by default): fewer on a short, noisy call are too few
            # to tell a cache from the host (a 2-core CI runner once read 3 of 4 honest ones 1.5x slow, twice).
            # Slow by its calls' own time, not the estimate's: that also holds the flush and the validation
            # step, which made a 2-core CPU runner's smoke tasks slow models.
            slow = fastest is not None and fastest >= FRESH_SLOW_MS
            wanted = max(FRESH_MIN_CALLS, run.reps // 4) if slow else T.length(fresh_sets)
            spare = fresh_sets[wanted:]
            if spare and self.fresh is not None:
                del fresh_sets[T.length(fresh_sets) - T.length(spare):]  # in place: ``run`` sees it too
                self.fresh.give_back([index for index, _ in spare])
            pending = list(fresh_sets)
            # Calls checked first (``_call``'s ``audit``): extra calls, among the timed calls' slots, not
            # counted. A kernel that runs before a call's clock must be in place by that call's first step,
            # where nothing of the candidate's runs before the flush. Which slot is checked, and where
            # the fresh calls go, is drawn at that slot (``checked_here``, ``fresh_here``), never before:
            # drawn ahead, the plan lay in this frame's locals, and a candidate that read it there
            # registered its kernel for the unchecked calls only and took it away before each checked one
            # (`correct` at 5.7-8.4x on a CPU task, an audit, 2026-12-01; the fresh calls' places, in the
            # same frame, would tell a cache which calls to compute). A kernel in place for a share of the
            # calls is missed by all 16 checks with that share's complement to the 16th power, in each
            # run (the first call of each run is checked too, and the names and kernels at each stage's
            # end). The checked calls' times are dropped: the check's host work makes the call after it
            # slower (a host-bound model's fresh calls, each checked first, read up to 1.95x its timed
            # calls' median on an H200: the published solutions of level3-pike 4, 13 and 33, 2026-12-01;
            # 0.95-1.13 the run before), so a checked call counted among the timed ones, or as a fresh
            # one, would bias what it is compared with.
            checks = checked_calls(run.reps)
            slots = run.reps + checks
            events, fresh_events = [], []
            i = 0  # timed calls counted so far
            begin = T.perf_counter()
            for slot in range(slots):
                if checked_here(checks, slots - slot):  # validated like the others, its time and output dropped
                    checks -= 1
                    self._call(slot % n_sets, state, audit=True)
                    continue
                for _ in range(fresh_here(T.length(pending), run.reps - i)):  # fresh calls: not counted
                    fresh = pending.pop(0)
                    self._fresh_called.append(fresh[0])
                    run.fresh_at.append(i)
                    fresh_events.append(self._call(i % n_sets, state, fresh=fresh))
                pair, host = self._call(i % n_sets, state, timed=True)
                run.host_ms.append(host)
                events.append(pair)
                i += 1
            if self.cuda:
                T.cuda_synchronize()
            run.host_wall_ms = (T.perf_counter() - begin) * 1000.0
        if self.cuda:
            T.event_synchronize(events[-1][2])
            run.samples_ms = [T.event_elapsed(start, end) for _, start, end in events]
            run.span_ms = [T.event_elapsed(before, end) for before, _, end in events]
            run.fresh_ms = [T.event_elapsed(start, end) for (_, start, end), _ in fresh_events]
        else:
            run.samples_ms = list(run.host_ms)
            run.fresh_ms = [host for _, host in fresh_events]
        with T.DisableTorchFunction(), T.DisableTorchDispatch():
            run.mismatches = [int(T.item(counter)) for counter in self.counters]
        return run
