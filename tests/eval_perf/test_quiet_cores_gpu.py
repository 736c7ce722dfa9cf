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
while time.monotonic() - _t0 < 20.0:
    print(f"cores {time.monotonic():.4f} {sorted(os.sched_getaffinity(0))}", flush=True)
    time.sleep(0.02)
"""
LINE = re.compile(r"cores (\d+\.\d+) \[([\d, ]*)\]")


def _seen(tail: str) -> list[tuple[float, set[int]]]:
    return [(float(t), {int(c) for c in cores.split(",") if c.strip()}) for t, cores in LINE.findall(tail)]


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
        neighbour = _seen(result_l.stdout_tail)
        if not (neighbour and neighbour[0][0] < start and neighbour[-1][0] > end):
            pytest.skip("the loading neighbour's import did not span the timing window")
        inside = [cores for t, cores in neighbour if start < t < end]
        assert inside, "the neighbour was stopped during the timing (cores mode stops nothing)"
        assert all(not (cores & reserved) for cores in inside), "the neighbour ran on the timing core"
    finally:
        evaluator.close()
