"""Real worker processes (`python -m pike_harness.worker.supervise.service`) on the CPU, fed through the folder:
many requests at once over two workers, a worker killed mid-request and restarted, a clean stop.
Every result must arrive exactly once, for the request that asked for it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

from queue_helpers import CORRECT, INCORRECT, NO_POOL, WorkerProcess, gated, heartbeat, request, worker_env

from pike_harness.worker import queue_channel as qc
from pike_harness.worker.queue_client import QueueClient


def wait_until(condition, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not met after {timeout} s")
        time.sleep(0.02)


def test_many_concurrent_requests_over_two_workers_arrive_once_each(shared_queue):
    io_dir, workers = shared_queue
    qdir = qc.QueueDir(io_dir)
    # 30 s, not 5: a live worker whose heartbeat stalls on a loaded runner must not be judged dead (its
    # claims given back and evaluated twice); a dead one on this machine is known at once by its pid.
    client = QueueClient(io_dir, stale_after_s=30)

    def done_here() -> int:
        """The workers' `done` lines for this client's requests only (the shared workers also log those
        of other tests' sessions, some as `done ..., but its host has gone`)."""
        return sum(len(re.findall(rf" done \d+-{client.session}-\d+: ", w.log())) for w in workers)

    try:
        requests = [request(CORRECT if i % 2 == 0 else INCORRECT) for i in range(6)]
        futures = [client.submit(r) for r in requests]
        results = [f.result(timeout=240) for f in futures]
        stats = dict(client.stats)
    finally:
        client.close()
    for req, result in zip(requests, results, strict=True):
        assert result.request_id == req.request_id
        expected = "correct" if req.candidate_source == CORRECT else "incorrect"
        assert result.category == expected, (result.check, result.reason, result.stderr_tail[-2000:])
    served_by = {r.environment["worker"]["id"] for r in results}
    assert served_by == {"shared-a", "shared-b"}, "both workers take work from one folder"
    assert stats["results"] == 6 and stats["stale"] == 0 and stats["forged"] == 0
    # A worker writes the result, then logs `done`, then deletes its claim: a future resolves before the
    # last two, so wait for them (a slow worker thread on a loaded runner) before counting.
    wait_until(lambda: done_here() >= 6 and all(qc.names(qdir.claimed / w.worker_id) == [] for w in workers),
               60, "the workers to log `done` and drop their claims")
    assert done_here() == 6, "each request evaluated once"
    assert qc.names(qdir.requests) == [] and qc.names(qdir.results) == []
    assert all(heartbeat(io_dir, w.worker_id)["max_active"] == 2 for w in workers)
    # `--prestart 0` reaches each worker's engine: none keeps a pool, no candidate got a pre-started process
    for w in workers:
        figures = json.loads((io_dir / "workers" / f"{w.worker_id}.engine-stats").read_text())
        assert figures["engine"]["prestart_per_device"] == 0, figures["engine"]
    assert not any(r.environment.get("prestarted") for r in results)


def test_worker_killed_mid_request_and_restarted_loses_and_duplicates_nothing(tmp_path, visible_tmp):
    io_dir = tmp_path / "io"
    # killed: its workdir stays behind, here
    first = WorkerProcess(io_dir, tmp_path / "first.log", "--max-active", "3", *NO_POOL,
                          "--workdir", str(tmp_path / "first"), worker_id="restartable").wait_ready()
    # wait_for_worker_s runs from the kill: the second worker must import torch and beat within it (slow
    # on a loaded runner), or every future fails. stale_after_s: see the test above.
    client = QueueClient(io_dir, stale_after_s=30, wait_for_worker_s=300)
    second = None
    try:
        gate = visible_tmp / "gate"
        gate.touch()
        requests = [request(gated(CORRECT, gate)) for _ in range(3)]
        futures = [client.submit(r) for r in requests]
        wait_until(lambda: len(first.claimed()) == 3 and first.log().count(" took ") == 3, what="all three taken")
        tickets = {name.split(".")[0] for name in first.claimed()}
        epoch_before = heartbeat(io_dir, "restartable")["epoch"]  # whoever gives the claims back removes it
        first.kill()
        gate.unlink()
        # The client may give the dead worker's claims back (one rename each) at any moment from
        # here on, so look in claimed/ first, then in requests/: a claim renamed between the two
        # reads is seen in the second, and nothing else moves them while no worker runs.
        held = {name.split(".")[0] for name in first.claimed()}
        held |= {name.split(".")[0] for name in qc.names(io_dir / "requests")}
        assert held == tickets and not any(f.done() for f in futures)

        second = WorkerProcess(io_dir, tmp_path / "second.log", "--max-active", "3", *NO_POOL, worker_id="restartable")
        results = [f.result(timeout=240) for f in futures]
        # The worker logs `done` and deletes its claim after the result the future got: wait for both,
        # so the count is complete and no old claim is taken for the new one below.
        wait_until(lambda: second.log().count(" done ") >= 3 and not second.claimed(), 60, "the `done` lines")
        log = second.log()
        # Whoever noticed the death first (the restarted worker, or the host's client, which sees the
        # same machine's dead pid at once) gave the three back, counting one attempt each.
        by_worker = sum(int(n) for n in re.findall(
            r"gave back (\d+) request\(s\) an earlier worker restartable held when it died", log))
        assert by_worker + client.stats["given_back"] == 3, log
        assert len(re.findall(r"took \S+ \(test/relu-scale, attempt 2\)", log)) == 3, log
        for req, result in zip(requests, results, strict=True):
            assert result.request_id == req.request_id and result.category == "correct", result.reason
            assert result.environment["worker"]["epoch"] not in (None, epoch_before)
        assert client.stats["results"] == 3 and client.stats["stale"] == 0
        assert log.count(" done ") == 3, "each request evaluated once more, not twice"

        # A clean stop (SIGTERM) gives an unfinished request back without counting an attempt.
        gate.touch()
        future = client.submit(request(gated(CORRECT, gate)))
        wait_until(lambda: len(second.claimed()) == 1, what="claim")
        assert second.stop() == 0
        pending = qc.names(io_dir / "requests")
        assert len(pending) == 1 and pending[0].endswith(".a0.json"), pending
        assert not future.done()
    finally:
        client.close()
        first.stop()
        if second is not None:
            second.stop()
    assert qc.names(io_dir / "requests") == [] and qc.names(io_dir / "workers") == []


def test_a_live_worker_id_cannot_be_taken_twice(shared_queue, tmp_path):
    io_dir, _workers = shared_queue
    proc = subprocess.run([sys.executable, "-m", "pike_harness.worker.supervise.service", "--io-dir", str(io_dir),
                           "--device", "cpu", "--worker-id", "shared-a"], capture_output=True, text=True,
                          env=worker_env(), timeout=120)
    assert proc.returncode == 2
    assert "worker id shared-a is in use by process" in proc.stderr and "--worker-id" in proc.stderr


def test_a_result_that_cannot_be_written_is_given_back_not_held_forever(tmp_path, visible_tmp):
    """The worker cannot write into results/ (here it is a file, not a folder): each try gives the
    request back as an attempt, so the host gets an answer (given up) instead of waiting forever."""
    io_dir = tmp_path / "io"
    worker = WorkerProcess(io_dir, tmp_path / "worker.log", *NO_POOL, worker_id="blocked").wait_ready()
    # 30 s: a live worker judged dead by a stalled heartbeat would have its claim given back by the host,
    # a try the worker does not log.
    client = QueueClient(io_dir, stale_after_s=30, wait_for_worker_s=60)
    qdir = qc.QueueDir(io_dir)
    try:
        gate = visible_tmp / "gate"
        gate.touch()
        future = client.submit(request(gated(CORRECT, gate)))
        wait_until(lambda: qc.names(qdir.claimed / "blocked"), what="the request to be claimed")
        qdir.results.path.rmdir()
        qdir.results.path.write_text("not a folder")
        gate.unlink()
        result = future.result(timeout=180)
        # The third `given back` line is logged after the rename to failed/ that resolved the future:
        # wait for it before the SIGKILL below, which would lose it.
        wait_until(lambda: worker.log().count("given back") >= 3, 60, "the third `given back` line")
    finally:
        try:
            client.close()
        finally:
            worker.popen.kill()
            worker.popen.wait()
    assert (result.category, result.check) == ("runtime_error", "worker_lost")
    assert worker.log().count("given back") == 3, worker.log()[-3000:]


def test_a_deleted_host_file_is_written_again(tmp_path):
    """Workers drop the requests of a session without a host file; the client puts it back."""
    client = QueueClient(tmp_path / "io", wait_for_worker_s=60)
    try:
        host_file = qc.QueueDir(tmp_path / "io").hosts / f"{client.session}.json"
        host_file.unlink()
        wait_until(host_file.exists, timeout=10, what="the host file to be written again")
    finally:
        client.close()
    assert not host_file.exists(), "closing still says goodbye"


def test_a_request_held_past_its_deadline_is_given_back_counted(tmp_path, visible_tmp):
    """A live worker may hold a request only for its stage limits plus a grace; past that the worker
    gives it back as an attempt (here the last one, so it is given up) and kills the evaluation.

    The worker runs in this process with its grace set far below zero, so the deadline (2 s) falls
    inside the load stage's own (600 s) limit: the candidate, blocked in loading, is what overruns it."""
    import threading

    from pike_harness.worker.records import Limits
    from pike_harness.worker.supervise.engine import EngineConfig
    from pike_harness.worker.supervise.liveness import hold_deadline_s
    from pike_harness.worker.supervise.service import ServiceConfig, WorkerService

    io_dir = tmp_path / "io"
    # The candidate would hold its request for 600 s (its gate, within a 600 s load limit); the deadline
    # gives it back 2 s after its process started. `took` also covers starting that process (importing
    # torch in a sandbox: a minute or more on a loaded runner), hence a 180 s bound (the result's timeout),
    # still far below the 600 s of a request held until the candidate gave up waiting.
    hold_s = 600
    limits = Limits(compile_timeout_s=hold_s, run_timeout_s=60, memory_mb=4096)
    # No pre-started processes (NO_POOL): they would import torch alongside the candidate's own start.
    # stale_after_s 30 (not 5): a stalled heartbeat must not give the request back instead of the deadline.
    service = WorkerService(ServiceConfig(io_dir=io_dir, device="cpu", worker_id="slow", heartbeat_s=0.2,
                                          stale_after_s=30, max_attempts=1, engine=EngineConfig(prestart=0),
                                          hold_grace_s=2.0 - hold_deadline_s(limits, grace_s=0.0)))
    thread = threading.Thread(target=service.run, daemon=True)
    thread.start()
    client = QueueClient(io_dir, stale_after_s=30, wait_for_worker_s=300, max_attempts=1)
    gate = visible_tmp / "gate"
    gate.touch()
    try:
        started = time.monotonic()
        result = client.submit(request(gated(CORRECT, gate, longest_s=hold_s), limits=limits)).result(timeout=180)
        took = time.monotonic() - started
    finally:
        gate.unlink()
        client.close()
        service.stop()
        thread.join(timeout=30)
    assert (result.category, result.check) == ("runtime_error", "worker_lost"), result
    assert "deadline" in result.reason
    assert took < hold_s / 2, "held until the candidate gave up waiting, not until its deadline"
    assert not thread.is_alive()


def test_a_restart_waits_out_a_predecessors_unreadable_heartbeat(tmp_path):
    """A worker restarted under an id whose heartbeat cannot be read (caught mid-write on a shared
    file system) does not take the predecessor's claims at once: an unreadable heartbeat is no
    news, so it waits for the whole --stale-after window first."""
    io_dir = tmp_path / "io"
    qdir = qc.QueueDir(io_dir).ensure()
    ticket = qc.new_ticket("abcdef0123", 1)
    qdir.claim_folder("flaky").path.mkdir()
    qc.write_json(qdir.claimed / "flaky", qc.request_name(ticket, 0), {"ticket": ticket})
    (qdir.workers / "flaky.json").write_text('{"protocol": "pikeh-queue/1", "worker_id": "fla')
    # A 10 s window (not 2): the "released at once" check below must not lose to a stall of this
    # process between seeing the log line and listing the folder on a loaded runner.
    worker = WorkerProcess(io_dir, tmp_path / "worker.log", *NO_POOL, worker_id="flaky", stale_after=10)
    try:
        wait_until(lambda: "waiting up to 10 s for the earlier worker flaky" in worker.log(), 120, "the wait")
        assert qc.names(qdir.claimed / "flaky") == [qc.request_name(ticket, 0)], "released at once"
        wait_until(lambda: "gave back 1 request(s) an earlier worker flaky held" in worker.log(), 60,
                   "the claim to be given back after the window")
    finally:
        worker.stop()


def test_a_worker_outlives_planted_files_and_serves_the_next_request(tmp_path):
    """A candidate in a container can write the queue folder: JSON nested 100,000 deep as a heartbeat
    and as a validly named request (json.loads raises RecursionError on them) once ended the worker at
    once, and its restarts too, since the files stayed. The worker reads past the heartbeat, sets the
    request aside in bad/, and serves the next request."""
    io_dir = tmp_path / "io"
    qdir = qc.QueueDir(io_dir).ensure()
    (qdir.workers / "planted.json").write_bytes(b"[" * 100_000)
    (qdir.workers / "typed.json").write_text('{"worker_id": "typed", "time": "now", "pid": [], "epoch": {}}')
    planted = qc.request_name(qc.new_ticket(qc.new_session(), 1), 0)
    (qdir.requests / planted).write_bytes(b"[" * 100_000)
    worker = WorkerProcess(io_dir, tmp_path / "worker.log", *NO_POOL, worker_id="sturdy").wait_ready()
    try:
        # The worker reads the heartbeats, then claims what is queued, in its first round: by the time the
        # planted request is in bad/, both were met (or the worker has died on them).
        wait_until(lambda: worker.popen.poll() is not None
                   or any(n.startswith(planted) for n in qc.names(qdir.bad)), 120, "the planted request met")
        assert worker.popen.poll() is None, worker.log()[-3000:]
        assert qc.names(qdir.requests) == [] and qc.names(qdir.claimed / "sturdy") == []
        client = QueueClient(io_dir, stale_after_s=30, wait_for_worker_s=120)
        try:
            result = client.submit(request(CORRECT)).result(timeout=240)
        finally:
            client.close()
        assert result.category == "correct", (result.check, result.reason)
        assert worker.popen.poll() is None
    finally:
        code = worker.stop()
    assert code == 0, worker.log()[-3000:]
