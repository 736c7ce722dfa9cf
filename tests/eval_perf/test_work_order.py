"""Throughput policy: the longest CPU work starts first, process starts are admitted a few at a time,
and every stage of every candidate is accounted for. Orders and counts from the engine's traces,
never durations."""

from __future__ import annotations

import pytest
from perf_helpers import candidate, request, smoke

from pike_harness.worker.supervise.engine.stage_breakdown import STAGES, candidate_stages, device_idle
from pike_harness.worker.supervise.engine.work_order import BUILD, JIT_WARMUP, PLAIN, order_key, work_class

BUILDS = "from torch.utils.cpp_extension import load_inline\n"
TRITON = "import triton\n"
# Ends at the static checks (the harness is off limits), so no process starts for it: the test sees
# the order the engine *began* loading in without paying for ten process starts.
REJECTED = "import pike_harness\n"


def test_a_source_s_work_class_is_read_from_it_and_submission_order_ignores_it():
    assert work_class(candidate(prelude=BUILDS)) == BUILD
    assert work_class(candidate(prelude=TRITON)) == JIT_WARMUP
    assert work_class(candidate(), baseline_mode="compile") == JIT_WARMUP
    assert work_class(candidate()) == PLAIN
    assert work_class("def broken(:\n") == PLAIN
    assert order_key("longest-first", 11, BUILD) < order_key("longest-first", 1, PLAIN)
    assert order_key("submission", 11, BUILD) > order_key("submission", 1, PLAIN)


def test_builds_first_but_a_candidate_without_one_loads_beside_them():
    """Two threads, one build slot: the first build goes first; while it is still loading, the next
    thread takes the job that needs no build, though a second build is ahead of it by key."""
    import threading

    from pike_harness.worker.supervise.engine.work_order import WorkQueue

    queue = WorkQueue(threads=2, build_slots=1)
    order: list[str] = []
    gates = {name: threading.Event() for name in ("blocker1", "blocker2", "b1")}
    started = {name: threading.Event() for name in ("blocker1", "blocker2", "b1", "p", "b2")}

    def job(name: str):
        def run(loaded) -> None:
            order.append(name)
            started[name].set()
            if name in gates:
                assert gates[name].wait(30)
        return run

    queue.put((PLAIN, 0), job("blocker1"))
    queue.put((PLAIN, 1), job("blocker2"))
    assert started["blocker1"].wait(30) and started["blocker2"].wait(30)
    queue.put((BUILD, 2), job("b1"))
    queue.put((BUILD, 3), job("b2"))
    queue.put((PLAIN, 4), job("p"))
    gates["blocker1"].set()
    assert started["b1"].wait(30)
    gates["blocker2"].set()
    assert started["p"].wait(30)
    gates["b1"].set()
    assert started["b2"].wait(30)
    queue.shutdown()
    assert order == ["blocker1", "blocker2", "b1", "p", "b2"]


def test_long_jobs_on_threads_of_their_own_do_not_wait_behind_quick_ones():
    """One shared thread held by a quick job (its loaded candidate waiting for the device, in a run);
    a JIT warm-up and a build put after it start on the long jobs' threads at once, while a second
    quick job waits for the shared thread."""
    import threading

    from pike_harness.worker.supervise.engine.work_order import WorkQueue, is_long

    assert is_long((BUILD, 0)) and is_long((JIT_WARMUP, 0)) and not is_long((PLAIN, 0))
    queue = WorkQueue(threads=1, build_slots=1, long_threads=2)
    release = threading.Event()
    started = {name: threading.Event() for name in ("quick1", "quick2", "jit", "build")}

    def job(name: str):
        def run(loaded) -> None:
            started[name].set()
            if name == "quick1":
                assert release.wait(30)
        return run

    queue.put((PLAIN, 0), job("quick1"))
    assert started["quick1"].wait(30)
    queue.put((PLAIN, 1), job("quick2"))
    queue.put((JIT_WARMUP, 2), job("jit"))
    queue.put((BUILD, 3), job("build"))
    assert started["jit"].wait(30) and started["build"].wait(30)
    assert not started["quick2"].is_set(), "a quick job ran on a long job's thread"
    release.set()
    assert started["quick2"].wait(30)
    queue.shutdown()


def test_long_slots_default_to_twice_the_cpu_slots_with_a_gpu_and_to_none_on_the_cpu():
    from pike_harness.worker.supervise.engine.options import EngineConfig, EngineError, resolve

    gpu = resolve(EngineConfig(jobs=6, build_cache="off"), ["cuda:0"])
    assert gpu.long_slots == 12
    assert resolve(EngineConfig(jobs=6, build_cache="off"), ["cuda:0", "cuda:1"]).long_slots == 12
    assert resolve(EngineConfig(jobs=6, build_cache="off"), ["cpu"]).long_slots == 0
    assert resolve(EngineConfig(jobs=6, long_slots=0, build_cache="off"), ["cuda:0"]).long_slots == 0
    with pytest.raises(EngineError, match="--long-slots"):
        resolve(EngineConfig(long_slots=-1, build_cache="off"), ["cpu"])


def test_with_long_slots_a_build_loads_while_the_shared_slot_is_held(make_local, visible_tmp):
    """One shared CPU slot held by a candidate (its process waits on a file), ten quick candidates
    queued behind it, then one with a load_inline build: with a long slot of its own the build's
    candidate is through (its static checks end it) before the gate opens."""
    gate = visible_tmp / "gate"
    gate.write_text("")
    evaluator = make_local(jobs=1, max_ready=0, prestart=0, long_slots=1)
    try:
        # The gate holds for up to 600 s, so no slowness of the host can open it before the build is
        # through; the finally opens it either way.
        blocker = evaluator.submit(request(_gated(candidate(), gate, deadline_s=600)))
        buildless = [evaluator.submit(request(REJECTED + candidate())) for _ in range(10)]
        build = evaluator.submit(request(REJECTED + BUILDS + candidate()))
        assert build.result(timeout=300).check == "harness_access"
        assert not blocker.done() and not any(f.done() for f in buildless), "the build waited for nothing"
    finally:
        gate.unlink()
    assert all(f.result(timeout=300).check == "harness_access" for f in buildless)
    assert blocker.result(timeout=300).category == "correct"
    assert evaluator.describe()["scheduling"]["long_slots"] == 1


def _gated(source: str, gate, deadline_s: int = 60) -> str:
    return (f"import os\nimport time\n_deadline = time.time() + {deadline_s}\nwhile os.path.exists({str(gate)!r}) "
            f"and time.time() < _deadline:\n    time.sleep(0.05)\n") + source


@pytest.mark.parametrize("order", ["longest-first", "submission"])
def test_a_build_submitted_after_ten_buildless_candidates_starts_before_them(make_local, visible_tmp, order):
    """One thread, one CPU slot, held by a candidate waiting at a gate; ten build-less candidates and
    then one with a load_inline build queue behind it. Longest-first loads the build next; submission
    order loads it last (the option a before/after comparison uses)."""
    gate = visible_tmp / "gate"
    gate.write_text("")
    # no pre-started pool: the blocker's own process start holds the slot as well, and no unused process
    # is started to refill a pool after it
    evaluator = make_local(jobs=1, max_ready=0, prestart=0, cpu_order=order)
    engine = evaluator.engine
    blocker = evaluator.submit(request(_gated(candidate(), gate)))
    buildless = [evaluator.submit(request(REJECTED + candidate())) for _ in range(10)]
    build = evaluator.submit(request(REJECTED + BUILDS + candidate()))
    gate.unlink()
    results = [f.result(timeout=300) for f in (blocker, *buildless, build)]
    assert results[0].category == "correct", results[0].reason
    assert all(r.check == "harness_access" for r in results[1:])
    traces = sorted(engine.traces, key=lambda t: t.seq)[-12:]
    started = sorted(traces[1:], key=lambda t: t.load_start)
    assert traces[-1].work_class == BUILD and {t.work_class for t in traces[:-1]} == {PLAIN}
    expected = [traces[-1], *traces[1:-1]] if order == "longest-first" else traces[1:]
    assert [t.seq for t in started] == [t.seq for t in expected]


def test_process_starts_are_admitted_and_every_stage_is_accounted_for(make_local):
    """No pre-started processes, two CPU slots, one start slot: two candidates loading at once start
    their processes one at a time (each through the slot), and each candidate's stages add up to its
    time in the engine."""
    evaluator = make_local(jobs=2, prestart=0, start_slots=1)
    futures = [evaluator.submit(request(candidate())) for _ in range(2)]
    assert [f.result(timeout=300).category for f in futures] == ["correct"] * 2
    stats = evaluator.engine.stats(stages=True)
    assert stats["start_slots"] == {"slots": 1, "starts": 2, "most_at_once": 1}
    traces = evaluator.engine.traces[-2:]
    first, second = sorted(traces, key=lambda t: t.spawned)
    assert second.load_start < first.spawned, "both were loading while one process started"
    for trace in traces:
        stages = candidate_stages(trace)
        assert set(stages) == set(STAGES)
        assert sum(stages.values()) == pytest.approx(trace.done - trace.submitted, abs=1e-6)
        assert stages["starting"] > 0 and stages["timing"] > 0 and stages["slot_wait"] >= 0
    listed = {c["seq"]: c for c in stats["stages"]["candidates"]}
    assert all(t.seq in listed for t in traces)
    idle = stats["stages"]["device_idle_s"]["cpu"]
    timed = sum(t.timing_end - t.timing_start for t in evaluator.engine.traces)
    assert sum(idle.values()) + timed == pytest.approx(stats["wall_s"], rel=1e-6)


def test_idle_causes_follow_what_candidates_were_doing():
    """A hand-made run on one device: the gaps between two timings are charged to the stage the
    candidates were in (a start, then a build), the rest to nothing ready."""
    from pike_harness.worker.supervise.engine.jobs import JobTrace

    a = JobTrace(seq=0, task="t", submitted=0.0, device="cpu", load_start=0.0, spawned=2.0, imported=3.0,
                 loaded=3.0, granted=3.0, timing_start=3.0, timing_end=5.0, done=5.0)
    b = JobTrace(seq=1, task="t", submitted=0.0, device="cpu", load_start=1.0, spawned=6.0, builds=[(6.0, 9.0)],
                 imported=9.0, loaded=9.0, granted=9.0, timing_start=9.0, timing_end=10.0, done=10.0)
    idle = device_idle([a, b], "cpu", 0.0, 10.0)
    assert idle == {"checks": 0.0, "handover": 0.0, "builds": 3.0, "starts": 4.0, "loading": 0.0,
                    "nothing_ready": 0.0}
    assert candidate_stages(b)["building"] == 3.0 and candidate_stages(b)["slot_wait"] == 1.0


def test_a_paired_re_timing_is_its_own_stage_and_keeps_its_device_busy():
    """The paired blocks are told by a second timing_start/timing_end pair: the trace keeps the
    ordinary timing as ``timing`` and the paired window (reference loading included) as ``paired``."""
    from pike_harness.worker.supervise.engine.jobs import JobTrace
    from pike_harness.worker.supervise.engine.stage_breakdown import breakdown, format_breakdown

    trace = JobTrace(seq=0, task="t", submitted=0.0, device="cpu", load_start=0.0, spawned=1.0, imported=2.0,
                     loaded=2.0, granted=2.0)
    for moment, started in ((3.0, True), (5.0, False), (7.0, True), (10.0, False)):  # timing, then paired
        (trace.window_started if started else trace.window_ended)(moment)
    trace.done = 11.0
    assert (trace.timing_start, trace.timing_end, trace.paired_start, trace.paired_end) == (3.0, 5.0, 7.0, 10.0)
    stages = candidate_stages(trace)
    assert stages["checking"] == 1.0 and stages["timing"] == 2.0 and stages["paired"] == 5.0
    assert stages["closing"] == 1.0 and sum(stages.values()) == 11.0
    # idle: up to the ordinary timing, the reference's loading between the windows, and the close
    assert sum(device_idle([trace], "cpu", 0.0, 11.0).values()) == 3.0 + 2.0 + 1.0
    figures = breakdown([trace], ["cpu"], 0.0, 11.0)
    assert figures["totals_s"]["paired"] == 5.0 and figures["candidates"][0]["paired_s"] == 5.0
    assert "timing 2.0, paired 5.0" in format_breakdown(figures)


def test_pikeh_eval_prints_where_the_time_went(cli, tmp_path):
    """``--stages`` after the verdict: the stage totals and the device's idle time by cause (a candidate
    refused by the static checks: nothing starts, the breakdown still covers it)."""
    path = tmp_path / "cand.py"
    path.write_text(REJECTED + candidate())
    result = cli("eval", str(path), "--task", "smoke/1", "--device", "cpu", "--prestart", "0", "--stages")
    assert result.exit_code == 0, result.output
    assert "rejected" in result.output
    assert "stage totals (s, all candidates): slot_wait" in result.output and "cpu idle (s, by cause)" in result.output


def test_at_the_device_a_candidate_with_long_work_goes_before_a_quick_one_submitted_earlier(make_local, visible_tmp):
    """The device is held by a candidate whose forward waits at a file; a quick candidate and then one
    whose source names Triton (a JIT warm-up by its work class) load and queue for the device. When it
    is released, the later one with long work is served first: the gate serves the engine's work order."""
    import time

    from pike_harness.contracts.model import Limits

    gate_file = visible_tmp / "device-gate"
    gate_file.write_text("")
    evaluator = make_local(jobs=3, max_ready=2, prestart=0)
    engine = evaluator.engine
    wait_here = (f"import os, time\n        _deadline = time.time() + 600\n        while os.path.exists({str(gate_file)!r}) "
                 f"and time.time() < _deadline:\n            time.sleep(0.05)")
    device = engine.gate("cpu")

    def wait_for(condition, what: str) -> None:
        deadline = time.monotonic() + 300
        while not condition():
            assert not blocker.done(), blocker.result().reason
            assert time.monotonic() < deadline, what
            time.sleep(0.1)

    try:
        # Its checked call may wait up to 600 s (the others' loads on a slow host), never its limit's 120.
        blocker = evaluator.submit(smoke().eval_request(candidate(forward_extra=wait_here), limits=Limits(
            compile_timeout_s=600, run_timeout_s=600, memory_mb=6000)))
        wait_for(lambda: device.holder == 0, "the blocker never held the device")
        quick = evaluator.submit(request(candidate()))
        jit = evaluator.submit(request(candidate(prelude="def _never_called():\n    import triton\n")))
        traces = {trace.seq: trace for trace in engine.traces}
        assert [traces[seq].work_class for seq in (0, 1, 2)] == [PLAIN, PLAIN, JIT_WARMUP]
        wait_for(lambda: {seq for _rank, seq in list(device._waiting)} >= {1, 2},
                 "the two others never queued for the device")
    finally:
        gate_file.unlink()
    results = [future.result(timeout=300) for future in (blocker, quick, jit)]
    assert [result.category for result in results] == ["correct"] * 3
    assert traces[2].granted < traces[1].granted, "the quick candidate, submitted first, was served first"


def test_the_breakdown_names_the_candidate_that_ended_the_run_and_its_pause():
    """The last to finish, its longest stage and how long the quiet rule stopped it: on the 60-set a
    warm-up stopped for most of the batch's timings ended every run (reports/throughput/2026-11-29-h200-check-phase)."""
    from pike_harness.worker.supervise.engine.jobs import JobTrace
    from pike_harness.worker.supervise.engine.stage_breakdown import breakdown, format_breakdown

    quick = JobTrace(seq=0, task="quick", submitted=1.0, device="cpu", load_start=1.0, spawned=2.0, imported=3.0,
                     loaded=3.0, granted=3.0, timing_start=3.0, timing_end=5.0, done=5.0, category="correct")
    warming = JobTrace(seq=1, task="warming", submitted=1.0, device="cpu", load_start=1.0, spawned=2.0, imported=3.0,
                       loaded=9.0, granted=9.0, timing_start=9.0, timing_end=10.0, done=11.0, category="incorrect",
                       paused_s=2.0)
    figures = breakdown([warming, quick], ["cpu"], 1.0, 11.0)
    assert figures["last"] == {"seq": 1, "task": "warming", "category": "incorrect", "done_s": 10.0,
                               "longest_stage": "warming", "longest_stage_s": 6.0, "paused_s": 2.0}
    assert [c["paused_s"] for c in figures["candidates"]] == [0.0, 2.0]
    assert ("last to finish: warming (#1, incorrect) at 10.0 s; its longest stage warming 6.0 s; "
            "stopped 2.0 s for others' timings") in format_breakdown(figures)
    assert breakdown([], ["cpu"], None, 1.0)["last"] is None
