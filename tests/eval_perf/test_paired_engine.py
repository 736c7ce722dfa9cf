"""The engine's paired re-timing on the CPU device with the real sandbox: blocks alternate, caps and
stop reasons hold, the side not timed is stopped (a hostile background thread's stamps), a failing
reference leaves the verdict alone; and the noise canary's report on every correct result."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perf_helpers import PLAIN, candidate, request  # noqa: E402

from pike_harness.worker.records import PairedSpec  # noqa: E402
from pike_harness.worker.supervise.engine import Engine, EngineConfig  # noqa: E402
from pike_harness.worker.supervise.engine.stage_breakdown import candidate_stages  # noqa: E402

# Short blocks: the CPU test checks the design (order, caps, stopping), not the host's noise. (The
# "converged" stop is the stop rule's unit test: tests/eval/test_paired_and_noise_units.py.)
SPEC = {"block_ms": 5.0, "max_seconds": 60.0}

# A candidate whose raw thread (``_thread``: invisible to threading.enumerate, so it passes the
# background-thread check) stamps CLOCK_MONOTONIC into a file in its scratch folder every ~0.2 ms,
# for as long as it runs: while the reference is timed it would steal the reference's CPU.
HOSTILE = textwrap.dedent("""
    import _thread
    import time


    def _stamp():
        with open("pikeh_stamps.txt", "a") as out:
            while True:
                out.write(f"{time.monotonic_ns()}\\n")
                out.flush()
                time.sleep(0.0002)


    _thread.start_new_thread(_stamp, ())
""") + textwrap.dedent(PLAIN)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("OMP_NUM_THREADS", "1")
    engine = Engine(EngineConfig(device="cpu", jobs=1, prestart=0, build_cache="off",
                                 workdir=tmp_path_factory.mktemp("paired") / "work"))
    yield engine
    engine.close()
    mp.undo()


def _paired(source: str = PLAIN, **spec) -> object:
    return request(source, protocol="quick", paired=PairedSpec(**{**SPEC, **spec}))


def test_pairs_alternate_within_their_caps_and_the_candidate_is_stopped_while_the_reference_is_timed(engine):
    # The stamps file outlives the evaluation (its scratch folder) while keep_scratch is on; it stays on
    # until the file is read: the engine closes the evaluation once more after handing the result back,
    # and that close would delete the folder if the setting were already off again.
    engine.settings.keep_scratch = True
    try:
        # 50 ms blocks, not 5: the thread must get the GIL and the core inside some candidate block for
        # the check below to mean anything, and 4 x 5 ms of a loaded runner's core can pass it by.
        result = engine.submit(_paired(HOSTILE, block_ms=50.0, target_halfwidth=1e-9, min_pairs=2,
                                       max_pairs=4)).result(300)
        files = list((engine.workdir / "scratch").glob("*/pikeh_stamps.txt"))
        stamps_text = files[0].read_text() if len(files) == 1 else ""
    finally:
        engine.settings.keep_scratch = False
    assert result.category == "correct", result.reason
    paired = result.paired
    assert paired is not None, result.environment.get("paired")
    assert paired.stop == "max_pairs" and len(paired.pairs) == 4  # a target no pair count reaches
    sides = [window[0] for window in paired.windows]
    assert sides == ["reference", "candidate", "candidate", "reference"] * 2
    starts = [window[1] for window in paired.windows]
    assert starts == sorted(starts) and all(w[1] < w[2] for w in paired.windows)
    assert paired.ci_low <= paired.speedup <= paired.ci_high
    assert paired.flagged and "paired_wide_interval" in result.flags
    assert all(r > 0 and c > 0 for r, c in paired.pairs) and paired.seconds > 0
    assert paired.noise is not None and paired.noise.canary_before_ms and paired.noise.canary_after_ms
    # the ordinary timing is still the search-style number, with its own noise report
    assert result.runtime_ms is not None and result.noise is not None
    assert result.noise.canary_before_ms > 0 and result.noise.canary_after_ms > 0
    assert "paired" in result.stage_seconds
    # the engine's trace keeps the ordinary timing and the paired window apart (stage_breakdown)
    trace = engine.traces[-1]
    assert trace.timing_start < trace.timing_end <= trace.paired_start < trace.paired_end <= trace.done
    assert trace.paired_start <= paired.windows[0][1] / 1e9 and paired.windows[-1][2] / 1e9 <= trace.paired_end
    stages = candidate_stages(trace)
    assert stages["timing"] == pytest.approx(trace.timing_end - trace.timing_start)
    assert stages["paired"] == pytest.approx(trace.paired_end - trace.timing_end)

    assert len(files) == 1, files
    stamps = [int(line) for line in stamps_text.split()]
    inside = {side: 0 for side in ("reference", "candidate")}
    for side, start, end in paired.windows:
        inside[side] += sum(1 for stamp in stamps if start <= stamp <= end)
    assert inside["reference"] == 0, "the candidate's thread ran during a reference block"
    assert inside["candidate"] > 0, "the thread ran during its own blocks (so the check above can fail)"


# A candidate that writes down each CPU mask its forward calls run under, when it changes: what the
# rotation of ``paired_cores`` did to its process, seen from inside the sandbox.
MASKS = candidate(
    prelude="""
    import json
    import os

    _last = []


    def _note_mask():
        mask = sorted(os.sched_getaffinity(0))
        if _last != [mask]:
            _last[:] = [mask]
            with open("pikeh_masks.txt", "a") as out:
                out.write(json.dumps(mask) + "\\n")
    """,
    forward_extra="_note_mask()")


def _masks_seen(engine: Engine, spec: dict) -> tuple[object, list[list[int]]]:
    """Submit MASKS paired with ``spec``; the result and the masks its forward calls ran under."""
    engine.settings.keep_scratch = True  # the file outlives the evaluation (see the test above)
    files: list[Path] = []
    try:
        result = engine.submit(_paired(MASKS, **spec)).result(300)
        files = list((engine.workdir / "scratch").glob("*/pikeh_masks.txt"))
        lines = files[-1].read_text().splitlines() if files else []
    finally:
        engine.settings.keep_scratch = False
    for stale in files:  # the next test reads only its own
        stale.unlink(missing_ok=True)  # the engine may already have removed its folder
    return result, [json.loads(line) for line in lines]


def test_rotated_pairs_run_each_pair_on_the_next_core(engine):
    result, masks = _masks_seen(engine, {"target_halfwidth": 1e-9, "min_pairs": 2, "max_pairs": 4})
    assert result.category == "correct", result.reason
    paired = result.paired
    assert paired is not None, result.environment.get("paired")
    loaded = masks[0]  # the candidate's mask while it loads and is checked: where rotation draws from
    # One order of the loaded cores (drawn for this re-timing), each core once before any repeats.
    first = paired.cores[:len(loaded)]
    assert len(set(first)) == len(first) and set(first) <= set(loaded)
    assert paired.cores == [first[i % len(first)] for i in range(4)]
    if len(loaded) <= 4:
        assert sorted(first) == loaded
    assert "paired_unpinned" not in result.flags, paired.flagged  # both sides stayed on their cores
    # Inside the sandbox: the warm-up pair and each counted pair on its own single core, in that order,
    # and nothing else of the re-timing's (a block never runs on a mask wider than one core).
    singles = [mask for mask in masks[1:] if len(mask) == 1]
    blocks = [paired.cores[0], *paired.cores]  # the warm-up pair runs on the first pair's core
    expected = [[core] for i, core in enumerate(blocks) if i == 0 or core != blocks[i - 1]]
    if len(loaded) == 1:
        assert masks == [loaded]  # one core: pinning changes nothing the process could see
    else:
        assert singles == expected and masks[1:] == singles


# A candidate that widens its timed thread's mask to every CPU of the machine in each forward call (the
# kernel keeps those its cgroup allows, two or more here): its thread may leave the core its block was
# pinned to while the reference's stays. Not the mask it loaded with: that may be one core.
WIDENS = candidate(
    prelude="""
    import os

    _ALL = set(range(os.cpu_count() or 1))
    """,
    forward_extra="os.sched_setaffinity(0, _ALL)")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="one core: there is no other core to go to")
def test_a_candidate_that_unpins_its_timed_thread_is_flagged(engine):
    result = engine.submit(_paired(WIDENS, target_halfwidth=1e-9, min_pairs=2, max_pairs=3)).result(300)
    assert result.category == "correct", result.reason
    paired = result.paired
    assert paired is not None, result.environment.get("paired")
    assert "paired_unpinned" in result.flags
    assert paired.flagged and "the candidate's timed thread left its core in 3 of 3 blocks" in paired.flagged
    assert "reference's" not in paired.flagged  # the reference stayed pinned


def test_free_pairs_run_where_the_scheduler_puts_them(tmp_path):
    free = Engine(EngineConfig(device="cpu", jobs=1, prestart=0, build_cache="off", workdir=tmp_path / "work",
                               paired_cores="free"))
    try:
        result, masks = _masks_seen(free, {"target_halfwidth": 1e-9, "min_pairs": 2, "max_pairs": 3})
    finally:
        free.close()
    assert result.category == "correct", result.reason
    assert result.paired is not None and result.paired.cores == []
    assert len(masks) == 1  # the mask it loaded with, throughout


def test_a_failing_reference_leaves_the_verdict_and_no_paired_number(engine):
    # The reference names the harness in a string: the candidate checks reject it when it runs as a
    # timed baseline, while the trusted reference process (which never applies them) runs it fine.
    base = _paired(max_pairs=3)
    broken = request(PLAIN, protocol="quick", paired=base.paired,
                     reference_source=base.reference_source + '\n_NOTE = "pike_harness"\n')
    result = engine.submit(broken).result(300)
    assert result.category == "correct", result.reason
    assert result.paired is None
    assert "paired_unavailable" in result.flags
    assert "reference failed" in result.environment["paired"] and "harness_access" in result.environment["paired"]
    assert result.runtime_ms is not None and result.noise is not None


@pytest.mark.gpu
def test_a_paired_run_on_a_gpu(tmp_path):
    """The same candidate computation as smoke/1's reference, re-timed against it on a GPU: the
    interval is real and the canary read. Not "near 1": on an H200 (2026-11-29) each side of this
    launch-bound pair kept a speed of 0.03 or 0.1 ms a call for several blocks at a time, and runs read
    0.57x to 1.99x (benchmarks/diag_paired_self.py). The band below only catches a pairing of two
    different things; whether the interval holds the truth is the statistics' test, on a fixture."""
    engine = Engine(EngineConfig(device="cuda:0", jobs=2, prestart=1, build_cache="off", workdir=tmp_path / "work"))
    try:
        spec = PairedSpec(block_ms=50.0, min_pairs=5, max_pairs=20, max_seconds=30.0)
        result = engine.submit(request(PLAIN, protocol="robust", paired=spec)).result(600)
        second = engine.submit(request(PLAIN, protocol="robust")).result(600)
    finally:
        engine.close()
    assert result.category == "correct", result.reason
    paired = result.paired
    assert paired is not None, result.environment.get("paired")
    assert paired.stop in ("converged", "max_pairs", "max_seconds") and 2 <= len(paired.pairs) <= 20
    assert [w[0] for w in paired.windows[:4]] == ["reference", "candidate", "candidate", "reference"]
    assert paired.ci_low <= paired.speedup <= paired.ci_high
    assert 0.33 < paired.speedup < 3.0, paired
    assert paired.effective_pairs is not None and 2 <= paired.effective_pairs <= len(paired.pairs)
    assert "paired_unpinned" not in result.flags, paired.flagged  # CUDA leaves the pinned thread where it is
    print(f"\npaired on {result.environment.get('gpu')}: {paired.speedup:.3f}x "
          f"[{paired.ci_low:.3f}, {paired.ci_high:.3f}] after {len(paired.pairs)} pairs ({paired.stop}), "
          f"{paired.seconds:.1f} s; canary {result.noise}")
    assert result.noise.canary_before_ms > 0 and second.noise is not None and second.noise.canary_after_ms > 0


def test_a_timing_off_the_canary_baseline_is_redone_then_flagged(engine):
    from pike_harness.worker.records import NoiseReport
    from pike_harness.worker.supervise.noise import NoiseLimits, NoiseWatch

    saved = engine.settings.noise
    watch = engine.settings.noise = NoiseWatch(NoiseLimits(canary_tolerance=0.5, max_steal=1.0, redo=1))
    for _ in range(2):  # a baseline no real probe reads near (a nanosecond): every timing is off it
        watch.record("cpu", NoiseReport(canary_before_ms=1e-6, canary_after_ms=1e-6))
    try:
        result = engine.submit(request(PLAIN, protocol="quick")).result(300)
    finally:
        engine.settings.noise = saved
    assert result.category == "correct", result.reason
    assert result.noise.redone == 1 and "noise canary read" in result.noise.flagged
    assert result.noise.canary_baseline_ms == 1e-6 and "noisy_timing" in result.flags
    assert watch.baseline("cpu") == 1e-6, "the flagged readings stayed out of the baseline"


def test_a_cache_whose_timings_are_redone_for_noise_is_still_confirmed_and_rejected(engine):
    """Every timing off the canary's baseline: the first two are redone for noise, the third is kept
    and condemned by its fresh calls, and the run that confirms it must still have fresh sets of its
    own. With sets for three runs only, the confirmation had none and the cache was only flagged,
    its headline the replays of a run with no fresh call (an audit, 2026-11-30)."""
    from pike_harness.worker.records import NoiseReport
    from pike_harness.worker.supervise.noise import NoiseLimits, NoiseWatch

    source = (Path(__file__).resolve().parents[1] / "eval" / "corpus" / "cache_by_content_sample.py").read_text()
    saved = engine.settings.noise
    watch = engine.settings.noise = NoiseWatch(NoiseLimits(canary_tolerance=0.5, max_steal=1.0, redo=2))
    for _ in range(2):  # a baseline no real probe reads near (a nanosecond): every timing is off it
        watch.record("cpu", NoiseReport(canary_before_ms=1e-6, canary_after_ms=1e-6))
    try:
        result = engine.submit(request(source, protocol="quick",
                                       protocol_params={"min_reps": 40, "max_reps": 40})).result(300)
    finally:
        engine.settings.noise = saved
    assert (result.category, result.check) == ("rejected", "content_cache"), (result.category, result.reason,
                                                                              result.flags)
    assert "16 input sets" in result.reason  # the kept run's and its confirmation's 8 each, pooled


def test_a_task_whose_sets_pass_the_byte_cap_draws_no_seeds_once_known_and_stays_unjudged(engine, monkeypatch):
    """Under a cap no set fits (a stand-in for level3-pike 6's 919 MB sets against 256 MB): the first
    evaluation draws the full pool (unless an earlier one of the task taught the size) and its process
    makes nothing to keep; once the reference process has
    made the task's sets, no seed is drawn at all. Both are flagged ``fresh_calls_unjudged``."""
    from pike_harness.worker.supervise import fresh_inputs

    monkeypatch.setattr(fresh_inputs, "MAX_BYTES", 1)
    results = [engine.submit(request(PLAIN, protocol="quick")).result(300) for _ in range(2)]
    for result in results:
        assert result.category == "correct", result.reason
        assert fresh_inputs.UNJUDGED_FLAG in result.flags and result.environment["fresh_inputs"]["calls"] == 0
    assert results[1].seeds["fresh"] == []


# A content cache that counts its timing runs: a run starts with calls on the first input set twice in a row
# (the loop's first call, then its estimate), which the check also does once. It computes honestly
# through the check and the ordinary timing (runs 0 and 1), then replays each input it has seen, so only
# the paired blocks (later timings of the same process) time replayed answers. Counting calls instead
# would tie the test to how many calls a block's time holds.
LATE_CACHE = textwrap.dedent("""
    import torch
    import torch.nn as nn


    class ModelNew(nn.Module):
        def __init__(self, in_features, out_features):
            super().__init__()
            self.linear = nn.Linear(in_features, out_features, bias=False)
            self.answers = {}
            self.first = None
            self.previous = None
            self.runs = -1

        def forward(self, x):
            flat = x.reshape(-1)
            key = tuple(flat[:4].tolist() + flat[-4:].tolist())
            if self.first is None:
                self.first = key
            if key == self.first and self.previous == self.first and not self.starting:
                self.runs += 1
            self.starting = key == self.first and self.previous == self.first
            self.previous = key
            if self.runs >= REPLAY_FROM and key in self.answers:
                return self.answers[key]
            self.answers[key] = torch.relu(self.linear(x)).clone()
            return self.answers[key]

        starting = False


    REPLAY_FROM = 2
""")


def test_a_cache_that_replays_only_in_the_paired_blocks_is_rejected_by_their_fresh_calls(engine):
    """Each candidate block makes a fresh call: a cache that waits for the blocks meets sets it never
    saw there and is judged on those calls, apart from the ordinary timing's (which it passed). An
    honest candidate's blocks make the same calls and pass."""
    from pike_harness.worker.supervise import fresh_inputs

    spec = {"block_ms": 20.0, "target_halfwidth": 1e-9, "min_pairs": 6, "max_pairs": 6}
    cached = engine.submit(_paired(LATE_CACHE, **spec)).result(300)
    assert (cached.category, cached.check) == ("rejected", "content_cache"), cached.reason
    fresh = cached.environment["fresh_inputs"]
    if "the paired re-timing's blocks" in cached.reason:  # else a noisy run was redone, and it replayed there
        assert fresh["calls"] == 8 and fresh["median_ratio"] < fresh_inputs.MEDIAN_RATIO  # the ordinary timing passed
        assert fresh["blocks"]["calls"] == 7  # a warm-up pair and six counted ones: one fresh call per block
    assert len(cached.seeds["fresh"]) == fresh_inputs.pool_size(8, paired=True)

    honest = engine.submit(_paired(PLAIN, **spec)).result(300)
    assert honest.category == "correct", honest.reason
    assert honest.environment["fresh_inputs"]["blocks"]["calls"] == 7


# Slow on the first eight inputs it meets after the check (its first timing run's fresh calls), never
# after: the ordinary timing's first run condemns it as a cache would, the run taken again does not.
SLOW_ONCE = textwrap.dedent("""
    import time

    import torch
    import torch.nn as nn


    class ModelNew(nn.Module):
        def __init__(self, in_features, out_features):
            super().__init__()
            self.linear = nn.Linear(in_features, out_features, bias=False)
            self.seen = set()

        def forward(self, x):
            key = tuple(x.reshape(-1)[:4].tolist())
            if key not in self.seen:
                self.seen.add(key)
                if 3 < len(self.seen) <= 11:
                    time.sleep(0.01)
            return torch.relu(self.linear(x))
""")


def test_a_run_whose_fresh_calls_condemn_is_taken_again_and_only_a_second_condemning_run_rejects(engine):
    """A host that slows the fresh calls of one run (here the candidate itself, in its first run only) is
    not a cache: the run is taken again and judged alone. A cache condemns both runs."""
    slow_once = engine.submit(request(SLOW_ONCE, protocol="quick")).result(300)
    assert slow_once.category == "correct", slow_once.reason
    assert slow_once.environment["fresh_inputs"]["calls"] == 8  # the kept run's: the second
    cache = engine.submit(request(LATE_CACHE.replace("REPLAY_FROM = 2", "REPLAY_FROM = 0"),
                                  protocol="quick")).result(300)
    assert (cache.category, cache.check) == ("rejected", "content_cache"), cache.reason
    assert "of the ordinary timing" in cache.reason
