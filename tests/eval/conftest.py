"""Fixtures for the evaluator tests: one CPU evaluator per session, and the whole CPU corpus
evaluated once, concurrently, so each corpus test only reads its result."""

from __future__ import annotations

import os
import secrets
import time

import pytest
from corpus_cases import cases

SECRET_NAME = "PIKEH_TEST_API_KEY"


@pytest.fixture(scope="session")
def secret_value() -> str:
    return "sk-test-" + secrets.token_hex(16)


@pytest.fixture(scope="session")
def cpu_evaluator(tmp_path_factory, secret_value):
    """A real local evaluator on the CPU with the `quick` protocol; a fake API key in its environment."""
    from pikeh_local import LocalEvaluator

    from pike_harness.contracts.evaluation import EvaluatorOptions

    saved = {name: os.environ.get(name) for name in (SECRET_NAME, "OMP_NUM_THREADS")}
    os.environ[SECRET_NAME] = secret_value
    os.environ["OMP_NUM_THREADS"] = "1"  # small tensors on a shared 2-core runner: threads only contend
    workdir = tmp_path_factory.mktemp("evaluator")
    evaluator = LocalEvaluator(EvaluatorOptions(device="cpu", protocol="quick", workdir=workdir,
                                                extra={"jobs": 4}))
    yield evaluator
    evaluator.close()
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="session")
def corpus_results(cpu_evaluator):
    """Every CPU corpus candidate evaluated once, all submitted together: name -> (case, result, seconds)."""
    started = time.monotonic()
    all_cases = cases()
    futures = {case.name: (case, cpu_evaluator.submit(case.request())) for case in all_cases}
    results = {name: (case, future.result(timeout=600)) for name, (case, future) in futures.items()}
    print(f"\ncorpus: {len(results)} candidates in {time.monotonic() - started:.1f} s")
    return results
