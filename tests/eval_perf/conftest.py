"""Fixtures for Evaluator II's tests: real local evaluators on the CPU, with their own caches."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def make_local(tmp_path_factory):
    """``make_local(**extra)`` builds a CPU LocalEvaluator (quick protocol, its own build cache);
    ``make_local(shared=True, **extra)`` gives the one already built with the same options, for tests that
    only need an engine of that shape (each start sweeps, pins and pre-starts processes: seconds of
    torch imports on a 2-core runner); every one made is closed when the module ends."""
    from pikeh_local import LocalEvaluator

    from pike_harness.contracts.evaluation import EvaluatorOptions

    made = []
    shared_ones: dict[tuple, object] = {}
    saved = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"

    def make(protocol: str = "quick", shared: bool = False, **extra):
        key = (protocol, tuple(sorted(extra.items())))
        if shared and key in shared_ones:
            return shared_ones[key]
        root = tmp_path_factory.mktemp("local")
        extra.setdefault("build_cache", str(root / "cache"))
        evaluator = LocalEvaluator(EvaluatorOptions(device="cpu", protocol=protocol, workdir=root / "work",
                                                    config=LocalEvaluator.Config(**extra)))
        made.append(evaluator)
        if shared:
            shared_ones[key] = evaluator
        return evaluator

    yield make
    for evaluator in made:
        evaluator.close()
    if saved is None:
        os.environ.pop("OMP_NUM_THREADS", None)
    else:
        os.environ["OMP_NUM_THREADS"] = saved
