"""The evaluation engine used directly, as a transport does: its events, and devices it is given."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perf_helpers import PLAIN, request  # noqa: E402

from pike_harness.worker.supervise.engine import Engine, EngineConfig, EngineError, LocalDevices, cache_root  # noqa: E402
from pike_harness.worker.supervise.errors import InfrastructureError  # noqa: E402
from pike_harness.worker.supervise.scheduling import QuietRegistry  # noqa: E402


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
    devices = CountingDevices(LocalDevices(["cpu"], tmp_path / "reference", quiet=QuietRegistry(host_wide=True)))
    engine = Engine(EngineConfig(jobs=1, prestart=0, build_cache="off", workdir=tmp_path / "work"), devices=devices)
    events: list[str] = []
    try:
        result = engine.submit(request(PLAIN), on_event=lambda event, _evaluation: events.append(event)).result(120)
        assert result.category == "correct", result.reason
        assert events == ["spawned", "loaded", "granted", "timing_start", "timing_end", "released"]
        assert devices.asked == ["oracle cpu", "gate cpu"], "the engine asks its provider, not its own devices"
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
    assert config.slots(["cuda:0", "cuda:1"]) == (3, 4)


def test_a_relative_cache_folder_is_made_absolute(tmp_path, monkeypatch):
    """Builds run in staging folders with their own working directory: a relative root (``--build-cache
    ./cache``, ``PIKEH_CACHE_DIR=cache``) sent nvcc to a path that did not exist (seen on an H100)."""
    monkeypatch.chdir(tmp_path)
    assert cache_root("cache") == tmp_path / "cache" and (tmp_path / "cache").is_dir()
    monkeypatch.setenv("PIKEH_CACHE_DIR", "env-cache")
    assert cache_root(None) == tmp_path / "env-cache"
    assert cache_root("off") is None
