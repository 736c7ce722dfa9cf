"""The smoke suite is what demos and CPU tests use: every reference must be small and well-behaved."""

from __future__ import annotations

import time

import pytest
import torch

from pike_harness.host.plugins import PluginHost
from pike_harness.worker.inside.loading import build_model, init_inputs, load_source, make_inputs, model_class


def _smoke_tasks():
    host = PluginHost()
    return host.get("suites", "smoke").tasks()


@pytest.mark.parametrize("task", _smoke_tasks(), ids=lambda t: t.name)
def test_reference_is_fast_and_informative(task):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        module = load_source(task.source, f"smoke_ref_{task.id}")
        model = build_model(model_class(module, ("Model",)), init_inputs(module), weight_seed=1, device="cpu")
        with torch.no_grad():
            x0 = make_inputs(module, 0)
            y0 = model(*x0)
            # CPU time of this thread (torch runs on it with one thread), not wall time: a loaded
            # machine may deschedule the test for longer than the bound without the model being slow.
            start = time.thread_time()
            for _ in range(3):
                model(*x0)
            per_call_ms = (time.thread_time() - start) / 3 * 1000
            y1 = model(*make_inputs(module, 1))
    finally:
        torch.set_num_threads(threads)
    assert per_call_ms < 50, f"{task.name} takes {per_call_ms:.1f} ms on one core"
    assert torch.isfinite(y0).all()
    assert y0.abs().max() > task.meta.atol, "outputs all inside atol: a zero answer would pass"
    assert not torch.allclose(y0, y1, atol=task.meta.atol, rtol=task.meta.rtol), "output ignores input"
