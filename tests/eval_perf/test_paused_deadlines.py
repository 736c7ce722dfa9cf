"""A candidate paused by quiet timing (a neighbour is being timed) is not charged for the pause: on one
busy GPU, timings take most of the wall clock, and a compile stage that counted them would time out."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perf_helpers import PLAIN, smoke  # noqa: E402

from pike_harness.contracts.model import Limits  # noqa: E402

# The load itself must fit the limit on a loaded 2-core runner (torch's import in the sandbox took
# more than 6 s there), and the pause must be longer than the limit.
PAUSE_S = 14.0
COMPILE_LIMIT_S = 12.0  # shorter than the pause: only a deadline that excludes the pause can be met


def test_a_pause_longer_than_the_stage_limit_is_not_a_timeout(make_local):
    evaluator = make_local(prestart=0, jobs=1)
    limits = Limits(compile_timeout_s=COMPILE_LIMIT_S, run_timeout_s=60, memory_mb=6000)
    future = evaluator.submit(smoke(1).eval_request(PLAIN, limits=limits))
    registry = evaluator.engine.quiet
    deadline = time.monotonic() + 30
    while not registry._members and time.monotonic() < deadline:  # the candidate's process has started
        time.sleep(0.01)
    assert registry._members, "the candidate never started"
    token = next(iter(registry._members))
    with registry.quiet("cpu", exempt_pid=None):  # as if a neighbour were being timed
        time.sleep(PAUSE_S)
    result = future.result(timeout=120)
    assert result.category == "correct", result.reason
    assert registry.paused_seconds(token) >= PAUSE_S - 0.5, "the pause was measured"
