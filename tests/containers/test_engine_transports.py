"""Issue 14's acceptance test: one engine behind every evaluator, so the transport never changes a verdict.

The same eight candidates (honest and hostile, from tests/eval/corpus) go through ``local`` (the
engine in this process) and ``queue`` (the engine in a real worker subprocess on a temporary folder),
and must get the same verdicts, and the engines' figures must show the same conditions: the same
settings, the same build-cache hits and misses (one build, then a hit for the repeat), one quiet
period per timing, the same warm-ups. ``ray`` runs the engine in its device actor on a real Ray
head on loopback (skipped where Ray is not installed).
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

import pytest
from queue_helpers import WorkerProcess

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "eval"))

from corpus_cases import CORPUS, load_case  # noqa: E402

from pike_harness.contracts.evaluation import EvaluatorOptions  # noqa: E402

pytestmark = pytest.mark.slow

CANDIDATES = ("ok_plain", "ok_static_buffer", "ok_load_inline_cpu", "wrong_values", "seed_specialisation",
              "timer_patch", "calls_reference", "input_mutation")
REPEAT = "ok_load_inline_cpu"  # evaluated again once the first wave is done: a build-cache hit
SAME_SETTINGS = ("cpu_slots", "max_ready", "prestart_per_device", "prewarm", "quiet_timing", "quiet_scope",
                 "timing_cpus", "jit_cache")


def _cases():
    return [load_case(CORPUS / f"{name}.py") for name in CANDIDATES]


def _evaluate(evaluator) -> dict[str, tuple[str, str | None]]:
    """The eight candidates at once, then the repeat: name -> (category, check); and under "isolation"
    the candidate isolations the results name (the same sandbox whatever the transport)."""
    cases = _cases()
    futures = {case.name: evaluator.submit(case.request()) for case in cases}
    verdicts: dict = {}
    isolations = set()
    for name, future in futures.items():
        result = future.result(timeout=600)
        verdicts[name] = (result.category, result.check)
        isolations.add(result.isolation)
    verdicts["isolation"] = sorted(isolations)
    repeat = next(case for case in cases if case.name == REPEAT)
    again = evaluator.submit(repeat.request()).result(timeout=600)
    verdicts[f"{REPEAT} (again)"] = (again.category, again.check)
    return verdicts


def run_local(tmp_path: Path) -> tuple[dict, dict, dict]:
    from pikeh_local import LocalEvaluator

    evaluator = LocalEvaluator(EvaluatorOptions(device="cpu", protocol="quick", workdir=tmp_path / "local",
                                                config=LocalEvaluator.Config(build_cache=str(tmp_path / "local-cache"))))
    try:
        verdicts = _evaluate(evaluator)
        return verdicts, evaluator.describe()["scheduling"], evaluator.stats()
    finally:
        evaluator.close()


def run_queue(tmp_path: Path) -> tuple[dict, dict, dict]:
    from pikeh_queue import QueueEvaluator

    io_dir = tmp_path / "io"
    env = {"PIKEH_CACHE_DIR": str(tmp_path / "queue-cache")}  # the worker's engine: a fresh build cache too
    with WorkerProcess(io_dir, tmp_path / "worker.log", "--workdir", str(tmp_path / "worker"), worker_id="engine",
                       env=env) as worker:
        worker.wait_ready()
        evaluator = QueueEvaluator(EvaluatorOptions(protocol="quick",
                                                    config=QueueEvaluator.Config(io_dir=str(io_dir))))
        try:
            verdicts = _evaluate(evaluator)
            stats = evaluator.stats()["workers"]["engine"]
        finally:
            evaluator.close()
        return verdicts, stats["engine"], stats["stats"]


def run_ray(tmp_path: Path) -> tuple[dict, dict, dict]:
    """A real Ray head on loopback (as tests/ray_eval starts it) with one device: the verdicts come
    through RayEvaluator, the settings and figures from the device actor's engine."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ray_eval"))
    from ray_cases import NO_RAY, kill_leftovers, ray_missing, ready_devices, wait_until

    if ray_missing():
        pytest.skip(NO_RAY)
    from pikeh_ray import RayConfig
    from pikeh_ray.evaluator import RayEvaluator
    from ray_cluster import LoopbackCluster

    cluster = LoopbackCluster()
    try:
        cluster.start_head(cpus=2)
        evaluator = RayEvaluator(EvaluatorOptions(device="cpu", protocol="quick", workdir=tmp_path / "ray", config=RayConfig(
            ray_address=cluster.address, ray_node_dir=str(cluster.root / "nodes"),
            ray_build_cache=str(tmp_path / "ray-cache"))))  # the actor's engine: a fresh build cache too
        try:
            wait_until(lambda: len(ready_devices(evaluator)) >= 1, 120, "the device actor")
            verdicts = _evaluate(evaluator)
            (device,) = evaluator.stats()["devices"].values()
        finally:
            evaluator.close()
    finally:
        cluster.stop()
        kill_leftovers(cluster.root)
        shutil.rmtree(cluster.root, ignore_errors=True)
    return verdicts, device["engine"], device["stats"]


TRANSPORTS = {"queue": run_queue, "ray": run_ray}


@pytest.fixture(scope="module")
def through_local(tmp_path_factory):
    saved = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        return run_local(tmp_path_factory.mktemp("local"))
    finally:
        if saved is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = saved


def test_local_gives_the_corpus_verdicts(through_local):
    verdicts, _, stats = through_local
    for case in _cases():
        assert verdicts[case.name] == (case.category, case.check), case.name
    assert verdicts[f"{REPEAT} (again)"] == verdicts[REPEAT]
    assert verdicts["isolation"] == ["bwrap"]
    assert stats["build_cache"]["misses"] == 1 and stats["build_cache"]["hits"] == 1, stats["build_cache"]
    assert stats["quiet"]["pauses"] == stats["timed"] > 0, "every timing ran quiet"


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_every_transport_judges_like_local(transport, through_local, tmp_path):
    local_verdicts, local_settings, local_stats = through_local
    began = time.monotonic()
    verdicts, settings, stats = TRANSPORTS[transport](tmp_path)
    assert verdicts == local_verdicts, f"{transport} after {time.monotonic() - began:.0f} s"
    # the same engine settings (the build cache's folder differs: each has its own, fresh)
    assert {k: settings[k] for k in SAME_SETTINGS} == {k: local_settings[k] for k in SAME_SETTINGS}
    assert settings["build_cache"] is not None
    # the same conditions: one build and one hit, a quiet period per timing, the same warm-ups
    for key in ("hits", "misses", "failures", "fallbacks"):
        assert stats["build_cache"][key] == local_stats["build_cache"][key], (key, stats["build_cache"])
    for key in ("evaluations", "timed", "warmed", "categories"):
        assert stats[key] == local_stats[key], key
    assert stats["quiet"]["pauses"] == local_stats["quiet"]["pauses"] == stats["timed"]
    assert stats["devices"]["cpu"]["grants"] == local_stats["devices"]["cpu"]["grants"]
