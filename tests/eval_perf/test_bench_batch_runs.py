"""The batch benchmark's run list (benchmarks/bench_batch.py ``--runs``): what each entry asks the
engine for. Why: a device call is ten minutes; a misread entry (a device list split wrongly, a quiet
suffix dropped) would spend one on the wrong measurement."""

from __future__ import annotations

import pytest
from perf_helpers import benchmark_module


@pytest.fixture(scope="module")
def batch():
    with benchmark_module("bench_batch") as module:
        yield module


def test_device_lists_stay_with_their_run(batch):
    runs = batch.parse_runs("longest-first@cuda:0,1,2,3,longest-first@cuda:0,1,submission/stop@cuda:0", "cpu")
    assert runs == [("longest-first", "cuda:0,1,2,3"), ("longest-first", "cuda:0,1"), ("submission/stop", "cuda:0")]
    assert batch.parse_runs("longest-first", "cuda:0") == [("longest-first", "cuda:0")]


def test_quiet_suffix_sets_the_engine_options(batch):
    assert batch.parse_runs("longest-first/off@cuda:0", "cpu") == [("longest-first/off", "cuda:0")]
    assert batch.quiet_options("off") == {"quiet_timing": False}
    assert batch.quiet_options("cores") == {"quiet_mode": "cores"}
    assert batch.quiet_options("") == {}


def test_an_unknown_entry_is_refused(batch):
    with pytest.raises(SystemExit, match="ORDER"):
        batch.parse_runs("fastest@cuda:0", "cpu")
    with pytest.raises(SystemExit, match="ORDER"):
        batch.parse_runs("longest-first/loud@cuda:0", "cpu")


def test_engine_options_ride_on_the_entry(batch):
    runs = batch.parse_runs("longest-first+prewarm=all+check_slots=8@cuda:0,1,submission/off@cuda:0", "cpu")
    assert runs == [("longest-first+prewarm=all+check_slots=8", "cuda:0,1"), ("submission/off", "cuda:0")]
    assert batch.run_settings(runs[0][0]) == {"cpu_order": "longest-first", "prewarm": "all", "check_slots": 8}
    assert batch.run_settings(runs[1][0]) == {"cpu_order": "submission", "quiet_timing": False}
    for bad in ("longest-first+colour=red@cuda:0", "longest-first+prewarm@cuda:0", "longest-first+jobs=@cpu"):
        with pytest.raises(SystemExit, match="OPTION"):
            batch.parse_runs(bad, "cpu")


def test_host_cpu_charges_each_interval_inside_or_outside_the_timing_windows():
    """Known samples: 4 cores, two 1-s intervals, the first fully busy, the second a quarter busy, a
    timing window over the second half of the first and the first half of the second interval."""
    with benchmark_module("host_cpu") as host_cpu:
        samples = [(10.0, 0.0, 0.0), (11.0, 100.0, 100.0), (12.0, 125.0, 200.0)]  # (t, busy, total)
        figures = host_cpu.split(samples, [(10.5, 11.5), (11.2, 11.4)], cores=4)  # overlapping: merged
        assert figures["inside"] == {"seconds": 1.0, "busy_core_s": 2.5, "utilisation": 0.625}
        assert figures["outside"] == {"seconds": 1.0, "busy_core_s": 2.5, "utilisation": 0.625}
        assert host_cpu.split(samples, [], cores=4)["inside"]["utilisation"] is None
        assert "between timings 1 s at 62 % of 4 cores" in host_cpu.describe(figures)
        reading = host_cpu._read()  # the real host's, from the same parser the noise canary's steal uses
        assert reading is None or 0 <= reading[0] <= reading[1]
