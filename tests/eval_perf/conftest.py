"""Fixtures for Evaluator II's tests: real local evaluators on the CPU, with their own caches."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def make_local(tmp_path_factory):
    """``make_local(**extra)`` builds a CPU LocalEvaluator (quick protocol, its own build cache);
    every one made is closed when the module ends."""
    from pikeh_local import LocalEvaluator

    from pike_harness.contracts.evaluation import EvaluatorOptions

    made = []
    saved = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"

    def make(protocol: str = "quick", **extra):
        root = tmp_path_factory.mktemp("local")
        extra.setdefault("build_cache", str(root / "cache"))
        evaluator = LocalEvaluator(EvaluatorOptions(device="cpu", protocol=protocol, workdir=root / "work",
                                                    config=LocalEvaluator.Config(**extra)))
        made.append(evaluator)
        return evaluator

    yield make
    for evaluator in made:
        evaluator.close()
    if saved is None:
        os.environ.pop("OMP_NUM_THREADS", None)
    else:
        os.environ["OMP_NUM_THREADS"] = saved
