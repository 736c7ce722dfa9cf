"""A candidate paused by quiet timing (a neighbour is being timed) is not charged for the pause: on one
busy GPU, timings take most of the wall clock, and a compile stage that counted them would time out."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perf_helpers import PLAIN, smoke  # noqa: E402

from pike_harness.contracts.model import Limits  # noqa: E402
from pike_harness.worker.supervise import sandbox  # noqa: E402

# The load itself must fit the limit on a loaded 2-core runner (torch's import in the sandbox took
# more than 6 s there, so 25 s leaves it room), and the pause must be longer than the limit.
PAUSE_S = 28.0
COMPILE_LIMIT_S = 25.0  # shorter than the pause: only a deadline that excludes the pause can be met


def test_a_pause_longer_than_the_stage_limit_is_not_a_timeout(make_local):
    evaluator = make_local(prestart=0, jobs=1)
    limits = Limits(compile_timeout_s=COMPILE_LIMIT_S, run_timeout_s=60, memory_mb=6000)
    future = evaluator.submit(smoke(1).eval_request(PLAIN, limits=limits))
    registry = evaluator.engine.quiet
    deadline = time.monotonic() + 300  # a loaded runner can be slow to start it; the wait ends when it has
    while not registry._members and time.monotonic() < deadline:  # the candidate's process has started
        time.sleep(0.01)
    assert registry._members, "the candidate never started"
    token = next(iter(registry._members))
    # Registering waits at most 2 s for the exec to finish; until then the marker cannot be read and the
    # quiet window would pass the process by (a pause of 0). Wait for it as the registry would.
    member = registry._members[token]
    while not sandbox.has_marker(member.pid, member.marker) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sandbox.has_marker(member.pid, member.marker), "the candidate's exec never finished"
    with registry.quiet("cpu", exempt_pid=None):  # as if a neighbour were being timed
        slept_from = time.monotonic()
        time.sleep(PAUSE_S)
        slept_to = time.monotonic()
    result = future.result(timeout=120)
    assert result.category == "correct", result.reason
    # The member's pause runs from its stop (before the block is entered) to its resume (after it is
    # left), so it covers the sleep however slow the stop or the resume was.
    assert registry.paused_seconds(token) >= slept_to - slept_from, "the pause was measured"
