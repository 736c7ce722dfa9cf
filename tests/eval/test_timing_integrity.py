"""What a candidate running inside the timed loop's process may not leave behind or reach: a torch mode or
a trace hook that sees the harness's own work, the harness's copy of the answer, the loop's own state and
the harness's classes (``inside/timing.py``'s validation step, ``inside/trusted.py``). The corpus plays
each from a real candidate (``function_mode_*``, ``dispatch_mode_lies``, ``settrace_prewindow``,
``stack_reads_validated``, ``patch_timed_loop_class``); here the same checks meet calls made during the
timed loop itself, where a candidate that waits until then would act."""

from __future__ import annotations

import sys

import pytest
import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from pike_harness.worker.inside import reference_guard, timing
from pike_harness.worker.inside import trusted as T
from pike_harness.worker.inside.protocols import get_protocol
from pike_harness.worker.inside.timing import OutputProblem, TimedLoop


class _Seeing(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class _SeeingATen(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


def _loop(forward):
    sets = [[torch.full((4, 4), float(i))] for i in range(3)]
    return TimedLoop(forward, sets, [[s[0] * 2] for s in sets], device=torch.device("cpu"),
                     protocol=get_protocol("quick"), atol=1e-3, rtol=1e-3)


def _problem(loop) -> OutputProblem:
    with pytest.raises(OutputProblem) as info:
        loop.run()
    return info.value


@pytest.mark.parametrize("mode", [_Seeing, _SeeingATen])
def test_a_mode_a_timed_call_leaves_on_the_stack_is_torch_mode(mode):
    calls, entered = [], []

    def forward(x):
        calls.append(1)
        if len(calls) == 3:  # a warm-up call, after the first checks passed
            entered.append(mode())
            entered[0].__enter__()  # never exited
        return x * 2

    try:
        problem = _problem(_loop(forward))
    finally:
        for left in entered:  # leave this test process as it was
            left.__exit__(None, None, None)
    assert T.active_modes() == []
    assert problem.check == "torch_mode" and mode.__name__ in str(problem)
    assert len(calls) == 3  # caught by that call's own validation step


def test_modes_entered_and_exited_inside_a_call_are_legitimate():
    def forward(x):
        with _Seeing(), _SeeingATen():
            return x * 2

    run = _loop(forward).run()
    assert run.mismatches == [0, 0, 0] and len(run.samples_ms) == 5


def test_torch_set_default_device_is_not_a_mode_of_the_candidates():
    torch.set_default_device("cpu")
    try:
        assert T.active_modes() == []
        run = _loop(lambda x: x * 2).run()
    finally:
        torch.set_default_device(None)
    assert run.mismatches == [0, 0, 0]


def test_a_trace_function_set_by_a_timed_call_is_trace_hook():
    def trace(frame, event, arg):
        return None

    def forward(x):
        sys.settrace(trace)
        return x * 2

    try:
        problem = _problem(_loop(forward))
    finally:
        sys.settrace(None)
    assert problem.check == "trace_hook" and "sys.settrace" in str(problem)


def test_the_audit_hook_counts_hook_setting_calls_by_anyone_but_the_guard():
    before = reference_guard.hook_calls()
    sys.setprofile(None)
    list(map(sys.settrace, [None]))  # through a C call: no Python frame of the caller to see
    after = reference_guard.hook_calls()
    assert after.get("sys.setprofile", 0) == before.get("sys.setprofile", 0) + 1
    assert after.get("sys.settrace", 0) == before.get("sys.settrace", 0) + 1


def test_returning_the_harness_copy_of_the_answer_is_harness_access():
    holder = {}

    def forward(x):
        loop = holder["loop"]
        index = next(i for i, s in enumerate(loop.sources) if torch.equal(s[0], x))
        return loop.validated[index][0][:]  # a view of the harness's own tensor: no work at all

    holder["loop"] = loop = _loop(forward)
    problem = _problem(loop)
    assert problem.check == "harness_access" and "own copy" in str(problem)


def test_writing_the_answer_into_the_harness_copy_is_harness_access():
    holder = {}

    def forward(x):
        out = torch.zeros_like(x)
        for outputs in holder["loop"].validated:
            outputs[0].copy_(out)  # make every "expected" output match garbage
        return out

    holder["loop"] = loop = _loop(forward)
    problem = _problem(loop)
    assert problem.check == "harness_access" and "wrote into" in str(problem)


@pytest.mark.parametrize("change", ["tolerance", "method"])
def test_a_timed_call_that_changes_the_loop_state_is_harness_access(change):
    holder = {}

    def forward(x):
        loop = holder["loop"]
        if change == "tolerance":
            loop.atol = float("inf")  # every garbage output "close"
        else:
            real = TimedLoop._call
            loop._call = lambda index, state, flush=True: real(loop, index, state, flush=flush)
        return torch.zeros_like(x)

    holder["loop"] = loop = _loop(forward)
    problem = _problem(loop)
    assert problem.check == "harness_access" and "state" in str(problem)


def test_the_snapshot_of_the_harness_sees_its_classes_builtins_and_modules_replaced():
    snapshot = T.watch_harness([])
    assert T.changed(snapshot) == []
    real_call, real_any = TimedLoop._call, __builtins__["any"] if isinstance(__builtins__, dict) else any
    import builtins

    try:
        TimedLoop._call = lambda self, index, state, flush=True: real_call(self, index, state, flush=flush)
        moved = T.changed(snapshot)
        assert moved == ["pike_harness.worker.inside.timing.TimedLoop._call"]
        assert T.check_name(moved) == "patched_timer"
    finally:
        TimedLoop._call = real_call
    try:
        builtins.any = lambda values: False
        assert T.changed(snapshot) == ["builtins.any"] and T.check_name(["builtins.any"]) == "patched_function"
    finally:
        builtins.any = real_any
    try:
        timing.range = lambda n: range(1)  # shadows the builtin for the loop's own module
        assert T.changed(snapshot) == ["pike_harness.worker.inside.timing.range (added)"]
    finally:
        del timing.range
    try:
        sys.modules["pike_harness.worker.inside.timing"] = type(sys)("fake")
        assert T.changed(snapshot) == ["sys.modules['pike_harness.worker.inside.timing']"]
    finally:
        sys.modules["pike_harness.worker.inside.timing"] = timing
    defaults = TimedLoop._call.__kwdefaults__
    try:
        TimedLoop._call.__kwdefaults__ = {"flush": False}  # the same function, other defaults
        assert T.changed(snapshot) == ["pike_harness.worker.inside.timing.TimedLoop._call"]
    finally:
        TimedLoop._call.__kwdefaults__ = defaults
    assert T.changed(snapshot) == []


def test_timed_samples_keep_one_timed_call_per_set_drawn_after_it_returned(monkeypatch):
    """Every timed call (never a warm-up one) is offered; call k of a set replaces the kept one when the
    draw is 0 modulo k, so each call is kept with probability 1/k: uniform over the set's calls."""
    draws = iter(range(1000))  # 0, 1, 2, ...: call k of a set is kept when the running draw % k == 0
    monkeypatch.setattr(T, "urandom", lambda n: next(draws).to_bytes(n, "little"))
    returned: list[torch.Tensor] = []

    def forward(x):
        out = x * 2
        returned.append(out)
        return out

    samples = timing.TimedSamples(3)
    loop = _loop(forward)
    loop.samples = samples
    run = loop.run()
    assert samples.seen == [len(range(s, run.reps, 3)) for s in range(3)]  # the timed calls, by set
    drawn = samples.drawn()
    assert [index for index, _ in drawn] == [0, 1, 2]
    for index, (kept,) in ((i, k) for i, k in drawn):
        assert torch.equal(kept, torch.full((4, 4), 2.0 * index))  # each set's value: its timed outputs'
        assert all(kept is not out for out in returned)  # a clone, not one of them


def test_timed_samples_are_clones_taken_at_return_not_the_static_buffer():
    """A candidate that returns one buffer and overwrites it on the next call (a CUDA graph's static
    output): the kept outputs are what each drawn call returned."""
    buffer = torch.zeros(4, 4)

    def forward(x):
        buffer.copy_(x * 2)
        return buffer

    samples = timing.TimedSamples(3)
    loop = _loop(forward)
    loop.samples = samples
    loop.run()
    for index, (kept,) in samples.drawn():
        assert torch.equal(kept, torch.full((4, 4), 2.0 * index))


def test_checked_calls_are_extra_calls_whose_times_are_dropped(monkeypatch):
    """The kernel checks before a call (0.4 ms of host work) slow the call after them, so the calls they
    guard are extra ones, drawn among the timed calls' slots: the samples are the planned repetitions,
    none checked, and a fresh call is never one (its time is compared with the unchecked timed calls)."""
    checked: list[int] = []
    calls: list[int] = []
    monkeypatch.setattr(T, "patched_kernels", lambda before_clock=False: checked.append(len(calls)) or [])

    def forward(x):
        calls.append(1)
        return x * 2

    loop = _loop(forward)
    run = loop.run()
    extra = timing.checked_calls(run.reps)
    assert len(run.samples_ms) == len(run.host_ms) == run.reps
    assert len(checked) == 1 + extra  # the run's first call, and the extra ones
    assert len(calls) == 1 + loop.protocol.estimate_calls + run.warmup + run.reps + extra
