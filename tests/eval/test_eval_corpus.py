"""The adversarial corpus on the CPU: every threat that a CPU can exercise, every category, and the
legitimate techniques that must pass. Each candidate ends in its expected category and check, no
secret reaches its result, and the evaluator is healthy afterwards."""

from __future__ import annotations

import pytest
from corpus_cases import cases, sandbox_leftovers

CASES = cases()


@pytest.mark.parametrize("name", [case.name for case in CASES])
def test_corpus_candidate_ends_in_its_category(name, corpus_results, secret_value):
    case, result = corpus_results[name]
    summary = f"{result.category}/{result.check}: {result.reason}\n{result.stderr_tail[-3000:]}"
    assert result.category == case.category, summary
    if case.check:
        assert result.check == case.check, summary
    for flag in case.flags:
        assert flag in result.flags, result.flags
    assert secret_value not in result.to_json()
    if result.category == "correct":
        assert result.runtime is not None and result.runtime_ms == result.runtime.headline_ms > 0
        assert result.runtime.n == 5 and len(result.outputs) == 3 and all(o.ok for o in result.outputs)
    else:
        assert result.runtime_ms is None


def test_every_category_and_threat_is_covered():
    categories = {case.category for case in CASES}
    assert categories == {"compile_error", "runtime_error", "timeout", "incorrect", "rejected", "correct"}
    threats = set()
    for case in CASES:
        first = case.source.splitlines()[0]
        if first.startswith("# threat: ") and first[10:12].strip().isdigit():
            threats.add(int(first[10:12]))
    # 1, 5, 15 need a GPU (tests/eval/test_gpu.py); 12 (cache warmth) and 17 (implausible speed) are
    # properties of the timing loop and the record, tested in test_timing.py.
    assert threats >= {2, 3, 4, 6, 7, 8, 9, 10, 11, 13, 14, 16}


def test_evaluator_is_healthy_after_the_corpus(corpus_results, cpu_evaluator):
    ok = next(case for case, _ in corpus_results.values() if case.name == "ok_plain")
    result = cpu_evaluator.evaluate(ok.request())
    assert result.category == "correct", result.reason
    assert sandbox_leftovers(cpu_evaluator.workdir, cpu_evaluator) == []
    scratch = cpu_evaluator.workdir / "scratch"
    idle = set(cpu_evaluator.engine.prestart.idle_scratch()) if cpu_evaluator.engine.prestart is not None else set()
    assert not scratch.exists() or [p for p in scratch.iterdir() if p not in idle] == []


def test_reasons_say_what_was_observed(corpus_results):
    """The verdicts PIKE's one-call check misses name the pattern and the measured differences."""
    reasons = {name: result.reason or "" for name, (_, result) in corpus_results.items()}
    assert reasons["stateful_calls"].startswith(
        "right on call 1, wrong on call 2 with the same input (state kept across calls): "
        "input set 0 (seed 0), output 0: max abs diff")
    assert reasons["stateful_instances"].startswith("right on the first instance, wrong on a second built in the "
                                                    "same process under the next weight seed (state shared between "
                                                    "instances, or code that holds only for the first one's weights)")
    assert reasons["seed_specialisation"].startswith("right on the public input set, wrong on 2 of 2 hidden ones")
    assert "max abs diff 0 on the public set" in reasons["seed_specialisation"]
    assert reasons["constant_output"].startswith("the same output for every input set")
    assert reasons["calls_reference"].startswith("input set 0 (public): the checked call ran the reference "
                                                 "Model's code (Model.forward)")
    assert "sys.setprofile" in reasons["calls_reference_profiler_off"]
    _, factory = corpus_results["ok_factory_model"]
    _, borrower = corpus_results["ok_borrows_reference"]
    assert factory.category == borrower.category == "correct" and "borrows_reference" in borrower.flags


def test_no_finalizer_of_the_candidate_runs_while_its_process_waits(corpus_results):
    """Between stages the process may wait beside another candidate's timing: its cyclic garbage is
    collected before each report and the collector stays off until the next command."""
    _, result = corpus_results["finalizer_while_waiting"]
    assert result.category == "correct", result.reason
    assert "FINALIZED_IN_STAGE" in result.stdout_tail  # the collector did run the finalizers, inside stages
    assert "FINALIZED_WHILE_WAITING" not in result.stdout_tail
