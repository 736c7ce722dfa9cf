"""Seeing, while it happens, whether a candidate's checked calls run the reference ``Model``'s code.

A candidate file often carries a copy of the task's ``Model`` next to its ``ModelNew`` (KernelBench's
format invites it). Building that ``Model`` in ``__init__`` to take its weights (fold conv+BN, copy a
``Linear``) is legitimate and only flagged ``borrows_reference``; a checked call that computes with
it passes the reference off as a kernel and is rejected (``calls_reference_model``). Reading the source
cannot tell the two apart, so the guard watches execution instead:

- The reference's code is the set of code objects of the in-file ``Model``'s methods (and nested
  functions), taken right after import, before ``ModelNew`` is constructed. Matching is by code
  object identity, so every way to reach that code is seen: ``self.ref(x)``, ``Model.forward(self.ref, x)``,
  ``super().forward(x)`` from a subclass, a reference to ``Model.forward`` kept at import time,
  ``types.FunctionType(Model.forward.__code__, ...)``.
- Each checked call (and the construction) runs under ``sys.setprofile``; a call event whose code is
  the reference's is recorded with the input set it happened in.
- An audit hook (``sys.addaudithook``: it cannot be removed from Python) reports what would blind the
  profiler or swap the watched code: ``sys.setprofile`` called by anyone but the guard while a call
  is watched, and ``__code__`` assignment on the reference's functions at any time after import. Class
  attributes raise no audit event: the guard compares the reference class's methods with a snapshot
  at the start and end of every watched stretch (``Model.forward = ...``). Each is a rejection.
- The same hook records every call that sets a trace, profile or monitoring hook made by anyone but
  the guard, from before the candidate's import (``hook_calls``): the child rejects it (``trace_hook``).
- Code equal to the reference's by content but not identity (the reference's source copied under
  another name, or ``exec``'d again) is the candidate's own eager PyTorch; it is flagged
  ``runs_reference_copy``, not rejected: the ``offline:mutate`` strategy builds its programs that way.

Not caught (documented in docs/evaluator.md): running the reference's submodules one by one
(``self.ref.features(x)``: torch's own modules, equivalent to writing the eager code); a thread started
and joined inside a call after ``threading.setprofile`` was undone; ``torch.compile`` of the reference
(Dynamo runs transformed code, not the reference's frames); ctypes (flagged ``introspection``).
Timed calls are not profiled (it would distort the timing): ``count_timed_calls`` swaps the code of
every function object running the reference's methods for a counting trampoline instead. A candidate
that passes the check with its own code gains nothing by calling the reference later, and a timed call
that computes differently from its checked call is caught by the timed-output comparison. Standard
library only.
"""

from __future__ import annotations

import sys
import threading
import types
from dataclasses import dataclass, field
from typing import Any

REFERENCE_NAME = "Model"
_set_profile = sys.setprofile  # captured before the candidate is imported (the child imports us first)
_get_profile = sys.getprofile
_set_thread_profile = threading.setprofile
_GUARD: ReferenceGuard | None = None


# Calls that set a hook seeing every Python frame, the harness's included: a trace or profile function
# (``threading.settrace``'s reaches new threads through ``sys.settrace``), the all-threads forms of
# Python 3.12 and a ``sys.monitoring`` callback. Any made by anyone but the guard, from this module's
# import on (before the candidate's), is kept here; the child rejects the candidate for one
# (``trace_hook``). A trace function that sees the timed loop's frames can compute before the timer starts.
HOOK_EVENTS = frozenset(("sys.settrace", "sys.setprofile", "sys._settraceallthreads", "sys._setprofileallthreads",
                         "sys.monitoring.register_callback"))
_hook_calls: dict[str, int] = {}  # event -> how many


def _dispatch(event: str, args: tuple, _hooks: frozenset = HOOK_EVENTS, _calls: dict = _hook_calls) -> None:
    guard = _GUARD
    if event in _hooks and (guard is None or not guard._own_change):
        _calls[event] = _calls.get(event, 0) + 1
    if guard is not None:
        guard.audit(event, args)


def hook_calls() -> dict[str, int]:
    """How many hook-setting calls of each kind were made so far, the guard's own left out."""
    return dict(_hook_calls)


# Installed when this module is imported, which the child does before it imports the candidate: a hook
# cannot be removed, and a candidate cannot veto one added before its own code ran.
sys.addaudithook(_dispatch)


@dataclass
class Observation:
    """What the guard saw during one watched stretch (construction, or one checked call)."""

    reference_calls: list[str] = field(default_factory=list)  # qualnames of reference code that ran
    reference_inits: int = 0
    copies: list[str] = field(default_factory=list)  # code equal to the reference's, other identity
    tampering: list[str] = field(default_factory=list)


def _code_objects(code: types.CodeType) -> list[types.CodeType]:
    found = [code]
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found.extend(_code_objects(const))
    return found


def _functions_of(cls: type) -> list[types.FunctionType]:
    functions = []
    for value in vars(cls).values():
        value = getattr(value, "__func__", value)  # staticmethod / classmethod
        if isinstance(value, property):
            value = value.fget
        if isinstance(value, types.FunctionType):
            functions.append(value)
    return functions


def _fingerprint(code: types.CodeType) -> tuple:
    """What a code object computes, without where it was written: the names it uses (globals,
    attributes, methods, in order), its constants and its signature. Not the bytecode: the same source
    compiles to different instructions in different contexts (LOAD_ATTR against LOAD_METHOD)."""
    consts = tuple(_fingerprint(c) if isinstance(c, types.CodeType) else (type(c).__name__, repr(c))
                   for c in code.co_consts)
    return (code.co_names, consts, code.co_argcount, code.co_kwonlyargcount, code.co_nlocals)


class ReferenceGuard:
    """Watches one candidate module's reference ``Model``; arm it around construction and each call."""

    def __init__(self, module: types.ModuleType, candidate: Any):
        reference = getattr(module, REFERENCE_NAME, None)
        self.reference: type | None = None
        self.codes: dict[int, tuple[str, bool]] = {}  # id(code) -> (qualname, is __init__)
        self.fingerprints: set[tuple] = set()
        self._keep: list[Any] = []  # codes whose ids are keys of the caches stay alive
        self._methods: dict[str, Any] = {}
        self.functions: list[types.FunctionType] = []
        if isinstance(reference, type) and reference is not candidate:
            self.reference = reference
            self._methods = {name: value for name, value in vars(reference).items()
                             if isinstance(getattr(value, "__func__", value), types.FunctionType)}
            self.functions = [f for cls in reference.__mro__ if cls.__module__ == module.__name__
                              for f in _functions_of(cls)]
            for function in self.functions:
                for code in _code_objects(function.__code__):
                    self.codes[id(code)] = (code.co_qualname, function.__name__ == "__init__")
                    self._keep.append(code)
                    if function.__name__ != "__init__":
                        self.fingerprints.add(_fingerprint(code))
        self._seen: dict[int, str] = {}  # id(code) -> "" (unrelated) or "copy"
        self.armed = False
        self._own_change = False
        self.current = Observation()
        self._profiler = self._profile  # one bound method, so that ``sys.getprofile() is`` it can be asked
        self.after_import: list[str] = []  # tampering outside watched stretches
        global _GUARD
        _GUARD = self

    @property
    def active(self) -> bool:
        return self.reference is not None

    # -- watching ------------------------------------------------------------------------------
    def watch(self) -> Observation:
        """Start a watched stretch; returns the observation that ``stop()`` completes."""
        self.current = Observation(tampering=list(self.after_import))
        self.after_import.clear()
        self._check_class()
        if self.active:
            self._change(self._profiler)
        self.armed = True
        return self.current

    def stop(self) -> Observation:
        self.armed = False
        self._check_class()
        if self.active:
            if _get_profile() is not self._profiler:
                self.current.tampering.append("the harness's profiler was replaced during the call")
            self._change(None)
        return self.current

    def _check_class(self) -> None:
        """Attribute assignment on a class raises no audit event: compare its methods with the snapshot."""
        if self.reference is None:
            return
        for name, value in self._methods.items():
            if self.reference.__dict__.get(name) is not value:
                self.current.tampering.append(f"the candidate replaced {self.reference.__qualname__}.{name}, "
                                              "part of the reference Model")
                self._methods[name] = self.reference.__dict__.get(name)

    # -- timed calls -----------------------------------------------------------------------------
    def count_timed_calls(self) -> None:
        """Make every function running the reference's methods count its calls, at no cost otherwise.

        Timed calls cannot run under a profiler. Instead each function object whose code is one of
        the reference's (found through ``gc``: the class's own, references kept at import time,
        ``FunctionType`` copies) gets a trampoline as its ``__code__``: it counts, then calls a copy
        of the original. The function objects stay the same, so every reference to them sees it.
        Functions with a closure (``__code__`` must keep the number of free variables) are left as
        they are; a code object kept bare and made into a function after this point is not seen.
        """
        import gc

        if not self.active or hasattr(self, "timed_calls"):
            return  # counting already (timing run again): the trampolines keep counting into the same dict
        self.timed_calls: dict[str, int] = {}
        wanted = {code_id: name for code_id, (name, is_init) in self.codes.items() if not is_init}
        for holder in gc.get_objects():  # one pass: the device may be held while this runs
            if type(holder) is types.FunctionType and id(holder.__code__) in wanted and not holder.__closure__:
                self._trampoline(holder, wanted[id(holder.__code__)])

    def stop_counting(self) -> Observation:
        """What the timed calls ran of the reference (the trampolines stay: the process ends next)."""
        self.current = Observation(tampering=list(self.after_import))
        self.after_import.clear()
        self._check_class()
        self.current.reference_calls = [f"{name}, {count} calls"
                                        for name, count in getattr(self, "timed_calls", {}).items()]
        return self.current

    def _trampoline(self, function: types.FunctionType, name: str) -> None:
        original = types.FunctionType(function.__code__, function.__globals__, function.__name__,
                                      function.__defaults__)
        original.__kwdefaults__ = function.__kwdefaults__
        counts = self.timed_calls

        def counted(*args: Any, **kwargs: Any) -> Any:
            counts[name] = counts.get(name, 0) + 1
            return original(*args, **kwargs)

        key = f"__pikeh_reference_{id(function):x}"
        function.__globals__[key] = counted
        namespace: dict[str, Any] = {}
        exec(compile(f"def trampoline(*args, **kwargs):\n    return {key}(*args, **kwargs)\n",
                     "<pikeh reference guard>", "exec"), namespace)
        self._own_change = True
        try:
            function.__code__ = namespace["trampoline"].__code__
        finally:
            self._own_change = False

    def _change(self, function: Any) -> None:
        self._own_change = True
        try:
            _set_profile(function)
            _set_thread_profile(function)
        finally:
            self._own_change = False

    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        known = self.codes.get(id(code))  # ids are stable: every code in a cache is kept alive
        if known is not None:
            name, is_init = known
            if is_init:
                self.current.reference_inits += 1
            elif name not in self.current.reference_calls:
                self.current.reference_calls.append(name)
            return
        kind = self._seen.get(id(code))
        if kind is None:
            kind = "copy" if _fingerprint(code) in self.fingerprints else ""
            self._seen[id(code)] = kind
            self._keep.append(code)
        if kind and code.co_qualname not in self.current.copies:
            self.current.copies.append(code.co_qualname)

    def audit(self, event: str, args: tuple) -> None:
        if not self.active:
            return
        if event == "sys.setprofile" and self.armed and not self._own_change:
            self.current.tampering.append("the candidate called sys.setprofile during a checked call")
        elif event == "object.__setattr__" and not self._own_change and args \
                and any(args[0] is f for f in self.functions):
            what = f"{getattr(args[0], '__qualname__', '?')}.{args[1]}"
            target = self.current.tampering if self.armed else self.after_import
            target.append(f"the candidate assigned {what}, part of the reference Model")
