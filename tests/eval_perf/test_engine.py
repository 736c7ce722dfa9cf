"""The evaluation engine used directly, as a transport does: its events, and devices it is given."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perf_helpers import PLAIN, request, smoke  # noqa: E402

from pike_harness.worker.supervise.engine import (  # noqa: E402
    Engine,
    EngineConfig,
    EngineError,
    LocalDevices,
    cache_root,
    resolve,
)
from pike_harness.worker.supervise.errors import InfrastructureError  # noqa: E402


class CountingDevices:
    """A DeviceProvider that hands out real gates and oracles (LocalDevices') and counts the asks,
    as a transport's own provider (one forwarding to a Ray actor) would be asked."""

    def __init__(self, inner: LocalDevices):
        self.inner, self.devices, self.quiet = inner, inner.devices, inner.quiet
        self.asked: list[str] = []
        self.closed = False

    def gate(self, device: str):
        self.asked.append(f"gate {device}")
        return self.inner.gate(device)

    def oracle(self, device: str):
        self.asked.append(f"oracle {device}")
        return self.inner.oracle(device)

    def close(self) -> None:
        self.closed = True
        self.inner.close()


def test_a_transport_gets_events_and_can_bring_its_own_devices(tmp_path, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    config = EngineConfig(jobs=1, prestart=0, build_cache="off", workdir=tmp_path / "work")
    devices = CountingDevices(LocalDevices(resolve(config, ["cpu"]), tmp_path / "reference"))
    engine = Engine(config, devices=devices)
    events: list[str] = []
    try:
        result = engine.submit(request(PLAIN), on_event=lambda event, _evaluation: events.append(event)).result(120)
        assert result.category == "correct", result.reason
        assert events == ["spawned", "loaded", "granted", "timing_start", "timing_end", "released"]
        # the oracle again for the quiet rule (its reference kept idle during the timing)
        assert devices.asked == ["oracle cpu", "gate cpu", "oracle cpu"], "the engine asks its provider"
        stats = engine.stats()
        assert stats["quiet"]["pauses"] == 1 and stats["timed"] == 1 and stats["categories"] == {"correct": 1}
        assert stats["devices"]["cpu"]["grants"] == 1
        assert engine.describe()["scheduling"]["build_cache"] is None
        with pytest.raises(InfrastructureError, match="not one of this engine's"):
            engine.submit(request(PLAIN, device="cuda:0"), fixed_device=True)
    finally:
        engine.close()
    assert devices.closed
    with pytest.raises(InfrastructureError, match="closed"):
        engine.submit(request(PLAIN))


def test_settings_it_cannot_use_are_one_line_errors(tmp_path):
    with pytest.raises(EngineError, match="--prewarm must be one of"):
        Engine(EngineConfig(device="cpu", prewarm="sometimes", workdir=tmp_path))
    with pytest.raises(EngineError, match="bad device"):
        Engine(EngineConfig(device="gpu7", workdir=tmp_path))
    config = EngineConfig.from_values({"jobs": 3, "prestart": None, "unknown": 1}, device="cpu")
    assert (config.jobs, config.prestart, config.device) == (3, None, "cpu")
    plan = resolve(config, ["cuda:0", "cuda:1"])
    assert (plan.jobs, plan.max_ready, plan.capacity) == (3, 4, 7)


def _children() -> set[int]:
    """This process's child processes, from /proc (a pre-started candidate or a reference process)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid():
                found.add(int(entry.name))
    return found


@pytest.mark.parametrize("bad", [{"check_slots": 0}, {"jobs": 0}, {"quiet_scope": "galaxy"}, {"start_slots": 0},
                                 {"cpu_order": "shortest-first"}, {"quiet_mode": "loud"},
                                 {"quiet_mode": "cores"}])  # no GPU: no core kept for timing
def test_a_bad_setting_is_refused_before_the_engine_touches_the_host(tmp_path, bad):
    """Every setting is checked (``resolve``) before the start step: a bad value starts no process
    (pre-started candidates, the reference), re-pins no core and creates no folder."""
    affinity, children = os.sched_getaffinity(0), _children()
    config = EngineConfig(device="cpu", pin_cpus=True, workdir=tmp_path / "work",
                          build_cache=str(tmp_path / "cache"), **bad)
    with pytest.raises(EngineError, match="must be|needs cores kept"):
        Engine(config)
    assert _children() == children, "no process started"
    assert os.sched_getaffinity(0) == affinity, "the pinning is unchanged"
    assert not (tmp_path / "work").exists() and not (tmp_path / "cache").exists(), "no folder created"


def test_a_relative_cache_folder_is_made_absolute(tmp_path, monkeypatch):
    """Builds run in staging folders with their own working directory: a relative root (``--build-cache
    ./cache``, ``PIKEH_CACHE_DIR=cache``) sent nvcc to a path that did not exist (seen on an H100)."""
    monkeypatch.chdir(tmp_path)
    assert cache_root("cache") == tmp_path / "cache" and (tmp_path / "cache").is_dir()
    monkeypatch.setenv("PIKEH_CACHE_DIR", "env-cache")
    assert cache_root(None) == tmp_path / "env-cache"
    assert cache_root("off") is None


SMOKE_ONE = smoke(1).source
OOM_ONCE = PLAIN.replace("    def forward(self, x):\n", '''    failed = False

    def forward(self, x):
        if not ModelNew.failed:  # the first checked call runs out of device memory, as among others' models
            ModelNew.failed = True
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
''')
OOM_ALWAYS = PLAIN.replace("    def forward(self, x):\n", '''    def forward(self, x):
        raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
''')


@pytest.fixture(scope="module")
def checking_engine(tmp_path_factory):
    """One engine with two check slots for the tests of shared checks (each start spawns the reference
    process: seconds of torch imports on a 2-core runner); each test reads its own counts as differences."""
    patch = pytest.MonkeyPatch()
    patch.setenv("OMP_NUM_THREADS", "1")
    engine = Engine(EngineConfig(device="cpu", jobs=2, prestart=0, build_cache="off", check_slots=2,
                                 workdir=tmp_path_factory.mktemp("checking") / "work"))
    yield engine
    engine.close()
    patch.undo()


def _check_counts(engine: Engine) -> tuple[int, int]:
    """(checks run alone, checks) on the CPU device so far."""
    stats = engine.stats()["devices"]["cpu"]
    return stats["alone"], stats["checks"]


def test_checks_share_the_device_but_never_a_timing_and_out_of_memory_runs_again_alone(checking_engine):
    """With check slots, candidates make their checked calls together while no one is timed; one that
    runs out of device memory among them runs the stage again alone, once (issue 19)."""
    engine = checking_engine
    alone_before, checks_before = _check_counts(engine)
    futures = [engine.submit(request(source)) for source in (PLAIN, OOM_ONCE, PLAIN, OOM_ALWAYS)]
    plain, once, plain2, always = (future.result(240) for future in futures)
    alone, checks = _check_counts(engine)
    traces = list(engine.traces)[-4:]
    assert [r.category for r in (plain, once, plain2)] == ["correct"] * 3, [r.reason for r in (plain, once, plain2)]
    assert "ran_alone" not in plain.environment
    assert once.environment["ran_alone"].startswith("correctness: ")
    assert (always.category, always.check) == ("runtime_error", "memory_limit"), always.reason
    assert always.environment["ran_alone"].startswith("correctness: "), "retried once, then judged"
    assert (alone - alone_before, checks - checks_before) == (2, 4)
    timings = [(t.timing_start, t.timing_end) for t in traces if t.timing_start is not None]
    checks = [(t.check_granted, t.checked) for t in traces if t.check_granted is not None]
    assert len(timings) == 3 and len(checks) == 4
    for start, end in checks:
        for timed_from, timed_to in timings:
            assert end <= timed_from or start >= timed_to, "a check overlapped a timing"


def test_a_reference_out_of_memory_among_checking_candidates_runs_the_check_again_alone(checking_engine):
    """The reference process shares the device with the candidates checking: an out-of-memory error
    there is no verdict and no lost evaluation; the candidate's check runs again alone."""
    import dataclasses

    reference = SMOKE_ONE.replace("    def forward(self, x):\n", '''    def forward(self, x):
        if not _FAILED:
            _FAILED.append(1)
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 920.00 MiB")
''').replace("class Model", "_FAILED = []\n\n\nclass Model")
    engine = checking_engine
    alone_before, checks_before = _check_counts(engine)
    result = engine.submit(dataclasses.replace(request(PLAIN), reference_source=reference)).result(240)
    alone, checks = _check_counts(engine)
    assert result.category == "correct", result.reason
    assert result.environment["ran_alone"].startswith("reference: ")
    assert (alone - alone_before, checks - checks_before) == (1, 1)


def _holding_reference(token: str) -> str:
    """smoke/1's reference, whose forward runs out of "device memory" while any live process has
    ``token`` in its command line: device memory held by other processes, freed when they exit
    (a zombie's command line is empty)."""
    return SMOKE_ONE.replace("    def forward(self, x):\n", f'''    def forward(self, x):
        for entry in os.listdir("/proc"):
            try:
                with open(f"/proc/{{entry}}/cmdline", "rb") as handle:
                    held = {token!r}.encode() in handle.read()
            except OSError:
                continue
            if held:
                raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
''').replace("import torch\n", "import os\nimport torch\n", 1)


def _holder(token: str) -> str:
    """PLAIN, whose constructor starts a process carrying ``token`` that lives as long as the candidate."""
    return PLAIN.replace("import torch\n", f'''import subprocess
import sys
import torch

_HOLDER = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", {token!r}])
''', 1)


def _holders(token: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if token.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except (OSError, ValueError):
            continue
    return found


def test_a_candidate_holding_the_memory_its_reference_needs_gets_the_verdict_not_the_harness(checking_engine):
    """A candidate whose processes hold the device memory its reference needs made the reference fail
    alone too: an infrastructure error, retried until the run stopped. Now the candidate's processes
    are ended and the comparison tried again: it runs, so the candidate gets ``memory_limit``, the
    engine goes on, and its processes are gone."""
    import dataclasses
    import uuid

    token = f"pikeh-holds-device-memory-{uuid.uuid4().hex}"
    engine = checking_engine
    alone_before, checks_before = _check_counts(engine)
    result = engine.submit(dataclasses.replace(request(_holder(token)),
                                               reference_source=_holding_reference(token))).result(240)
    alone, checks = _check_counts(engine)
    assert (result.category, result.check) == ("runtime_error", "memory_limit"), result.reason
    assert "ran once that process had ended" in result.reason and "Tried to allocate 2.00 GiB" in result.reason
    assert result.environment["ran_alone"].startswith("reference: ")
    assert result.environment["reference_starved"].startswith("the task's reference Model failed")
    assert (alone - alone_before, checks - checks_before) == (1, 1), "checked beside others, then alone"
    assert _holders(token) == [], "the candidate's processes were ended"
    after = engine.submit(request(PLAIN)).result(240)
    assert after.category == "correct", after.reason


def test_memory_held_outside_the_evaluation_stays_the_infrastructures_error(checking_engine):
    """The same reference while a process that is not the candidate's holds the memory: ending the
    candidate does not help, so no verdict blames it; the error is the infrastructure's (retried by
    the run loop)."""
    import dataclasses
    import subprocess
    import uuid

    token = f"pikeh-holds-device-memory-{uuid.uuid4().hex}"
    outsider = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", token])
    try:
        future = checking_engine.submit(dataclasses.replace(request(PLAIN), reference_source=_holding_reference(token)))
        with pytest.raises(InfrastructureError, match="held outside this evaluation"):
            future.result(240)
    finally:
        outsider.kill()
        outsider.wait()
