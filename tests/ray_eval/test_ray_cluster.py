"""The ray evaluator on a real two-node Ray cluster on loopback: work spreads across the nodes, each
candidate gets the verdict the worker gives everywhere, records are the worker's records, and no two
evaluations ever held one device at once."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from itertools import combinations

import pytest
from ray_cases import NO_RAY, case, ray_evaluator, ray_missing

from pike_harness.contracts.model import EvalResult

pytestmark = pytest.mark.skipif(ray_missing(), reason=NO_RAY)


@pytest.mark.slow
def test_evaluations_spread_over_nodes_with_the_workers_verdicts(make_cluster, tmp_path):
    cluster = make_cluster(head_cpus=2, nodes={"n2": 1})
    evaluator = ray_evaluator(cluster, tmp_path / "ev", devices=2, ray_placement="spread")
    try:
        cases = [case(name, nonce) for nonce, name in enumerate(
            ["ok", "slow_ok", "wrong", "raises", "broken", "ok", "slow_ok", "ok"])]
        futures = [(c, evaluator.submit(c.request)) for c in cases]
        results = [(c, f.result(timeout=600)) for c, f in futures]
        status = evaluator.status()
    finally:
        evaluator.close()

    for c, result in results:
        assert (result.category, result.check) == (c.category, c.check), (c.name, result.reason)
        assert result.request_id == c.request.request_id
        # The worker's own record, whole: it round-trips through the wire format unchanged.
        assert EvalResult.from_json(result.to_json()) == result
        assert result.environment["device"] == "cpu" and result.environment["ray"]["attempt"] == 1
    nodes = {r.environment["ray"]["node_id"] for _, r in results}
    assert len(nodes) == 2, "both nodes evaluated candidates"
    assert {d["node_id"] for d in status["devices"] if d["done"]} == nodes
    assert evaluator.duplicates == 0

    # Per-device exclusivity: the windows in which candidates held a device never overlap.
    windows = [(r.environment["ray"]["node_id"], r.environment["ray"]["granted"], r.environment["ray"]["released"])
               for _, r in results if "granted" in r.environment["ray"]]
    assert len(windows) >= 6
    for (node_a, start_a, end_a), (node_b, start_b, end_b) in combinations(windows, 2):
        if node_a == node_b:
            assert end_a <= start_b or end_b <= start_a, "two candidates held one device at once"
    # Load/compile happened before, outside, the device window.
    for _, r in results:
        ray_info = r.environment["ray"]
        if "granted" in ray_info:
            assert ray_info["load_start"] <= ray_info["loaded"] <= ray_info["granted"]


@pytest.mark.slow
def test_runs_share_devices_and_each_task_stays_on_one_host(make_cluster, tmp_path):
    """Two evaluators (two runs) on one cluster share the device actors: no device ever serves both at
    once, and with task placement each task's evaluations, from either run, go to the same node."""
    from pikeh_ray.bridge import rendezvous
    from ray_cases import SMOKE

    cluster = make_cluster(head_cpus=2, nodes={"n2": 1})
    # Each run keeps up to 2 candidates per device: together they send 4 to a device, whose engine
    # binds at most its capacity (CPU slots + loaded candidates that may wait) at once, across runs.
    first = ray_evaluator(cluster, tmp_path / "a", devices=2, ray_inflight=2)
    second = ray_evaluator(cluster, tmp_path / "b", devices=2, ray_inflight=2)
    try:
        tasks = [SMOKE.task(i) for i in range(1, 7)]
        futures = [(task.ref, evaluator.submit(task.eval_request(task.source)))
                   for task in tasks for evaluator in (first, second)]
        results = [(ref, future.result(timeout=600)) for ref, future in futures]
        names = {d["name"] for d in first.status()["devices"]}, {d["name"] for d in second.status()["devices"]}
        devices = [d for d in first.status()["devices"] if d["ready"] and not d["dead"]]
    finally:
        first.close()
        second.close()

    assert all(r.category == "correct" for _, r in results), [(ref, r.reason) for ref, r in results]
    assert names[0] == names[1] and len(names[0]) == 2, "both runs use the same two device actors"
    nodes = sorted({(d["node_id"], d["node_ip"]) for d in devices})
    for ref in {ref for ref, _ in results}:
        ran_on = {r.environment["ray"]["node_id"] for task_ref, r in results if task_ref == ref}
        assert ran_on == {rendezvous(ref, nodes)}, ref
    windows = [(r.environment["ray"]["node_id"], r.environment["ray"]["granted"], r.environment["ray"]["released"])
               for _, r in results]
    for (node_a, start_a, end_a), (node_b, start_b, end_b) in combinations(windows, 2):
        if node_a == node_b:
            assert end_a <= start_b or end_b <= start_a, "two runs held one device at once"
    # The device engine's cap holds across both runs: never more candidates bound to a device than it admits.
    limits = {d["node_id"]: d["capacity"] for d in devices}
    assert all(limit < 4 for limit in limits.values()), limits
    for node, limit in limits.items():
        spans = [(r.environment["ray"]["load_start"], r.environment["ray"]["released"]) for _, r in results
                 if r.environment["ray"]["node_id"] == node]
        most = max((sum(1 for s, e in spans if s <= t < e) for t, _ in spans), default=0)
        assert most <= limit, f"{most} candidates bound to one device, over its cap of {limit}"


def test_pikeh_eval_with_the_ray_evaluator(make_cluster, tmp_path):
    cluster = make_cluster(head_cpus=2)
    candidate = tmp_path / "cand.py"
    candidate.write_text(case("ok").request.candidate_source)
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pike_harness", "eval", str(candidate), "--task", "smoke/1", "--evaluator", "ray",
         "--ray-address", cluster.address, "--ray-node-dir", str(cluster.root / "nodes"), "--ray-build-cache",
         "off", "--device", "cpu", "--protocol", "quick", "--json"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads(proc.stdout)
    assert record["category"] == "correct" and record["runtime_ms"] > 0
    assert record["environment"]["ray"]["node_id"]
    print(f"pikeh eval on ray: {time.monotonic() - started:.1f} s")


def test_no_cluster_is_a_one_line_error(tmp_path):
    from ray_cluster import free_port

    (tmp_path / "x.py").write_text(case("ok").request.candidate_source)
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pike_harness", "eval", "x.py", "--task", "smoke/1", "--evaluator", "ray",
         "--ray-address", f"127.0.0.1:{free_port()}", "--device", "cpu"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode != 0
    assert "no Ray head answers at 127.0.0.1:" in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert time.monotonic() - started < 60


@pytest.mark.slow
def test_ray_lends_a_blocked_tasks_cpu(make_cluster, tmp_path):
    """The design relies on this Ray behaviour: a task blocked in ray.get gives its CPU to other tasks
    (so a loaded candidate waiting for its device holds no CPU slot). Checked on a 1-CPU node.

    No race with start-up times (a fresh Ray worker for ``other`` on a loaded runner took seconds): the
    sleeper the waiter waits on ends when ``other`` runs, so ``other`` starts while the waiter is blocked
    (lent) or only once the sleeper gives up at 60 s (kept); times count from the waiter's own start."""
    cluster = make_cluster(head_cpus=1)
    script = textwrap.dedent(f"""
        import os, time, ray
        ray.init(address="{cluster.address}", logging_level="ERROR", log_to_driver=False)

        @ray.remote(num_cpus=0)
        def sleeper(flag):
            deadline = time.time() + 60
            while not os.path.exists(flag) and time.time() < deadline:
                time.sleep(0.05)

        @ray.remote(num_cpus=1)
        def waiter(mode, flag):
            with open(flag + ".tmp", "w") as f:
                f.write(repr(time.time()))
            os.replace(flag + ".tmp", flag + ".began")
            ref = sleeper.remote(flag)
            if mode == "ray":
                while not ray.wait([ref], timeout=0.1)[0]:
                    pass
            else:
                time.sleep(6)

        @ray.remote(num_cpus=1)
        def other(flag):
            open(flag, "w").close()
            return time.time()

        for mode in ("ray", "sleep"):
            flag = os.path.join({str(tmp_path)!r}, mode)
            held = waiter.remote(mode, flag)
            deadline = time.time() + 120
            while not os.path.exists(flag + ".began"):  # the waiter holds the CPU before other is asked for
                assert time.time() < deadline, "the waiter never started"
                time.sleep(0.05)
            with open(flag + ".began") as f:
                began = float(f.read())
            started = ray.get(other.remote(flag)) - began
            ray.get(held)
            print(mode, round(started, 2), flush=True)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    starts = dict(line.split() for line in proc.stdout.split("\n") if line.strip())
    # Lent: other starts once a worker process is up, well before 30 s however loaded the runner. Kept: other
    # waits for the waiter, which waits for the sleeper's 60 s.
    assert float(starts["ray"]) < 30, "a task blocked in ray.wait kept its CPU"
    assert float(starts["sleep"]) >= 5.5, "the control: a sleeping task keeps its CPU"
