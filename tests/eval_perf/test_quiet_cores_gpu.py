"""``--quiet-mode cores`` on a GPU: the timed process runs alone on its GPU's timing core while a
loading neighbour goes on (not stopped) on the other cores. Seen from inside both processes (their
affinity and clock, printed), against the engine's timing window."""

from __future__ import annotations

import re

import pytest
from perf_helpers import candidate, request

pytestmark = pytest.mark.gpu

SAY_CORES = "import os, time; print(f'cores {time.monotonic():.4f} {sorted(os.sched_getaffinity(0))}', flush=True)"
LOUD_IMPORT = """
import os
import time
_t0 = time.monotonic()
_runs = []  # [first, last, cores]: one per spell of samples on the same cores without a pause
while time.monotonic() - _t0 < 20.0:
    _now, _cores = time.monotonic(), sorted(os.sched_getaffinity(0))
    if _runs and _runs[-1][2] == _cores and _now - _runs[-1][1] < 0.1:
        _runs[-1][1] = _now
    else:
        _runs.append([_now, _now, _cores])
    time.sleep(0.02)
for _a, _b, _c in _runs:
    print(f"spell {_a:.4f} {_b:.4f} {_c}", flush=True)
"""
LINE = re.compile(r"cores (\d+\.\d+) \[([\d, ]*)\]")
SPELL = re.compile(r"spell (\d+\.\d+) (\d+\.\d+) \[([\d, ]*)\]")


def _cores(listed: str) -> set[int]:
    return {int(c) for c in listed.split(",") if c.strip()}


def _seen(tail: str) -> list[tuple[float, set[int]]]:
    return [(float(t), _cores(cores)) for t, cores in LINE.findall(tail)]


def _spells(tail: str) -> list[tuple[float, float, set[int]]]:
    """The neighbour's summary: it prints spells, not samples (a line per 20 ms sample overflowed the
    10,000-character output tail, so only the loop's last seconds were seen and the test skipped)."""
    return [(float(a), float(b), _cores(cores)) for a, b, cores in SPELL.findall(tail)]


@pytest.mark.timeout(600)
def test_the_timed_process_has_its_core_alone_and_nothing_is_stopped(tmp_path):
    from pikeh_local import LocalEvaluator

    from pike_harness.contracts.evaluation import EvaluatorOptions

    evaluator = LocalEvaluator(EvaluatorOptions(device="cuda:0", protocol="quick", workdir=tmp_path / "work",
                                                config=LocalEvaluator.Config(build_cache=str(tmp_path / "cache"), jobs=2,
                                                                             quiet_mode="cores")))
    try:
        engine = evaluator.engine
        if not engine.timing_cpus:
            pytest.skip("this host keeps no core for timing (fewer than 4 cores)")
        timed = evaluator.submit(request(candidate(forward_extra=SAY_CORES)))
        loud = evaluator.submit(request(candidate(prelude=LOUD_IMPORT)))
        result_t, result_l = timed.result(timeout=300), loud.result(timeout=300)
        assert result_t.category == "correct" and result_l.category == "correct", (result_t.reason, result_l.reason)
        trace = next(t for t in engine.traces if t.seq == min(t.seq for t in engine.traces))
        start, end = trace.timing_start, trace.timing_end
        reserved = set(engine.timing_cpus)
        during = [cores for t, cores in _seen(result_t.stdout_tail) if start < t < end]
        assert during and all(cores == reserved for cores in during), (reserved, during[:3])
        spells = _spells(result_l.stdout_tail)
        if not (spells and spells[0][0] < start and spells[-1][1] > end):
            pytest.skip("the loading neighbour's import did not span the timing window")
        inside = [cores for a, b, cores in spells if a < end and b > start]
        assert inside, "the neighbour was stopped during the timing (cores mode stops nothing)"
        assert all(not (cores & reserved) for cores in inside), ("the neighbour ran on the timing core", inside)
    finally:
        evaluator.close()
