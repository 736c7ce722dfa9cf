"""The local evaluator's scheduling, end to end on the CPU with real candidate processes.

Timestamps come from the scheduler's traces and from the candidates themselves (``time.monotonic``
is one clock for every process on the host), so each test checks an ordering, not a duration.
"""

from __future__ import annotations

import contextlib
import re
import sys
import time
from pathlib import Path

import pytest
from perf_helpers import candidate, request

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))
from corpus_cases import sandbox_leftovers  # noqa: E402

from pike_harness.worker.supervise.buildcache import jit_cache_key

SLOW_FORWARD = "import time; time.sleep(0.5)"


def _overlaps(a, b) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_a_loaded_candidate_frees_its_slot_and_the_device_passes_straight_to_the_oldest_ready(make_local):
    """One CPU slot. X holds the device for seconds (slow forward); Y loads and waits for the device;
    Z can only load meanwhile because Y gave the slot back. Timings never overlap, and each release
    hands the device to the next ready candidate at once."""
    # (quiet timing off: it would pause Y's loading during X's timing, which is not what this tests)
    evaluator = make_local(jobs=1, max_ready=4, prestart=2, quiet_timing=False)  # X and Y pre-started
    assert evaluator.engine.prestart.wait_full(timeout=180)
    x = evaluator.submit(request(candidate(forward_extra=SLOW_FORWARD)))
    y = evaluator.submit(request(candidate()))
    z = evaluator.submit(request(candidate(prelude="import time\ntime.sleep(0.5)\n")))
    results = [f.result(timeout=300) for f in (x, y, z)]
    assert [r.category for r in results] == ["correct"] * 3, [r.reason for r in results]
    traces = {t.seq: t for t in evaluator.engine.traces[-3:]}
    tx, ty, tz = (traces[min(traces) + i] for i in range(3))
    assert tz.load_start < tx.released, "Z could not load while Y waited: Y kept its CPU slot"
    assert ty.loaded < tx.released  # Y was ready while X still held the device...
    assert ty.granted >= tx.released  # ...and got it only after X released it
    windows = [(t.granted, t.released) for t in (tx, ty, tz)]
    for i, first in enumerate(windows):
        for second in windows[i + 1:]:
            assert not _overlaps(first, second), "two candidates held the device at once"
    gate = evaluator.engine.gates["cpu"].stats
    # The orderings above are the test; this gap is Y's wake-up plus a /proc police pass between its
    # polls, which a loaded 2-core runner can stretch past a second. The bound only catches a device
    # left idle for something slow (a process exit, another candidate's load), never the wake-up.
    assert gate.max_idle_with_waiters_s < 10.0, gate
    assert evaluator.stats()["devices"]["cpu"]["busy_fraction"] > 0


def test_loads_run_in_parallel_on_cpu_slots(make_local):
    evaluator = make_local(jobs=2, prestart=2, shared=True)
    slow_import = candidate(prelude="import time\ntime.sleep(1.5)\n")
    futures = [evaluator.submit(request(slow_import)) for _ in range(2)]
    assert all(f.result(timeout=300).category == "correct" for f in futures)
    a, b = evaluator.engine.traces[-2:]
    assert _overlaps((a.load_start, a.loaded), (b.load_start, b.loaded))


LOUD_IMPORT = """
import sys
import time
_t0 = time.monotonic()
while time.monotonic() - _t0 < 7.0:
    print(f"tick {time.monotonic():.4f}", flush=True)
    time.sleep(0.02)
"""


def test_quiet_timing_pauses_a_loading_neighbour_on_the_cpu_device(make_local):
    """While T is timed, L (still importing, printing the time every 20 ms) is stopped: none of its
    ticks fall inside T's timing window, though its import spans it."""
    evaluator = make_local(jobs=2, prestart=2, shared=True)
    timed = evaluator.submit(request(candidate(forward_extra="import time; time.sleep(0.15)")))
    loud = evaluator.submit(request(candidate(prelude=LOUD_IMPORT)))
    result_t, result_l = timed.result(timeout=300), loud.result(timeout=300)
    assert result_t.category == "correct" and result_l.category == "correct", (result_t.reason, result_l.reason)
    trace = evaluator.engine.traces[-2]
    ticks = [float(v) for v in re.findall(r"tick (\d+\.\d+)", result_l.stdout_tail)]
    start, end = trace.timing_start, trace.timing_end
    if not (ticks and min(ticks) < start and max(ticks) > end):
        pytest.skip("the loading candidate's import did not span the timing window on this (busy) runner")
    inside = [t for t in ticks if start + 0.05 < t < end - 0.05]
    assert inside == [], f"{len(inside)} ticks while T was timed ({start:.3f}..{end:.3f})"


def test_prestarted_processes_serve_one_candidate_each(make_local):
    """Each evaluation runs in a process that existed before it (pre-started), a different one each
    time, and gone afterwards; the shared JIT cache directories are set before the candidate runs."""
    import os

    evaluator = make_local(jobs=1, prestart=1, shared=True)
    assert evaluator.engine.prestart.wait_full(timeout=120)
    # Sandboxed, the candidate sees its own PID namespace: it names its scratch folder instead, which
    # the supervisor's side can match with the pre-started processes' working directories.
    source = candidate(prelude="import os\nprint('cwd', os.getcwd(), 'inductor', os.environ['TORCHINDUCTOR_CACHE_DIR'], "
                               "flush=True)\n")
    pids = []
    for _ in range(2):
        assert evaluator.engine.prestart.wait_full(timeout=120)
        idle = {}
        for idle_pid in evaluator.engine.prestart.idle_pids():
            with contextlib.suppress(OSError):
                idle.setdefault(os.readlink(f"/proc/{idle_pid}/cwd"), set()).add(idle_pid)
        result = evaluator.evaluate(request(source))
        assert result.category == "correct", result.reason
        assert result.environment["prestarted"] is True
        cwd = re.search(r"cwd (\S+)", result.stdout_tail).group(1)
        assert cwd in idle, "the candidate ran in a process the pool had started before it arrived"
        # its end is reaped after the result is handed back: wait for it (a loaded runner lags), never long
        deadline = time.monotonic() + 60
        while not all(_gone(pid) for pid in idle[cwd]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert all(_gone(pid) for pid in idle[cwd]), "the process outlived its one candidate"
        # its own JIT folder in its scratch, a copy of the source's shared entry (published once correct)
        assert re.search(rf"inductor {re.escape(cwd)}/jit-[0-9a-f]+/inductor", result.stdout_tail)
        assert (evaluator.engine.cache_root / "jit" / jit_cache_key(source, None)).is_dir()
        pids.append(cwd)
    assert pids[0] != pids[1]


def _gone(pid: int) -> bool:
    """Exited (a zombie not yet reaped counts: it runs nothing)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except OSError:
        return True


LOAD_INLINE = """
import ctypes
from torch.utils.cpp_extension import load_inline
_lib = load_inline(name="pikeh_scale", cpp_sources=['extern "C" int pikeh_scale() { return 1; }'],
                   no_implicit_headers=True, is_python_module=False)
SCALE = ctypes.CDLL(_lib).pikeh_scale()
"""


def test_load_inline_through_the_evaluator_is_built_once(make_local):
    # the module's two-slot engine (its build cache has built nothing else; the counts are per evaluation)
    evaluator = make_local(jobs=2, prestart=2, shared=True)
    source = candidate(prelude=LOAD_INLINE, forward_extra="x = x * SCALE")
    first = evaluator.evaluate(request(source))
    assert first.category == "correct", (first.reason, first.stderr_tail[-2000:])
    assert first.environment["build_cache"] == {"hits": 0, "misses": 1, "failures": 0, "fallbacks": 0}
    second = evaluator.evaluate(request(source.replace("return torch.relu", "return (torch.relu")
                                        .replace("self.linear(x))", "self.linear(x)))")))
    assert second.category == "correct", second.reason
    # a different candidate file with the same extension: the build is not repeated
    assert second.environment["build_cache"]["hits"] == 1
    assert second.stage_seconds["build"] < first.stage_seconds["build"]
    # a candidate that changes the compiler's environment first builds privately, as without a cache
    private = evaluator.evaluate(request(source.replace("import ctypes\n", "import ctypes\nimport os\n"
                                                        "os.environ['CPATH'] = '/nonexistent'\n")))
    assert private.category == "correct", (private.reason, private.stderr_tail[-2000:])
    assert "build_cache" not in private.environment


def test_an_aborted_evaluation_ends_at_once_and_leaves_no_process(make_local):
    from pike_harness.contracts.evaluation import EvaluatorError

    evaluator = make_local(jobs=1, prestart=1, shared=True)
    stuck = evaluator.submit(request(candidate(prelude="import time\ntime.sleep(60)\n")))
    queued = evaluator.submit(request(candidate()))
    deadline = time.monotonic() + 60
    while evaluator.engine.traces[-2].load_start is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)  # it is importing now
    began = time.monotonic()
    evaluator.abort([stuck, queued])
    with pytest.raises(EvaluatorError, match="aborted"):
        stuck.result(timeout=30)
    assert time.monotonic() - began < 30  # at once, not after the candidate's 60 s sleep (a loaded runner is slow)
    assert queued.cancelled() or isinstance(queued.exception(timeout=30), EvaluatorError)
    assert sandbox_leftovers(evaluator.workdir, evaluator) == []
