"""The evaluator's pure parts, in-process: static checks, output comparison, protocols, the
environment scrub, the timing loop's buffers, and the record format."""

from __future__ import annotations

import math

import pytest
import torch

from pike_harness.worker import redaction
from pike_harness.worker.inside.protocols import PROTOCOLS, get_protocol
from pike_harness.worker.inside.timing import OutputProblem, TimedLoop, output_tensors
from pike_harness.worker.records import EvalResult, OutputCheck, RuntimeStats
from pike_harness.worker.supervise import sandbox
from pike_harness.worker.supervise.compare import compare_outputs
from pike_harness.worker.supervise.static_checks import scan
from pike_harness.worker.supervise.supervisor import _cross_check

# -- static checks ---------------------------------------------------------------------------------

REFERENCE = "import torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n"


def test_inheriting_model_for_its_init_is_only_noted():
    source = REFERENCE + "class ModelNew(Model):\n    def forward(self, x):\n        return x * 1\n"
    report = scan(source)
    assert report.check is None
    assert "inherits_reference_model" in report.flags and "no_custom_kernel" in report.flags


def test_reference_calls_are_not_judged_from_the_source():
    """Building the reference in __init__ (to borrow weights) reads like a call: only run time can tell."""
    borrow = REFERENCE + ("class ModelNew(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                          "        self.w = Model()\n    def forward(self, x):\n        return x\n")
    assert scan(borrow).check is None


def test_fallback_to_pytorch_ops_is_not_a_reference_call():
    source = ("import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n"
              "        try:\n            return fast(x)\n        except Exception:\n            return torch.relu(x)\n")
    assert scan(source).check is None


@pytest.mark.parametrize(("snippet", "technique"), [
    ("from torch.utils.cpp_extension import load_inline", "load_inline"),
    ("import triton.language as tl", "triton"),
    ("import torch\nf = torch.compile(abs)", "torch.compile"),
    ("import torch\ng = torch.cuda.CUDAGraph()", "cuda_graph"),
])
def test_techniques_are_recognised(snippet, technique):
    report = scan(snippet + "\nclass ModelNew: pass\n")
    assert report.techniques == [technique] and "no_custom_kernel" not in report.flags


@pytest.mark.parametrize("snippet", [
    "import inspect\nf = inspect.currentframe().f_back",  # the red team's walk to the timed loop's answer
    "import sys\nf = sys._getframe(1).f_locals",
    "import sys\nt = sys._current_frames()",
    "def g(e):\n    return e.__traceback__.tb_frame.f_globals",
])
def test_frame_walks_are_flagged(snippet):
    assert "introspection" in scan(snippet + "\nclass ModelNew: pass\n").flags


def test_re_compile_is_not_torch_compile():
    assert scan("import re\nimport torch\nP = re.compile('x')\nclass ModelNew: pass\n").techniques == []


def test_syntax_errors_raise():
    with pytest.raises(SyntaxError):
        scan("class ModelNew(\n")


# -- comparison ------------------------------------------------------------------------------------

def _compare(candidate, reference, atol=1e-2, rtol=1e-2):
    return compare_outputs(candidate, reference, atol=atol, rtol=rtol,
                           set_labels=[f"set {i}" for i in range(len(reference))])


def test_matching_nan_and_inf_patterns_pass_and_diffs_are_recorded():
    ref = torch.tensor([1.0, float("nan"), float("inf"), -2.0])
    got = torch.tensor([1.001, float("nan"), float("inf"), -2.0])
    result = _compare([[got]], [[ref]])
    assert result.category is None and result.checks[0].ok
    assert result.checks[0].max_abs_diff == pytest.approx(1e-3, rel=1e-3)
    assert result.checks[0].max_rel_diff == pytest.approx(1e-3, rel=1e-3)


def test_differences_are_the_same_whether_or_not_some_elements_are_non_finite():
    """The finite-everywhere shortcut and the masked path measure the same maximum differences."""
    torch.manual_seed(3)
    want = torch.randn(64, 64)
    want[0, :5] = 0.0  # skipped by the relative difference
    got = want + 1e-3 * torch.randn(64, 64)
    expected_abs = float((got.double() - want.double()).abs().max())
    nonzero = want != 0
    expected_rel = float(((got.double() - want.double()).abs()[nonzero] / want.double().abs()[nonzero]).max())
    plain = _compare([[got]], [[want]]).checks[0]
    assert (plain.max_abs_diff, plain.max_rel_diff) == pytest.approx((expected_abs, expected_rel))
    # the same NaN in both, away from the largest differences: the finite part gives the same maxima
    spot = int((got - want).abs().flatten().argmin())
    want_nan, got_nan = want.clone().flatten(), got.clone().flatten()
    want_nan[spot] = got_nan[spot] = float("nan")
    masked = _compare([[got_nan.view(64, 64)]], [[want_nan.view(64, 64)]]).checks[0]
    assert masked.ok and (masked.max_abs_diff, masked.max_rel_diff) == pytest.approx((expected_abs, expected_rel))


def test_judge_measures_each_output_pair_once(monkeypatch):
    from pike_harness.worker.check_plan import check_plan
    from pike_harness.worker.supervise import checked_calls, compare

    calls = []
    real = compare._measure
    monkeypatch.setattr(compare, "_measure", lambda *a: calls.append(1) or real(*a))
    plan = check_plan(3)
    reference = [[torch.full((4,), float(call.set_index + 1))] for call in plan]
    candidate = [[t.clone() for t in outputs] for outputs in reference]
    verdict = checked_calls.judge(candidate, reference, plan, ["seed 0", "hidden seed", "hidden seed"],
                                  atol=1e-2, rtol=1e-2)
    assert verdict.category is None and len(calls) == len(plan)  # first-sight calls are not measured twice


@pytest.mark.parametrize("got", [
    torch.tensor([1.0, 0.0, float("inf"), -2.0]),  # a number where the reference has NaN
    torch.tensor([1.0, float("nan"), float("-inf"), -2.0]),  # the wrong infinity
    torch.tensor([float("inf"), float("nan"), float("inf"), -2.0]),  # inf where the reference is finite
])
def test_nonfinite_patterns_must_match(got):
    ref = torch.tensor([1.0, float("nan"), float("inf"), -2.0])
    result = _compare([[got]], [[ref]])
    assert (result.category, result.check) == ("incorrect", "nonfinite")


def test_output_count_shape_and_dtype():
    ref = [torch.ones(2, 3)]
    assert _compare([[torch.ones(2, 3), torch.ones(1)]], [ref]).check == "output_count"
    assert _compare([[torch.ones(3, 2)]], [ref]).check == "shape"
    assert _compare([[torch.ones(2, 3, dtype=torch.float64)]], [ref]).check == "dtype"


def test_constant_answer_on_a_vacuous_tolerance_is_rejected():
    refs = [[torch.randn(4, 4) * 1e-5] for _ in range(3)]
    zeros = [[torch.zeros(4, 4)] for _ in range(3)]
    result = _compare(zeros, refs)
    assert (result.category, result.check) == ("rejected", "constant_output")
    honest = _compare([[r[0].clone()] for r in refs], refs)
    assert honest.category is None and "tolerance_vacuous" in honest.flags


def test_constant_reference_allows_constant_answer():
    refs = [[torch.ones(3)] for _ in range(3)]
    assert _compare([[torch.ones(3)] for _ in range(3)], refs).category is None


def test_a_constant_answer_is_rejected_only_where_the_reference_moves_by_more_than_rounding():
    """Where the reference's output moves between input sets only by rounding of its size, an honest
    half-precision candidate returns the same output every time: flagged, not rejected. Where it moves
    by more (here 1 % of its size, still inside the tolerance), a constant answer is one."""
    base = torch.linspace(-0.2, 0.2, 16)
    rounding = [[base + 1e-9 * torch.randn(16)] for _ in range(3)]
    honest = _compare([[rounding[0][0].clone()] for _ in range(3)], rounding)
    assert honest.category is None and "reference_constant" in honest.flags
    moving = [[base + 0.002 * torch.randn(16)] for _ in range(3)]
    cheat = _compare([[moving[0][0].clone()] for _ in range(3)], moving)
    assert (cheat.category, cheat.check) == ("rejected", "constant_output")
    # the flag describes the task, not the candidate: a constant passes every set here (which is why the
    # rejection is needed), so the record says so (tests/eval/test_compare.py)
    assert "reference_constant" in cheat.flags


def test_the_same_infinity_in_every_set_is_no_change():
    """The same infinity in every set does not make the reference move (inf - inf is NaN, no change):
    a candidate returning that constant reference exactly is not rejected. The reference is constant,
    so a constant answer passes, and the result is flagged ``reference_constant`` (decided by the
    reference alone since the flag stopped depending on the candidate)."""
    inf = float("inf")
    steady = [[torch.tensor([inf, -inf, 0.5])] for _ in range(3)]
    result = _compare([[torch.tensor([inf, -inf, 0.5])] for _ in range(3)], steady)
    assert result.category is None and "reference_constant" in result.flags


def test_a_bitwise_constant_answer_on_efficientnet_b2_is_no_constant_answer():
    """Level3-pike 24's reference (EfficientNetB2, the seeded weights) returns its classifier's bias to
    3e-7 of its size whatever the input; PIKE-B's published solution was rejected by the comparison in
    5 of 19 runs (a bitwise-constant answer, as the hidden sets fell). The real reference's outputs on
    three seeds, against a candidate that returns the first set's answer three times."""
    from pathlib import Path

    from pike_harness.worker.inside.loading import (
        build_model,
        init_inputs,
        load_source,
        make_inputs,
        model_class,
    )

    path = Path(__file__).resolve().parents[2] / "tasks" / "level3-pike" / "24_EfficientNetB2.py"
    module = load_source(path.read_text(encoding="utf-8"), "pikeh_test_efficientnet_b2")
    model = build_model(model_class(module, ("Model",)), init_inputs(module), weight_seed=1, device="cpu")
    with torch.no_grad():
        refs = [[model(*make_inputs(module, seed))] for seed in (0, 1, 2)]
    result = _compare([[refs[0][0].clone()] for _ in range(3)], refs)
    assert result.category is None and "reference_constant" in result.flags


# -- protocols -------------------------------------------------------------------------------------

def test_pike_protocol_is_do_bench_shaped():
    pike = PROTOCOLS["pike"]
    assert (pike.name, pike.version, pike.statistic, pike.warmup_ms, pike.rep_ms, pike.flush_mb) == \
        ("pike", 2, "mean", 1000, 5000, 256)
    # do_bench's structure: no synchronize between the flush and the start event, no flush in warm-up
    assert (pike.window, pike.warmup_flush) == ("do_bench", False)
    assert pike.plan(0.5) == (2000, 10000)
    assert pike.plan(10_000.0) == (1, 1)


def test_protocol_window_is_a_checked_parameter():
    assert get_protocol("robust", {"window": "strict"}).window == "strict"
    assert PROTOCOLS["robust"].window == "do_bench" and PROTOCOLS["robust"].warmup_flush
    with pytest.raises(KeyError, match="window"):
        get_protocol("pike", {"window": "eventually"})


def test_robust_protocol_bounds_and_statistics():
    robust = PROTOCOLS["robust"]
    assert robust.plan(0.0001)[1] == 10_000 and robust.plan(500.0) == (3, 10)
    stats = robust.summarize([1.0, 2.0, 3.0, 4.0, 100.0], host_wall_ms=120.0)
    assert stats.headline_ms == stats.median_ms == 3.0 and stats.mean_ms == 22.0
    assert stats.min_ms == 1.0 and stats.max_ms == 100.0 and stats.n == 5 and stats.iqr_ms == 2.0
    assert stats.cv == pytest.approx(stats.stdev_ms / 22.0) and stats.host_wall_ms == 120.0
    assert math.isclose(PROTOCOLS["pike"].summarize([1.0, 3.0], 5.0).headline_ms, 2.0)


def test_protocol_parameters_and_unknown_names():
    assert get_protocol("robust", {"rep_ms": 10}).rep_ms == 10
    with pytest.raises(KeyError):
        get_protocol("fastest")
    with pytest.raises(KeyError):
        get_protocol("pike", {"statistic": "min"})


def test_cross_check_against_the_host_and_supervisor_clocks():
    assert _cross_check([1.0] * 10, [1.05] * 10, wall_ms=100.0, cuda=True) is None
    assert "supervisor" in _cross_check([1.0] * 10, [50.0] * 10, wall_ms=100.0, cuda=False)
    assert "CUDA events" in _cross_check([0.01] * 10, [2.0] * 10, wall_ms=100.0, cuda=True)


# -- the timing loop (in this process, on the CPU) -------------------------------------------------

class Recorder(torch.nn.Module):
    """Records what each call saw: input pointer, which set's data, and whether the flush ran."""

    def __init__(self):
        super().__init__()
        self.calls = []
        self.loop = None

    def forward(self, x):
        flushed = bool((self.loop.flush_buffer == 0).all())
        self.loop.flush_buffer.fill_(7)  # "warm" data the next call must not find
        self.calls.append((x.data_ptr(), float(x[0, 0]), flushed))
        return x * 2


def test_timed_loop_rotates_sets_through_one_buffer_and_flushes_before_every_call(monkeypatch):
    from pike_harness.worker.inside import timing

    monkeypatch.setattr(timing, "KERNEL_AUDITS", 0)  # no checked calls among the timed ones: the rotation alone
    sets = [[torch.full((4, 4), float(i))] for i in range(3)]
    model = Recorder()
    loop = TimedLoop(model, sets, [[s[0] * 2] for s in sets], device=torch.device("cpu"),
                     protocol=get_protocol("quick"), atol=1e-3, rtol=1e-3)
    model.loop = loop
    run = loop.run()
    assert run.reps == 5 and len(run.samples_ms) == 5 and run.mismatches == [0, 0, 0]
    pointers = {pointer for pointer, _, _ in model.calls}
    assert len(pointers) == 1  # same buffer every call...
    assert [value for _, value, _ in model.calls[-5:]] == [0.0, 1.0, 2.0, 0.0, 1.0]  # ...rotating contents
    assert all(flushed for _, _, flushed in model.calls)


def test_timed_loop_counts_outputs_that_differ_from_the_validated_ones():
    sets = [[torch.full((4,), float(i))] for i in range(2)]
    replay = sets[0][0] * 2
    loop = TimedLoop(lambda x: replay.clone(), sets, [[s[0] * 2] for s in sets], device=torch.device("cpu"),
                     protocol=get_protocol("quick"), atol=1e-3, rtol=1e-3)
    run = loop.run()
    assert run.mismatches[0] == 0 and run.mismatches[1] > 0


def test_timed_loop_holds_integer_outputs_to_their_validated_values_exactly():
    """An index off by one is within atol + rtol * |value| for values of 100 and more; the reference
    process compares integers exactly (``compare``), and so does the loop."""
    sets = [[torch.full((4,), 300.0 + i)] for i in range(2)]
    validated = [[s[0].long()] for s in sets]
    calls = []

    def forward(x):
        calls.append(1)
        return x.long() + (1 if len(calls) > 3 else 0)

    loop = TimedLoop(forward, sets, validated, device=torch.device("cpu"), protocol=get_protocol("quick"),
                     atol=1e-2, rtol=1e-2)
    assert sum(loop.run().mismatches) > 0


def test_output_tensors_refuses_subclasses_and_wrong_devices():
    class Sub(torch.Tensor):
        pass

    with pytest.raises(OutputProblem) as info:
        output_tensors(torch.ones(2).as_subclass(Sub), torch.device("cpu"))
    assert info.value.check == "output_type"
    with pytest.raises(OutputProblem) as info:
        output_tensors(torch.ones(2, device="meta"), torch.device("cpu"))
    assert info.value.check == "output_device"
    assert len(output_tensors((torch.ones(1), torch.zeros(2)), torch.device("cpu"))) == 2


# -- sandbox environment and records ---------------------------------------------------------------

def test_scrubbed_environment_keeps_toolchain_and_drops_secrets():
    source = {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/cuda/lib", "CUDA_HOME": "/cuda", "HOME": "/root",
              "OPENAI_API_KEY": "sk-1", "HF_TOKEN": "hf-2", "CUDA_SECRET": "x", "AWS_ACCESS_KEY_ID": "a",
              "DATABASE_PASSWORD": "p", "GITHUB_TOKEN": "g", "MY_RANDOM_VAR": "v", "TRITON_CACHE_DIR": "/t"}
    env = sandbox.scrubbed_environment(source, {"HOME": "/scratch"})
    assert env == {"PATH": "/usr/bin", "LD_LIBRARY_PATH": "/cuda/lib", "CUDA_HOME": "/cuda", "HOME": "/scratch",
                   "TRITON_CACHE_DIR": "/t"}


def test_secret_values_are_masked():
    secrets = redaction.secret_values({"ANTHROPIC_API_KEY": "sk-ant-123456", "PATH": "/usr/bin", "SHORT_TOKEN": "ab"})
    assert sorted(secrets) == ["c2stYW50LTEyMzQ1Ng", "sk-ant-123456"]  # and its base64 form; "ab" is too short
    assert redaction.mask_secrets("key=sk-ant-123456!", secrets) == "key=[masked]!"


def test_result_record_round_trips_through_json():
    stats = RuntimeStats(headline_ms=1.0, statistic="median", mean_ms=1.1, median_ms=1.0, min_ms=0.9,
                         max_ms=1.5, stdev_ms=0.1, cv=0.09, iqr_ms=0.2, n=10, host_wall_ms=12.0)
    result = EvalResult(request_id="r", task="smoke/1", category="correct", runtime_ms=1.0, runtime=stats,
                        outputs=[OutputCheck(input_set=0, index=0, shape=[2], dtype="float32", ok=True)],
                        flags=["no_custom_kernel"], seeds={"hidden": [5]})
    again = EvalResult.from_json(result.to_json())
    assert again == result


def test_implausible_runtimes_are_flagged(tmp_path):
    from pike_harness.worker.records import EvalRequest
    from pike_harness.worker.supervise.reference import ReferenceOracle
    from pike_harness.worker.supervise.supervisor import Evaluation, WorkerSettings

    request = EvalRequest(task="t", reference_source="", candidate_source="", device="cuda:0")
    oracle = ReferenceOracle("cuda:0", tmp_path)  # its process starts on first use: never, here
    evaluation = Evaluation(request, oracle=oracle, settings=WorkerSettings(workdir=tmp_path))
    evaluation.environment["gpu"] = "NVIDIA H100 80GB HBM3"
    written = 1024 * 1024 * 4  # the reference's first output set, 4 MB: at least 1.25 us at 3.35 TB/s
    evaluation._plausibility(0.0005, written)
    assert evaluation.flags == ["below_timer_floor", "faster_than_memory_bound"]
    evaluation.flags.clear()
    evaluation._plausibility(0.01, written)
    assert evaluation.flags == []


def test_cuda_index_maps_through_the_harness_own_visible_devices():
    """Under Slurm's CUDA_VISIBLE_DEVICES=3,5, torch's cuda:0 is GPU 3: a candidate must get 3."""
    from pike_harness.worker.supervise.spawn import visible_devices

    slurm = {"CUDA_VISIBLE_DEVICES": "3,5"}
    assert visible_devices("cuda:0", slurm) == "3" and visible_devices("cuda:1", slurm) == "5"
    assert visible_devices("cuda", slurm) == "3"
    assert visible_devices("cuda:1", {"CUDA_VISIBLE_DEVICES": "GPU-aa, GPU-bb"}) == "GPU-bb"
    assert visible_devices("cuda:1", {}) == "1" and visible_devices("cuda:1", {"CUDA_VISIBLE_DEVICES": ""}) == "1"
    assert visible_devices("cpu", slurm) == ""


# -- the reference guard (in process: the same code the candidate's process runs) ---------------------

GUARDED = '''
import sys, types
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n, bias=False)

    def forward(self, x):
        return torch.relu(self.linear(x))


_saved = Model.forward  # taken at import, before any hook exists
_code_copy = types.FunctionType(Model.forward.__code__, globals(), "kernel")
exec(compile("""
class Renamed(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.linear = nn.Linear(n, n, bias=False)

    def forward(self, x):
        return torch.relu(self.linear(x))
""", "<copy>", "exec"))


class ModelNew(nn.Module):
    def __init__(self, n):
        super().__init__()
        original = Model(n)
        self.weight = nn.Parameter(original.linear.weight.detach().clone())
        self.inner = original
        self.renamed = Renamed(n)

    def forward(self, x, how="own"):
        if how == "module":
            return self.inner(x)
        if how == "base":
            return Model.forward(self.inner, x)
        if how == "saved":
            return _saved(self.inner, x)
        if how == "code_copy":
            return _code_copy(self.inner, x)
        if how == "renamed":
            return self.renamed(x)
        if how == "profiler_off":
            list(map(sys.setprofile, [None]))
            return x
        return torch.relu(x @ self.weight.t())
'''


@pytest.fixture
def guarded(tmp_path):
    from pike_harness.worker.inside import loading, reference_guard

    module = loading.load_source(GUARDED, f"pikeh_guard_test_{tmp_path.name}")
    guard = reference_guard.ReferenceGuard(module, module.ModelNew)
    yield module, guard
    reference_guard._GUARD = None


def test_guard_sees_the_reference_built_in_init_but_not_called():
    from pike_harness.worker.inside import loading, reference_guard

    module = loading.load_source(GUARDED, "pikeh_guard_test_init")
    guard = reference_guard.ReferenceGuard(module, module.ModelNew)
    try:
        guard.watch()
        model = module.ModelNew(4)
        built = guard.stop()
        assert built.reference_inits == 1 and not built.reference_calls and not built.tampering
        guard.watch()
        model(torch.ones(2, 4))
        own = guard.stop()
        assert not own.reference_calls and not own.copies and not own.tampering
    finally:
        reference_guard._GUARD = None


@pytest.mark.parametrize("how", ["module", "base", "saved", "code_copy"])
def test_guard_sees_every_way_to_run_the_reference_code(guarded, how):
    module, guard = guarded
    model = module.ModelNew(4)
    guard.watch()
    model(torch.ones(2, 4), how=how)
    seen = guard.stop()
    assert seen.reference_calls == ["Model.forward"] and not seen.tampering


def test_guard_flags_a_renamed_copy_without_rejecting_it(guarded):
    module, guard = guarded
    model = module.ModelNew(4)
    guard.watch()
    model(torch.ones(2, 4), how="renamed")
    seen = guard.stop()
    assert not seen.reference_calls and seen.copies == ["Renamed.forward"]


def test_guard_reports_a_profiler_switched_off_and_a_swapped_forward(guarded):
    module, guard = guarded
    model = module.ModelNew(4)
    guard.watch()
    model(torch.ones(2, 4), how="profiler_off")
    seen = guard.stop()
    assert any("sys.setprofile" in text for text in seen.tampering)
    module.Model.forward = lambda self, x: x  # between calls: reported in the next watched stretch
    assert "Model.forward" in guard.watch().tampering[0]
    guard.stop()


def test_guard_is_inactive_when_the_file_has_no_separate_reference():
    from pike_harness.worker.inside import loading, reference_guard

    module = loading.load_source("import torch.nn as nn\nclass Model(nn.Module):\n    pass\n", "pikeh_guard_test_own")
    try:
        assert not reference_guard.ReferenceGuard(module, module.Model).active
    finally:
        reference_guard._GUARD = None


# -- verdict reasons for the checked calls ------------------------------------------------------------

def _judge(candidate_values):
    from pike_harness.worker.check_plan import check_plan
    from pike_harness.worker.supervise.checked_calls import judge

    plan = check_plan(3)
    reference = [[torch.full((4,), float(call.set_index + 1))] for call in plan]
    candidate = [[torch.full((4,), value)] for value in candidate_values]
    return judge(candidate, reference, plan, ["seed 0", "hidden seed", "hidden seed"], atol=1e-2, rtol=1e-2)


def test_reasons_say_what_was_observed():
    # plan: set 0, set 0 again, set 1, set 2, set 0 on a second instance
    ok = _judge([1.0, 1.0, 2.0, 3.0, 1.0])
    assert ok.category is None and len(ok.checks) == 3
    calls = _judge([1.0, 1.5, 2.0, 3.0, 1.0])
    assert (calls.category, calls.check) == ("incorrect", "state_across_calls")
    assert calls.reason.startswith("right on call 1, wrong on call 2 with the same input (state kept across calls)")
    assert "max abs diff 0.5" in calls.reason and "max abs diff 0 on call 1" in calls.reason
    hidden = _judge([1.0, 1.0, 2.0, 3.5, 1.0])
    assert (hidden.check, hidden.reason.split(":")[0]) == ("hidden_input",
                                                           "right on the public input set, wrong on 1 of 2 hidden ones")
    assert "input set 2 (hidden seed)" in hidden.reason
    second = _judge([1.0, 1.0, 2.0, 3.0, 1.25])
    assert second.check == "state_across_instances"
    assert second.reason.startswith("right on the first instance, wrong on a second") and "0.25" in second.reason
    first = _judge([9.0, 1.0, 2.0, 3.0, 1.0])
    assert first.check == "allclose" and first.reason.startswith("input set 0 (seed 0)")
    constant = _judge([1.0, 1.0, 1.0, 1.0, 1.0])
    assert constant.check == "hidden_input"  # outside the tolerance: wrong, not merely constant


def test_guard_counts_timed_calls_through_every_holder_of_the_reference_code(guarded):
    module, guard = guarded
    model = module.ModelNew(4)
    guard.count_timed_calls()
    x = torch.ones(2, 4)
    want = torch.relu(model.inner.linear(x))
    for how in ("own", "module", "saved", "code_copy", "base"):
        assert torch.equal(model(x, how=how), want)
    seen = guard.stop_counting()
    assert seen.reference_calls == ["Model.forward, 4 calls"] and not seen.tampering


def test_sampled_sets_accept_only_distinct_increasing_set_numbers():
    from pike_harness.worker.supervise.timed_outputs import sampled_sets

    assert sampled_sets([0, 1, 2], 3) == [0, 1, 2] and sampled_sets([2], 3) == [2] and sampled_sets([], 3) == []
    for forged in ([0, 0], [1, 0], [3], [-1], [True], [0.0], "012", None, [0, 1, 2, 3]):
        assert sampled_sets(forged, 3) is None, forged
