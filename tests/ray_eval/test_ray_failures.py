"""Failures of the cluster, never of the candidate: a node killed mid-run and a cluster that goes away
and comes back. Every submitted evaluation ends exactly once, as a verdict or as EvaluatorError."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pytest
from ray_cases import NO_RAY, case, leftovers, ray_evaluator, ray_missing, wait_until

from pike_harness.contracts.evaluation import EvaluatorError

pytestmark = pytest.mark.skipif(ray_missing(), reason=NO_RAY)


def _orphan(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read().decode("ascii", errors="replace")
    except OSError:
        return False
    return raw[raw.rfind(")") + 2:].split()[1] == "1"


def _zombie(pid: int) -> bool:
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat", "rb") as handle:
        raw = handle.read().decode("ascii", errors="replace")
        return raw[raw.rfind(")") + 2:].split()[0] in ("Z", "X")
    return True


@pytest.mark.slow
def test_node_killed_mid_run_loses_and_duplicates_nothing(make_cluster, tmp_path):
    cluster = make_cluster(head_cpus=2, nodes={"n2": 2})
    evaluator = ray_evaluator(cluster, tmp_path / "ev", devices=2, ray_inflight=3, ray_placement="spread")
    try:
        names = ["slow_ok", "ok", "wrong", "slow_ok", "raises", "ok", "slow_ok", "broken", "ok", "slow_ok"]
        cases = [case(name, nonce) for nonce, name in enumerate(names)]
        futures = [(c, evaluator.submit(c.request)) for c in cases]

        def busy_second_node() -> bool:
            devices = evaluator.status().get("devices", [])
            return any(not d["head"] and d["inflight"] >= 2 and d["ready"] for d in devices)

        wait_until(busy_second_node, 240, "evaluations in flight on the second node")
        killed_at = time.monotonic()
        cluster.kill_raylet("n2")
        results = []
        for c, future in futures:
            results.append((c, future.result(timeout=600)))  # the head survives: every one gets a verdict
        recovered_s = time.monotonic() - killed_at
        # The head retries what the dead node held as soon as its calls fail; the device is marked dead
        # when Ray reports the node gone (its own health check), which can come after the last verdict.
        wait_until(lambda: any(d["dead"] and not d["head"] for d in evaluator.status().get("devices", [])), 120,
                   "the dead node's device marked dead")
        status = evaluator.status()
    finally:
        evaluator.close()

    for c, result in results:
        assert (result.category, result.check) == (c.category, c.check), (c.name, result.reason)
        assert result.request_id == c.request.request_id
    assert len({r.request_id for _, r in results}) == len(cases)
    assert evaluator.duplicates == 0
    retried = [r for _, r in results if r.environment["ray"]["attempt"] > 1]
    assert retried, "the evaluations in flight on the killed node were run again"
    head = {d["node_id"] for d in status["devices"] if d["head"]}
    assert all(r.environment["ray"]["node_id"] in head for r in retried)
    assert any(d["dead"] and not d["head"] for d in status["devices"]), "the dead node's device is dropped"
    print(f"\nnode killed: {len(retried)} evaluation(s) retried on the head; all done {recovered_s:.1f} s later")
    # What the dead node left (candidates and its reference process, orphaned when its workers died
    # with the raylet) is swept up by the live device actor on the same host.
    wait_until(lambda: not [pid for pid in leftovers(cluster.root / "nodes") if _orphan(pid)], 30,
               "orphaned processes of the dead node to be gone")


@pytest.mark.slow
def test_cluster_gone_then_back(make_cluster, tmp_path):
    cluster = make_cluster(head_cpus=2)
    evaluator = ray_evaluator(cluster, tmp_path / "ev", devices=1)
    try:
        first = evaluator.submit(case("ok").request).result(timeout=300)
        assert first.category == "correct"
        # What the actor's check of a lost node rests on: Ray's raylet is its worker's parent.
        actor_pid = first.environment["ray"]["pid"]
        parent = int(next(line.split()[1] for line in Path(f"/proc/{actor_pid}/status").read_text().splitlines()
                          if line.startswith("PPid:")))
        assert "raylet" in Path(f"/proc/{parent}/cmdline").read_bytes().decode(errors="replace")
        in_flight = [evaluator.submit(case("slower_ok", n).request) for n in range(1, 4)]
        wait_until(lambda: evaluator.status().get("running", 0) >= 1, 60, "an evaluation in flight")
        lost_at = time.monotonic()
        cluster.kill_all()
        for future in in_flight:  # infrastructure errors, promptly; never a verdict on the candidate
            # The kill may reach a sandboxed candidate before its device actor: the actor, seeing its raylet
            # gone, reports the node's failure rather than a candidate killed by SIGKILL.
            with pytest.raises(EvaluatorError, match="(?i)ray"):
                future.result(timeout=120)
        noticed_s = time.monotonic() - lost_at
        assert noticed_s < 30, f"the lost cluster was noticed only after {noticed_s:.0f} s"

        began = time.monotonic()
        with pytest.raises(EvaluatorError, match="no Ray head answers"):
            evaluator.submit(case("ok", 9).request).result(timeout=120)
        assert time.monotonic() - began < 20, "a submission while the cluster is away fails at once"

        cluster.start_head(cpus=2)  # the cluster comes back at the same address
        time.sleep(3.5)  # past the evaluator's pause between reconnection attempts
        result = evaluator.submit(case("ok", 10).request).result(timeout=300)
        assert result.category == "correct"
        assert evaluator.bridges_started >= 2 and evaluator.duplicates == 0
        print(f"\ncluster loss noticed in {noticed_s:.1f} s; evaluations resumed once it was back")
    finally:
        evaluator.close()


@pytest.mark.slow
def test_run_stops_when_the_cluster_goes_and_resumes_when_it_is_back(make_cluster, tmp_path):
    """`pikeh run --evaluator ray`: the cluster dies mid-run, the run stops with the rerun message and
    a consistent journal; rerun with the cluster back, it finishes with every attempt judged once."""
    import os
    import subprocess
    import sys

    from pike_harness.host.store import read_journal

    cluster = make_cluster(head_cpus=2)
    out = tmp_path / "runs"
    command = [sys.executable, "-m", "pike_harness", "run", "--strategy", "best-of-n", "--suite", "smoke",
               "--tasks", "1", "--llm", "offline:mutate", "--query-budget", "6", "--parallel", "3",
               "--max-fix-attempts", "0", "--evaluator", "ray", "--ray-address", cluster.address,
               "--ray-node-dir", str(cluster.root / "nodes"), "--ray-build-cache", "off", "--device", "cpu",
               "--protocol", "quick", "--output-dir", str(out), "--run-name", "r"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    journal_path = out / "r" / "journal.jsonl"

    def events(kind: str) -> list[dict]:
        return [e for e in read_journal(journal_path) if e["type"] == kind] if journal_path.exists() else []

    first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # Kill the cluster once the baseline and one candidate are judged and more are being evaluated.
        wait_until(lambda: len(events("eval")) >= 2 and len(events("eval_start")) > len(events("eval")), 400,
                   "evaluations in flight")
        cluster.kill_all(spare=(first.pid,))
        stdout_text, stderr = first.communicate(timeout=300)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode != 0
    assert "rerun the same command to resume" in stderr, (first.returncode, stderr[-3000:], stdout_text[-3000:])
    judged_before = len(events("eval"))

    cluster.start_head(cpus=2)
    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stderr[-3000:]
    attempts = events("attempt")
    assert len({e["key"] for e in attempts}) == len(attempts) == 6  # none lost, none doubled
    assert all(e["category"] in ("correct", "incorrect", "compile_error", "runtime_error", "rejected", "timeout")
               for e in attempts)
    assert not any(e.get("check") == "interrupted" for e in attempts)
    evals = events("eval")
    assert len({e["key"] for e in evals}) == len(evals) > judged_before
    assert [e["status"] for e in events("run_end")][-1] == "complete"


@pytest.mark.slow
def test_an_evaluation_stuck_past_its_deadline_is_retried_then_failed(make_cluster, tmp_path):
    """A live node's evaluation may run only for its stage limits plus a grace: past that the device
    actor aborts it in its engine, and the bridge retries it under the one retry policy, then reports
    an infrastructure error that says how many tries were spent (so the run loop adds none).

    The grace is set far below zero, so the deadline (4 s) falls inside the load stage's own limit:
    the candidate, blocked in loading while a gate file exists, is what overruns it; the device
    actor's engine aborts it (its process is killed)."""
    import dataclasses

    from pike_harness.contracts.evaluation import EvalRetryPolicy
    from pike_harness.worker.supervise.liveness import hold_deadline_s

    gate = tmp_path / "gate"
    gate.touch()
    pids = tmp_path / "pids"  # each candidate process writes its pid here, then waits at the gate
    stuck = case("ok")
    wait = (f"import os\nimport time\n\nwith open({str(pids)!r}, 'a') as _f:\n    _f.write(f'{{os.getpid()}}\\n')\n"
            f"_deadline = time.time() + 120\nwhile os.path.exists({str(gate)!r}) "
            f"and time.time() < _deadline:\n    time.sleep(0.05)\n")
    stuck_request = dataclasses.replace(stuck.request, candidate_source=wait + stuck.request.candidate_source)
    cluster = make_cluster(head_cpus=2)
    # Unsandboxed: the test follows the candidates through their host pids in a host file, which a
    # sandboxed candidate can neither know nor write (the abort of a sandboxed one: test_queue_worker).
    evaluator = ray_evaluator(cluster, tmp_path / "ev", devices=1, ray_retries=1, unsafe_no_sandbox=True,
                              ray_hold_grace=4.0 - hold_deadline_s(stuck.request.limits, grace_s=0.0))
    try:
        assert evaluator.retry_policy == EvalRetryPolicy(max_attempts=2)
        started = time.monotonic()
        with pytest.raises(EvaluatorError) as caught:
            evaluator.submit(stuck_request).result(timeout=110)
        took = time.monotonic() - started
    finally:
        gate.unlink()
        evaluator.close()
    assert caught.value.attempts == 2, str(caught.value)
    assert "2 attempts failed" in str(caught.value)
    assert took < 100, "held until the candidate gave up waiting, not until its deadline"

    started_pids = [int(line) for line in pids.read_text().split()]
    assert len(started_pids) == 2, "one candidate process per attempt"

    def candidates() -> list[int]:
        return [pid for pid in started_pids if os.path.exists(f"/proc/{pid}") and not _zombie(pid)]

    wait_until(lambda: not candidates(), 30, "the stuck candidates to be killed")
