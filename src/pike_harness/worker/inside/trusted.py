"""Functions the candidate's process uses to time and check, captured before the candidate is imported.

A candidate runs in the same process as the code that times it, so it could replace
``time.perf_counter``, ``torch.cuda.Event.elapsed_time`` or ``torch.cuda.synchronize``. The child
imports this module first, uses only the references captured here, and after the candidate has run
asks ``changed()`` whether any watched name now points elsewhere: a changed name is a rejection.
This defeats monkeypatching of public names (the trick an LLM reaches for); code that digs through
frames with ``gc``/``ctypes`` can defeat any in-process check, which is why the verdict on
correctness is reached in the supervisor, a process the candidate never ran in.

Beyond the public names, ``watch_harness()`` takes a snapshot, just before the candidate is imported, of
every name of the harness's own modules in this process (the timed loop's class and its methods, the
child's ``CandidateProcess``, the protocols, this module), of the builtins and of ``sys.modules``'
entries for them; ``changed(snapshot)`` reports any of them replaced (a candidate that finds
``TimedLoop`` by scanning ``sys.modules`` and wraps ``_call`` names no harness module in its source).
It also says whether a torch function or dispatch mode is on this thread's stack (``active_modes``: a
mode left there sees, and can answer, every tensor operation of the harness) and whether a trace,
profile or monitoring hook is set (``active_hooks``: one sees the harness's frames, before the timer
starts); ``DisableTorchFunction`` and ``DisableTorchDispatch`` run the harness's own tensor work with
both kinds of mode switched off.
"""

from __future__ import annotations

import builtins
import contextlib
import gc
import hashlib
import importlib
import io
import os
import signal
import stat
import sys
import threading
import time
import types
from collections.abc import Iterable
from typing import Any

import torch
import torch.utils._device  # torch's own mode behind torch.set_default_device (imported lazily by torch)

# Watched names, by dotted path. The timer group decides the check name ("patched_timer").
TIMER_NAMES = (
    "time.perf_counter", "time.perf_counter_ns", "time.monotonic", "time.time",
    "torch.cuda.synchronize", "torch.cuda.Event", "torch.cuda.Event.record", "torch.cuda.Event.elapsed_time",
    "torch.cuda.Event.synchronize", "torch._C._cuda_synchronize",
    "torch._C._CudaEventBase.record", "torch._C._CudaEventBase.elapsed_time",
    "torch._C._CudaEventBase.synchronize",
)
CHECK_NAMES = (
    "torch.allclose", "torch.isclose", "torch.isfinite", "torch.equal", "torch.count_nonzero",
    "torch.logical_not", "torch.save", "torch.load", "torch.Tensor", "torch.Tensor.clone",
    "torch.Tensor.copy_", "torch.Tensor.all", "torch.Tensor.cpu", "torch.Tensor.to", "torch.Tensor.add_", "torch.Tensor.zero_",
    "torch.Tensor.detach", "torch.Tensor.item", "torch.Tensor.untyped_storage", "torch.Tensor.data_ptr",
    "threading.enumerate", "builtins.type", "builtins.isinstance", "builtins.len",
    "torch.Tensor.untyped_storage", "torch.UntypedStorage.data_ptr", "torch.UntypedStorage.nbytes",
    "torch.Tensor._version", "torch.Tensor.numel",
    "torch._C._len_torch_function_stack", "torch._C._get_function_stack_at", "torch._C._len_torch_dispatch_stack",
    "torch._C._get_dispatch_stack_at", "torch._C.DisableTorchFunction", "torch._C._DisableTorchDispatch",
    "torch.utils._device.DeviceContext", "torch.utils._device.DeviceContext.__torch_function__",
    "sys.gettrace", "sys.getprofile", "threading.gettrace", "threading.getprofile", "os.urandom",
    "os.open", "os.read", "os.fstat", "os.close", "hashlib.sha256", "io.BytesIO",
)


def _resolve(path: str) -> Any:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise AttributeError(path)


def _snapshot(paths: tuple[str, ...]) -> dict[str, Any]:
    captured = {}
    for path in paths:
        with contextlib.suppress(AttributeError):  # not in this torch build (CUDA internals on a CPU wheel)
            captured[path] = _resolve(path)
    return captured


_CAPTURED: dict[str, Any] = _snapshot(TIMER_NAMES + CHECK_NAMES)

# The references the child's timing and checking code calls.
perf_counter = time.perf_counter
sleep = time.sleep
urandom = os.urandom  # the draw of the timed calls whose outputs the reference process sees (``TimedSamples``)
# Reading the hidden inputs file and checking its digest (``child._exchange_bytes``).
open_file, read, fstat, close = os.open, os.read, os.fstat, os.close
is_regular = stat.S_ISREG
sha256 = hashlib.sha256
BytesIO = io.BytesIO
exact_type = builtins.type
length = builtins.len
is_instance = builtins.isinstance
thread_list = threading.enumerate
isclose = torch.isclose
eq = torch.eq  # integer and bool outputs: exact (``timing.TimedLoop._validate``)
logical_not = torch.logical_not
count_nonzero = torch.count_nonzero
equal = torch.equal
save = torch.save
load = torch.load
Tensor = torch.Tensor
clone = torch.Tensor.clone
copy_ = torch.Tensor.copy_
add_ = torch.Tensor.add_
zero_ = torch.Tensor.zero_
to = torch.Tensor.to
item = torch.Tensor.item
all_ = torch.Tensor.all
cuda_synchronize = torch.cuda.synchronize
CudaEvent = torch.cuda.Event
event_record = torch.cuda.Event.record
event_elapsed = torch.cuda.Event.elapsed_time
event_synchronize = torch.cuda.Event.synchronize
storage = torch.Tensor.untyped_storage
# Who else holds a tensor or its memory (``timing.FreshCalls`` wipes a fresh set's plain tensors only
# when nothing but the harness does): None where this torch lacks the storage count.
refcount = sys.getrefcount
storage_users = getattr(torch._C, "_storage_Use_Count", None)
no_grad = torch.no_grad
# Every kernel registered for each operator, per dispatch key, the overridden ones too (marked inactive),
# and which dispatch keys have a backend fallback (``patched_kernels``).
dump_registrations = getattr(torch._C, "_dispatch_dump", None)
all_op_names = getattr(torch._C, "_dispatch_get_all_op_names", None)
has_fallback = getattr(torch._C, "_dispatch_has_backend_fallback", None)
DISPATCH_KEYS = tuple(torch._C.DispatchKey.__members__.values())
# A fresh set's bytes, masked while held (``timing.FreshCalls``) and unmasked into a call's buffer.
bitwise_xor = torch.bitwise_xor
frombuffer = torch.frombuffer
view = torch.Tensor.view
reshape = torch.Tensor.reshape
narrow = torch.Tensor.narrow
contiguous = torch.Tensor.contiguous
is_contiguous = torch.Tensor.is_contiguous
DisableTorchFunction = torch._C.DisableTorchFunction  # modes and subclass handlers off, on this thread
DisableTorchDispatch = torch._C._DisableTorchDispatch  # the same for __torch_dispatch__
DisablePythonDispatcher = torch._C._DisablePythonDispatcher  # and the Python kernels of ``OpOverload.py_impl``
# The dispatch keys this thread adds to or takes from every operator's call (``active_modes``).
tls_included = torch._C._dispatch_tls_local_include_set
tls_excluded = torch._C._dispatch_tls_local_exclude_set
function_stack_length = torch._C._len_torch_function_stack
function_stack_at = torch._C._get_function_stack_at
dispatch_stack_length = torch._C._len_torch_dispatch_stack
dispatch_stack_at = torch._C._get_dispatch_stack_at
get_trace = sys.gettrace
get_profile = sys.getprofile
thread_trace = threading.gettrace
thread_profile = threading.getprofile
DeviceContext = torch.utils._device.DeviceContext

_OWN = {name: value for name, value in globals().items()
        if not name.startswith("_") and callable(value) and name not in ("annotations",)}


_MISSING = object()
# Names whose addition to a harness module or class means nothing: the warnings registry, the pickling
# cache of slot names, submodules bound on their package when imported.
_ADDED_IGNORED = ("__warningregistry__", "__slotnames__")
# The hooks in place before the candidate was imported (a coverage tracer of the test run, say): set by
# watch_harness, compared by active_hooks.
_base_hooks: tuple[Any, Any, Any, Any] = (get_trace(), get_profile(), thread_trace(), thread_profile())
_base_dispatch: tuple[Any, Any] = (tls_included(), tls_excluded())


def _code_of(value: Any) -> tuple[Any, ...]:
    """What a function runs and its defaults (assignable without replacing the function object)."""
    kind = exact_type(value)
    if kind is types.FunctionType:
        return (value.__code__, value.__defaults__, value.__kwdefaults__)
    if kind is staticmethod or kind is classmethod:
        return _code_of(value.__func__)
    if kind is property:
        return _code_of(value.fget) + _code_of(value.fset) + _code_of(value.fdel)
    return ()


def _entries(owner: Any) -> tuple[tuple[str, Any, tuple[Any, ...]], ...]:
    return tuple((name, value, _code_of(value)) for name, value in owner.__dict__.items())


# The ATen operators the harness itself runs in the candidate's process, every overload: the timed
# loop's input copy, flush, unmasking, validation (``isclose`` and what it runs), sampling and moves
# between devices, the noise probe's, the child's own checks (``patched_kernels``).
HARNESS_OPS = frozenset((
    "copy_", "zero_", "fill_", "bitwise_xor", "clone", "isclose", "logical_not", "count_nonzero", "add_", "add",
    "sub", "mul", "abs", "le", "eq", "ne", "isnan", "isfinite", "__iand__", "__ior__", "bitwise_and_",
    "bitwise_or_", "bitwise_and", "bitwise_or", "item", "_local_scalar_dense", "to", "_to_copy", "empty",
    "empty_strided", "empty_like", "view", "reshape", "_reshape_alias", "narrow", "slice", "as_strided",
    "contiguous", "equal", "all", "detach", "alias", "resize_", "set_", "lift_fresh"))
# Of those, the ones a timed call's step before its clock runs (the input copy, a fresh set's unmasking,
# into new memory where the buffer is not contiguous, the flush, which fills): the only ones checked
# before calls (``patched_kernels(before_clock=True)``, 23 tables).
BEFORE_CLOCK_OPS = frozenset(("copy_", "zero_", "fill_", "bitwise_xor", "clone", "empty_like", "empty_strided",
                              "view", "reshape", "_reshape_alias", "narrow", "slice"))
_kernels: tuple[tuple[str, str], ...] = ()  # (operator, its registrations) when the candidate was imported
_kernels_before_clock: tuple[tuple[str, str], ...] = ()  # the BEFORE_CLOCK_OPS among them
_fallbacks: tuple[Any, ...] | None = None  # the dispatch keys with a backend fallback when the candidate was imported
gc_disable, gc_enable, gc_is_enabled = gc.disable, gc.enable, gc.isenabled
get_signal = signal.getsignal
_signals: tuple[tuple[int, Any], ...] = ()  # each signal's Python handler when the candidate was imported


def _signal_handlers() -> tuple[tuple[int, Any], ...]:
    found = []
    for number in sorted(signal.valid_signals()):
        try:
            found.append((int(number), get_signal(number)))
        except (ValueError, OSError):
            continue
    return tuple(found)


def signal_handlers_set() -> list[str]:
    """The signals whose Python handler is no longer the one in place when the candidate was imported.
    Why: a handler runs wherever the main thread happens to be when its signal comes, between any two
    steps of the harness's own code; a timer's handler that read the interrupted frame registered a
    kernel between the timed loop's check and its flush (an audit, 2026-12-01). Checked with the
    kernels (``TimedLoop._call``), about 10 us."""
    moved = []
    for number, handler in _signals:
        try:
            now = get_signal(number)
        except (ValueError, OSError):
            continue
        if now is not handler and callable(now):  # a Python function: code of the candidate's that can run here
            moved.append(f"signal {number}")
    return moved


def _kernel_tables() -> tuple[tuple[str, str], ...]:
    if dump_registrations is None or all_op_names is None:
        return ()
    return tuple((name, dump_registrations(name)) for name in all_op_names()
                 if name.startswith("aten::") and name[6:].split(".", 1)[0] in HARNESS_OPS)


def _fallback_keys() -> tuple[Any, ...]:
    if has_fallback is None:
        return ()
    return tuple(key for key in DISPATCH_KEYS if has_fallback(key))


def patched_kernels(before_clock: bool = False) -> list[str]:
    """The harness's own operators (``HARNESS_OPS``) that gained a kernel for some dispatch key since the
    candidate was imported, each with its new registration, and the dispatch keys that gained a backend
    fallback. Why: a kernel registered over ``aten::zero_`` (``torch.library``, or ``TORCH_LIBRARY_IMPL``
    in a ``load_inline`` extension) runs whenever the harness flushes the cache before a timed call,
    after the call's input is in place and before the clock starts: it computed the answer there and
    the timed call returned it from a dictionary, every output right, 81x faster than eager on a CPU
    task (an audit, 2026-12-01). No torch mode is involved, so ``active_modes`` does not see it.

    Each operator's registrations, not its dispatch table: the table names each key's kernel only by
    the file and line it was registered at, which a candidate chooses (Python code compiled under
    torch's own file name and line, or ``#line`` in C++), and so a kernel registered over
    ``aten::zero_`` "at" ``RegisterCPU_2.cpp:4799`` left the table as it was (2026-12-01). An override
    keeps the kernel it replaced in the registrations, marked inactive, whatever it is named. A backend
    fallback serves every operator without a kernel of its own for that key; a key's second fallback
    is refused by torch. ``before_clock``: only ``BEFORE_CLOCK_OPS``' (0.39 ms with the fallbacks on a
    2-core CPU host, where their tables took 0.68 ms), which the timed loop checks before chosen calls
    (``TimedLoop._call``)."""
    if dump_registrations is None:
        return []
    found = []
    for name, table in _kernels_before_clock if before_clock else _kernels:
        now = dump_registrations(name)
        if now != table:
            before = set(table.splitlines())
            new = [line.strip() for line in now.splitlines() if line not in before]
            found.append(f"kernel {name} ({new[0][:160] if new else 'a registration removed'})")
    if _fallbacks is not None:  # taken by ``watch_harness``
        fallbacks = _fallback_keys()
        if fallbacks != _fallbacks:
            found += [f"backend fallback for {key}" for key in fallbacks if key not in _fallbacks] or \
                ["a backend fallback removed"]
    return found


def watch_harness(modules: Iterable[types.ModuleType]) -> tuple[Any, ...]:
    """A snapshot of the harness's names, taken just before the candidate is imported: every global of
    ``modules`` (and of every ``pike_harness`` module loaded), every attribute of the classes they
    define, the code and defaults of every function among them, the builtins, and which module object
    ``sys.modules`` holds under each name. Also takes the hooks already set as the baseline of
    ``active_hooks`` and the harness's operators' kernels as the baseline of ``patched_kernels``. Keep
    the snapshot where the candidate cannot name it (``changed`` compares it)."""
    global _base_hooks, _base_dispatch, _kernels, _kernels_before_clock, _fallbacks, _signals
    _base_hooks = (get_trace(), get_profile(), thread_trace(), thread_profile())
    _base_dispatch = (tls_included(), tls_excluded())
    _signals = _signal_handlers()
    _kernels = _kernel_tables()
    _fallbacks = _fallback_keys()
    _kernels_before_clock = tuple((name, table) for name, table in _kernels
                                  if name[6:].split(".", 1)[0] in BEFORE_CLOCK_OPS)
    chosen = {id(module): module for module in modules}
    for name, module in list(sys.modules.items()):
        if name.startswith("pike_harness") and exact_type(module) is types.ModuleType:
            chosen[id(module)] = module
    watched = []
    for module in chosen.values():
        label = getattr(module.__spec__, "name", None) or module.__name__  # the child runs as __main__
        watched.append((label, module, _entries(module), True))
        for value in list(module.__dict__.values()):
            if is_instance(value, type) and value.__module__ == module.__name__:
                watched.append((f"{label}.{value.__qualname__}", value, _entries(value), True))
    watched.append(("builtins", builtins, _entries(builtins), False))  # added builtins shadow nothing
    held = tuple((name, module) for name, module in sys.modules.items()
                 if any(module is chosen_module for chosen_module in chosen.values()))
    return (tuple(watched), held)


def rewatch(snapshot: tuple[Any, ...], owner: Any, name: str) -> tuple[Any, ...]:
    """``snapshot`` with ``owner``'s ``name`` taken again (a global the harness itself sets later)."""
    watched, held = snapshot
    value = owner.__dict__.get(name, _MISSING)
    return (tuple((label, o, tuple((n, value, _code_of(value)) if n == name else (n, v, c) for n, v, c in entries)
                   if o is owner else entries, strict) for label, o, entries, strict in watched), held)


def changed(snapshot: tuple[Any, ...] = ()) -> list[str]:
    """Watched names (and this module's own references, and the names in ``snapshot``, from
    ``watch_harness``) that no longer hold what was captured; with a snapshot, also the harness's
    operators whose kernels were replaced since (``patched_kernels``)."""
    moved = []
    for path, original in _CAPTURED.items():
        try:
            now = _resolve(path)
        except AttributeError:
            moved.append(path)
            continue
        if now is not original:
            moved.append(path)
    module_globals = globals()
    for name, original in _OWN.items():
        if module_globals.get(name) is not original:
            moved.append(f"{__name__}.{name}")
    if snapshot:
        watched, held = snapshot
        for label, owner, entries, strict in watched:
            namespace = owner.__dict__
            for name, value, code in entries:
                now = namespace.get(name, _MISSING)
                if now is not value or (code and _code_of(now) != code):
                    moved.append(f"{label}.{name}")
            if strict and len(namespace) != len(entries):
                known = {name for name, _, _ in entries}
                moved.extend(f"{label}.{name} (added)" for name, value in list(namespace.items())
                             if name not in known and name not in _ADDED_IGNORED
                             and exact_type(value) is not types.ModuleType)
        for name, module in held:
            if sys.modules.get(name) is not module:
                moved.append(f"sys.modules[{name!r}]")
        moved.extend(patched_kernels())
    return sorted(set(moved))


# The timing loop and the protocols are the timer, as much as the clock they read.
TIMER_MODULES = ("pike_harness.worker.inside.timing.", "pike_harness.worker.inside.protocols.")


def check_name(moved: list[str]) -> str:
    """The rejection check for a list of moved names: a replaced kernel first (its own check), then
    timers, the usual target."""
    if any(path.startswith("kernel ") for path in moved):
        return "patched_kernel"
    if any(path in TIMER_NAMES or path.startswith(TIMER_MODULES)
           or path.endswith(("perf_counter", "cuda_synchronize", "event_elapsed", "event_record",
                             "event_synchronize", "CudaEvent"))
           for path in moved):
        return "patched_timer"
    return "patched_function"


def active_modes() -> list[str]:
    """The torch function and dispatch modes on this thread's stacks (innermost last), by class.

    torch's own ``DeviceContext`` (``torch.set_default_device``) is not counted: it only fills in the
    device of factory calls that name none, and the harness names its devices.

    Also this thread's dispatch keys, included in or excluded from every call, where they differ from
    those in place when the candidate was imported. Why: ``torch._C._EnablePythonDispatcher()``,
    entered and never left, includes the ``PythonDispatcher`` key, and a Python kernel registered with
    ``torch.ops.aten.zero_.default.py_impl`` then ran at the harness's flush, with no mode on either
    stack and the dispatcher's registrations unchanged (its kernels live in ``OpOverload.py_kernels``):
    it computed the answer before the clock, `correct` at 70-200x on a CPU task (an audit, 2026-12-01)."""
    found = []
    included, excluded = tls_included(), tls_excluded()
    if included != _base_dispatch[0] or excluded != _base_dispatch[1]:
        base_included, base_excluded = _base_dispatch
        found.append(f"dispatch keys added {included - base_included} and {base_excluded - excluded}, taken away "
                     f"{base_included - included} and {excluded - base_excluded} (included, excluded on this thread)")
    if not function_stack_length() and not dispatch_stack_length():  # the usual case: two C calls
        return found
    for index in range(function_stack_length()):
        mode = function_stack_at(index)
        if exact_type(mode) is not DeviceContext:
            found.append(f"{exact_type(mode).__qualname__} (torch function mode)")
    for index in range(dispatch_stack_length()):
        try:
            kind = exact_type(dispatch_stack_at(index)).__qualname__
        except Exception:  # an infrastructure mode slot this torch does not hand out by index
            kind = "?"
        found.append(f"{kind} (torch dispatch mode)")
    return found


def active_hooks() -> list[str]:
    """Trace and profile functions set on this thread or for new threads, beyond those in place before
    the candidate was imported."""
    now = (get_trace(), get_profile(), thread_trace(), thread_profile())
    if now[0] is _base_hooks[0] and now[1] is _base_hooks[1] and now[2] is _base_hooks[2] \
            and now[3] is _base_hooks[3]:
        return []
    names = ("sys.settrace", "sys.setprofile", "threading.settrace", "threading.setprofile")
    return [name for name, hook, base in zip(names, now, _base_hooks, strict=True) if hook is not base]
