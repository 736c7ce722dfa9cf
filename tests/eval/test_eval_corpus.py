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
