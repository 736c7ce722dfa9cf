"""The directory channel on its own: atomic messages, exclusive claims, liveness, giving back the
requests of dead workers, signatures, and the host's client without a real worker (a hand-driven
one writes the files a worker would)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from queue_helpers import CORRECT, request

from pike_harness.contracts.evaluation import EvaluatorError
from pike_harness.worker import queue_channel as qc
from pike_harness.worker.queue_client import QueueClient, QueueError
from pike_harness.worker.records import EvalResult


def dead_pid() -> int:
    """The pid of a process that has exited and been reaped."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def fake_heartbeat(qdir: qc.QueueDir, worker_id: str, *, pid: int, **changes) -> dict:
    beat = {"protocol": qc.PROTOCOL, "worker_id": worker_id, "epoch": "e1", "seq": 1, "time": time.time(),
            "state": "running", **qc.machine_identity(), "pid": pid, **changes}
    qc.write_json(qdir.workers, f"{worker_id}.json", beat)
    return beat


def wait_until(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.02)


def test_readers_never_see_a_partial_message(tmp_path):
    """A writer replaces one large message over and over; a reader that opens it meanwhile must
    always parse a whole message (a plain write to the final name fails this within a few rounds)."""
    folder = tmp_path / "box"
    folder.mkdir()
    stop = threading.Event()
    payload = "x" * 400_000

    def writer() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            qc.write_json(folder, "msg.json", {"n": n, "payload": payload}, fsync=False)

    thread = threading.Thread(target=writer)
    thread.start()
    reads = 0
    try:
        # Enough whole reads, not a 1 s window: on a loaded runner (and with the writer holding the GIL)
        # a second can pass with few reads; 30 s only bounds a machine that cannot read at all.
        deadline = time.monotonic() + 30.0
        while reads < 200 and time.monotonic() < deadline:
            for name in qc.names(folder):
                assert not name.startswith(".")
                message = qc.read_json(folder / name)
                if message is not None:
                    assert message["payload"] == payload
                    reads += 1
    finally:
        stop.set()
        thread.join()
    assert reads >= 200, f"only {reads} whole reads in 30 s"
    assert qc.names(folder) == ["msg.json"], "no temporary file may be left behind"


CLAIMER = """
import json, sys
from pike_harness.worker import queue_channel as qc
qdir = qc.QueueDir(sys.argv[1])
me = sys.argv[2]
qdir.claim_folder(me).path.mkdir(exist_ok=True)
got = []
while True:
    pending = qc.names(qdir.requests)
    if not pending:
        break
    for name in pending:
        if qc.claim(qdir, name, me) is not None:
            got.append(name)
print(json.dumps(got))
"""


def test_claims_are_exclusive_across_processes(tmp_path):
    qdir = qc.QueueDir(tmp_path / "io").ensure()
    tickets = [qc.new_ticket("abcdef0123", i) for i in range(300)]
    for ticket in tickets:
        qc.write_json(qdir.requests, qc.request_name(ticket, 0), {"ticket": ticket}, fsync=False)
    procs = [subprocess.Popen([sys.executable, "-c", CLAIMER, str(qdir.root), f"w{i}"], stdout=subprocess.PIPE,
                              text=True) for i in range(4)]
    taken = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    everything = [name for got in taken for name in got]
    assert len(everything) == len(set(everything)) == 300, "each request taken exactly once"
    for i, got in enumerate(taken):
        assert sorted(qc.names(qdir.claimed / f"w{i}")) == sorted(got)


def test_a_worker_whose_claim_folder_was_removed_still_claims(tmp_path):
    """A peer that judged this worker dead removed its folder; the worker, alive after all, goes on."""
    qdir = qc.QueueDir(tmp_path / "io").ensure()
    name = qc.request_name(qc.new_ticket("abcdef0123", 1), 0)
    qc.write_json(qdir.requests, name, {"n": 1})
    assert not qdir.claim_folder("back").path.exists()
    assert qc.claim(qdir, name, "back") == qdir.claim_folder("back") / name
    assert qc.names(qdir.requests) == []
    assert qc.claim(qdir, name, "back") is None, "taken already: nothing to claim"


def test_a_dead_workers_requests_come_back_counted_then_fail(tmp_path):
    qdir = qc.QueueDir(tmp_path / "io").ensure()
    ticket = qc.new_ticket("abcdef0123", 1)
    qdir.claim_folder("gone").path.mkdir()
    qc.write_json(qdir.claimed / "gone", qc.request_name(ticket, 0), {"ticket": ticket})
    beat = fake_heartbeat(qdir, "gone", pid=dead_pid())
    liveness = qc.Liveness(stale_after_s=60)
    liveness.update({"gone": beat})
    assert not liveness.is_alive("gone", beat), "same machine, pid gone: dead at once"

    moved = qc.recover_dead_workers(qdir, liveness, qc.read_heartbeats(qdir), max_attempts=3)
    assert moved == [f"requests/{qc.request_name(ticket, 1)}"]
    assert not (qdir.workers / "gone.json").exists() and not (qdir.claimed / "gone").exists()

    # The next worker dies on it too, and the one after: the third death gives it up.
    for attempt, expected in ((1, "requests"), (2, "failed")):
        qdir.claim_folder("gone").path.mkdir()
        os.rename(qdir.requests / qc.request_name(ticket, attempt), qdir.claimed / "gone" / qc.request_name(ticket, attempt))
        beats = {"gone": fake_heartbeat(qdir, "gone", pid=dead_pid())}
        liveness.update(beats)
        moved = qc.recover_dead_workers(qdir, liveness, beats, max_attempts=3)
        assert moved == [f"{expected}/{qc.request_name(ticket, attempt + 1)}"]

    # A claim folder that stays without a heartbeat for the whole window is an orphan; a clean stop
    # gives back without counting.
    qdir.claim_folder("orphan").path.mkdir()
    other = qc.new_ticket("abcdef0123", 2)
    qc.write_json(qdir.claimed / "orphan", qc.request_name(other, 0), {"ticket": other})
    now = [0.0]
    observer = qc.Liveness(stale_after_s=60, clock=lambda: now[0])
    assert qc.recover_dead_workers(qdir, observer, {}, max_attempts=3) == [], "no heartbeat yet: no news"
    now[0] += 61
    assert qc.recover_dead_workers(qdir, observer, {}, max_attempts=3) == [f"requests/{qc.request_name(other, 1)}"]
    qdir.claim_folder("polite").path.mkdir()
    os.rename(qdir.requests / qc.request_name(other, 1), qdir.claimed / "polite" / qc.request_name(other, 1))
    assert qc.release_claims(qdir, "polite", died=False, max_attempts=3) == [f"requests/{qc.request_name(other, 1)}"]


def test_an_unreadable_heartbeat_does_not_release_a_live_workers_claims(tmp_path):
    """A heartbeat caught mid-write, or missing for a moment (an NFS hiccup), is no news: the claims
    stay with their worker until its heartbeat has stood still for the whole window."""
    qdir = qc.QueueDir(tmp_path / "io").ensure()
    ticket = qc.new_ticket("abcdef0123", 1)
    qdir.claim_folder("remote").path.mkdir()
    claim = qdir.claimed / "remote" / qc.request_name(ticket, 0)
    qc.write_json(claim.parent, claim.name, {"ticket": ticket})
    now = [0.0]
    liveness = qc.Liveness(stale_after_s=10, clock=lambda: now[0])
    beat = fake_heartbeat(qdir, "remote", pid=1, host="elsewhere")  # another machine: no pid check

    def recover() -> list[str]:
        beats = qc.read_heartbeats(qdir)
        liveness.update(beats)
        return qc.recover_dead_workers(qdir, liveness, beats, max_attempts=3)

    assert recover() == []
    for transient in ("partial", "missing", "not-an-object"):
        now[0] += 4
        path = qdir.workers / "remote.json"
        if transient == "partial":
            path.write_text(json.dumps(beat)[:25])
        elif transient == "missing":
            path.unlink()
        else:
            path.write_text("[1, 2]")
        assert recover() == [], f"a {transient} heartbeat released a live worker's claim"
        assert claim.exists()
        now[0] += 4
        beat = fake_heartbeat(qdir, "remote", pid=1, host="elsewhere", seq=beat["seq"] + 1)  # it beats again
        assert recover() == [] and claim.exists()

    # Unreadable for good: once no beat was read for the whole window, the worker is dead.
    (qdir.workers / "remote.json").write_text("{")
    now[0] += 9
    assert recover() == [] and claim.exists()
    now[0] += 2
    assert recover() == [f"requests/{qc.request_name(ticket, 1)}"]


def test_a_live_workers_overdue_requests_are_given_back_counted(tmp_path):
    """A worker that still beats but lists a request as past its deadline loses it (counted), so a
    worker whose main loop is stuck cannot hold a request for ever; its other claims stay."""
    qdir = qc.QueueDir(tmp_path / "io").ensure()
    late, fine = qc.new_ticket("abcdef0123", 1), qc.new_ticket("abcdef0123", 2)
    qdir.claim_folder("busy").path.mkdir()
    for ticket in (late, fine):
        qc.write_json(qdir.claimed / "busy", qc.request_name(ticket, 2), {"ticket": ticket})
    beats = {"busy": fake_heartbeat(qdir, "busy", pid=os.getpid(), overdue=[qc.request_name(late, 2)])}
    liveness = qc.Liveness(stale_after_s=60)
    liveness.update(beats)
    assert qc.recover_dead_workers(qdir, liveness, beats, max_attempts=3) == [f"failed/{qc.request_name(late, 3)}"]
    assert qc.names(qdir.claimed / "busy") == [qc.request_name(fine, 2)]


def test_the_death_rule_and_the_hold_timer():
    from pike_harness.worker.records import Limits
    from pike_harness.worker.supervise.liveness import BeatWatch, HoldTimer, hold_deadline_s, is_dead

    now = [0.0]
    watch = BeatWatch(5, clock=lambda: now[0])
    watch.looked("w")
    now[0] += 4
    watch.looked("w")  # failed reads neither restart nor cut short the window
    assert not watch.is_dead("w")
    watch.saw("w", ("e", 1))
    now[0] += 4
    watch.saw("w", ("e", 1))  # the same beat again is no sign of life
    assert not watch.is_dead("w")
    now[0] += 2
    assert watch.is_dead("w") and is_dead(0.0, 5, process_gone=True) and is_dead(0.0, 5, said_stopped=True)
    assert hold_deadline_s(Limits(compile_timeout_s=10, run_timeout_s=2), grace_s=1) == 19
    assert hold_deadline_s({"compile_timeout_s": 10, "run_timeout_s": 2}, grace_s=1) == 19
    timer = HoldTimer(3, clock=lambda: now[0])
    now[0] += 2
    timer.waiting()
    now[0] += 100  # waiting for the device is not this request's time
    timer.working()
    assert not timer.overdue()
    now[0] += 1.5
    assert timer.overdue() and timer.worked_s() == 3.5


def test_liveness_uses_the_observers_clock_not_the_workers():
    now = [1000.0]
    liveness = qc.Liveness(stale_after_s=5, clock=lambda: now[0])
    remote = {"worker_id": "r", "epoch": "e", "seq": 1, "host": "elsewhere", "pid": 1, "pidns": "x",
              "time": time.time() + 120}  # its clock runs two minutes fast: irrelevant
    liveness.update({"r": remote})
    assert liveness.is_alive("r", remote)
    now[0] += 4
    remote = {**remote, "seq": 2}
    liveness.update({"r": remote})
    now[0] += 4
    assert liveness.is_alive("r", remote), "the counter moved 4 s ago"
    now[0] += 2
    assert not liveness.is_alive("r", remote), "the counter stood still for 6 s"
    assert not liveness.is_alive("r", {**remote, "state": "stopped"})
    ancient = {**remote, "worker_id": "old", "time": time.time() - 2 * 3600}
    liveness.update({"old": ancient})
    assert not liveness.is_alive("old", ancient), "a two-hour-old heartbeat is dead whatever was observed"
    skewed = {**remote, "worker_id": "slow-clock", "time": time.time() - 600}
    liveness.update({"slow-clock": skewed})
    assert liveness.is_alive("slow-clock", skewed), "a clock ten minutes behind is not a dead worker"


def test_signatures_detect_any_change():
    key = b"k" * 32
    message = qc.sign({"ticket": "t", "result": {"category": "incorrect"}}, key)
    assert qc.verified(message, key)
    assert not qc.verified({**message, "result": {"category": "correct"}}, key)
    assert not qc.verified(message, b"z" * 32)
    assert not qc.verified({k: v for k, v in message.items() if k != "mac"}, key)
    assert qc.verified({"anything": 1}, None), "without a key nothing is checked"


def test_worker_ids_must_be_safe_file_names():
    for bad in ("", "../x", "a/b", "x" * 200, ".hidden"):
        with pytest.raises(qc.ChannelError):
            qc.check_worker_id(bad)
    assert qc.check_worker_id("node07-gpu3_a.1") == "node07-gpu3_a.1"


# -- the host's client, with a hand-driven worker -------------------------------------------------

def _serve_one(qdir: qc.QueueDir, key: bytes | None, *, worker_id: str = "hand") -> tuple[str, dict]:
    """Claim the one pending request like a worker would; return its ticket and message."""
    qdir.claim_folder(worker_id).path.mkdir(exist_ok=True)
    wait_until(lambda: qc.names(qdir.requests))
    name = qc.names(qdir.requests)[0]
    path = qc.claim(qdir, name, worker_id)
    message = qc.read_json(path)
    assert qc.verified(message, key)
    return message["ticket"], message


def _result(ticket: str, request_id: str, category: str, key: bytes | None) -> dict:
    result = EvalResult(request_id=request_id, task="test/relu-scale", category=category)
    return qc.sign({"protocol": qc.PROTOCOL, "kind": "result", "ticket": ticket, "attempt": 0,
                    "worker": {"id": "hand", "epoch": "e1"}, "request_id": request_id,
                    "result": result.to_dict()}, key)


def test_stale_forged_and_foreign_results_are_never_taken_for_new_ones(tmp_path):
    key = b"s" * 32
    qdir = qc.QueueDir(tmp_path / "io").ensure()
    fake_heartbeat(qdir, "hand", pid=os.getpid())
    old_session = qc.new_session()
    qc.register_host(qdir, old_session, {})
    foreign = qc.new_ticket(old_session, 1)
    qc.write_json(qdir.results, qc.result_name(foreign), _result(foreign, "x", "correct", key))
    client = QueueClient(qdir.root, key=key, stale_after_s=60)
    try:
        req = request(CORRECT)
        future = client.submit(req)
        ticket, message = _serve_one(qdir, key)
        assert message["request"]["candidate_source"] == CORRECT
        unknown = qc.new_ticket(client.session, 999)
        qc.write_json(qdir.results, qc.result_name(unknown), _result(unknown, req.request_id, "correct", key))
        qc.write_json(qdir.results, qc.result_name(ticket), _result(ticket, "another-request", "correct", key))
        wait_until(lambda: client.stats["stale"] == 2)
        forged = _result(ticket, req.request_id, "correct", None)
        forged["mac"] = "0" * 64
        qc.write_json(qdir.results, qc.result_name(ticket), forged)
        wait_until(lambda: client.stats["forged"] == 1)
        assert not future.done()
        qc.write_json(qdir.results, qc.result_name(ticket), _result(ticket, req.request_id, "incorrect", key))
        result = future.result(timeout=10)
        assert result.category == "incorrect" and result.request_id == req.request_id
        # A late duplicate (a worker presumed dead finishing after all) is dropped, not delivered again.
        qc.write_json(qdir.results, qc.result_name(ticket), _result(ticket, req.request_id, "correct", key))
        wait_until(lambda: client.stats["stale"] == 3)
        assert client.stats["results"] == 1
        assert qc.names(qdir.results) == [qc.result_name(foreign)], "another session's result is left alone"
    finally:
        client.close()
    assert qc.names(qdir.hosts) == [f"{old_session}.json"]


def _refused_result(tmp_path, change: dict, attempt: int | None = None) -> tuple[EvaluatorError, QueueClient]:
    """A signed result from worker "rogue" with ``change`` applied to its record: the error its
    request fails with, and the client (closed) whose counters say what it did with the result."""
    key = b"k" * 32
    qdir = qc.QueueDir(tmp_path / "io").ensure()
    fake_heartbeat(qdir, "rogue", pid=os.getpid())
    client = QueueClient(qdir.root, key=key, stale_after_s=60, error_type=EvaluatorError)
    try:
        req = request(CORRECT)
        future = client.submit(req)
        ticket, _message = _serve_one(qdir, key, worker_id="rogue")
        answer = _result(ticket, req.request_id, "correct", None)
        answer["result"].update(change)
        answer["worker"]["id"] = "rogue"
        if attempt is not None:
            answer["attempt"] = attempt
        qc.write_json(qdir.results, qc.result_name(ticket), qc.sign(answer, key))
        with pytest.raises(EvaluatorError) as caught:
            future.result(timeout=30)
    finally:
        client.close()
    assert str(caught.value).startswith("worker rogue sent a result for test/relu-scale that this harness cannot "
                                        "read: "), caught.value
    assert "\x1b" not in str(caught.value) and client.stats["errors"] == 1 and client.stats["results"] == 0
    return caught.value, client


def test_a_signed_result_with_an_unknown_category_is_its_workers_failure(tmp_path):
    """A worker holding the key (another version, or compromised) answers with a category the host does
    not know: the request fails as an infrastructure error naming the value, escaped, with the tries it
    had counted; never a verdict, and never left waiting."""
    error, _client = _refused_result(tmp_path, {"category": "excellent\x1b]52;c;SGVsbG8=\x07[/x]"}, attempt=1)
    assert "unknown category 'excellent\\x1b]52;c;SGVsbG8=\\x07[/x]'" in str(error)
    assert error.attempts == 2


@pytest.mark.parametrize(("change", "said"), [
    ({"runtime_ms": "fast"}, "runtime_ms: type str, expected a number >= 0 or null"),
    ({"stage_seconds": {"total": "\x1b[2J"}}, "stage_seconds['total']: type str, expected a number >= 0"),
    ({"outputs": [{"input_set": "zero", "index": 0}]}, "outputs[0].input_set: type str, expected a whole number"),
    ({"flags": "notalist"}, "flags: type str, expected a list"),
])
def test_a_signed_result_with_a_field_of_the_wrong_kind_is_its_workers_failure(tmp_path, change, said):
    """As with an unknown category: a well-formed message whose result holds a string where a number
    belongs (or a list, an object of the wrong elements) fails the request as the worker's infrastructure
    error naming the field, with its tries counted; the caller never gets the record to trip over."""
    error, _client = _refused_result(tmp_path, change)
    assert "a result with a field of the wrong kind: " in str(error) and said in str(error), error
    assert error.attempts == 1


def test_pikeh_eval_reports_a_wrong_kind_of_result_from_a_queue_worker_in_one_line(cli, tmp_path):
    """`pikeh eval --evaluator queue` against a worker (hand-driven here, on a real queue folder) whose
    result has a string for a runtime statistic: one line naming the worker and the field, exit status 1,
    no traceback (the record used to reach the runtime line's number formatting)."""
    qdir = qc.QueueDir(tmp_path / "io").ensure()
    fake_heartbeat(qdir, "rogue", pid=os.getpid())
    served: list[str] = []

    def rogue() -> None:
        ticket, message = _serve_one(qdir, None, worker_id="rogue")
        answer = _result(ticket, message["request"]["request_id"], "correct", None)
        answer["worker"]["id"] = "rogue"
        answer["result"].update(task="smoke/1", runtime_ms=0.5, runtime={
            "headline_ms": "fast", "statistic": "median", "mean_ms": 0.5, "median_ms": 0.5, "min_ms": 0.5,
            "max_ms": 0.5, "stdev_ms": 0.0, "cv": 0.0, "iqr_ms": 0.0, "n": 1, "host_wall_ms": 0.5})
        qc.write_json(qdir.results, qc.result_name(ticket), answer)
        served.append(ticket)

    thread = threading.Thread(target=rogue, daemon=True)
    thread.start()
    candidate = Path(__file__).resolve().parents[1] / "eval" / "corpus" / "ok_plain.py"
    result = cli("eval", str(candidate), "--task", "smoke/1", "--evaluator", "queue", "--io-dir", str(qdir.root),
                 "--queue-wait", "30")
    thread.join(timeout=30)
    assert served, "the hand-driven worker never saw the request"
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    assert ("the evaluation could not run: worker rogue sent a result for smoke/1 that this harness cannot read: "
            "a result with a field of the wrong kind: runtime.headline_ms: type str, expected a number >= 0"
            in " ".join(result.output.split())), result.output


def test_no_worker_is_a_clear_error_naming_the_folder(tmp_path):
    io_dir = tmp_path / "io"
    client = QueueClient(io_dir, wait_for_worker_s=0.3)
    try:
        started = time.monotonic()
        future = client.submit(request(CORRECT))
        with pytest.raises(QueueError) as info:
            future.result(timeout=10)
        assert time.monotonic() - started < 5
        message = str(info.value)
        assert str(io_dir) in message and "no worker" in message and f"pikeh worker --io-dir {io_dir}" in message
        assert qc.names(io_dir / "requests") == [], "the unanswered request is withdrawn"
        # Heartbeats of dead workers do not count as answering.
        fake_heartbeat(qc.QueueDir(io_dir), "ghost", pid=dead_pid())
        with pytest.raises(QueueError, match="no worker answers"):
            client.submit(request(CORRECT)).result(timeout=10)
    finally:
        client.close()


def test_a_candidate_whose_workers_keep_dying_ends_as_worker_lost(tmp_path):
    qdir = qc.QueueDir(tmp_path / "io").ensure()
    fake_heartbeat(qdir, "alive", pid=os.getpid())
    client = QueueClient(qdir.root, stale_after_s=60, max_attempts=3)
    try:
        req = request(CORRECT)
        future = client.submit(req)
        ticket, _message = _serve_one(qdir, None, worker_id="doomed")
        name = qc.request_name(ticket, 0)
        os.rename(qdir.claimed / "doomed" / name, qdir.claimed / "doomed" / qc.request_name(ticket, 2))
        fake_heartbeat(qdir, "doomed", pid=dead_pid())
        result = future.result(timeout=10)
        assert result.category == "runtime_error" and result.check == "worker_lost"
        assert result.request_id == req.request_id and "3 worker(s) died" in result.reason
        assert qc.names(qdir.failed) == [] and client.stats["failed"] == 1
    finally:
        client.close()


def test_close_withdraws_queued_requests_and_cancels_futures(tmp_path):
    qdir = qc.QueueDir(tmp_path / "io").ensure()
    client = QueueClient(qdir.root, wait_for_worker_s=60)
    futures = [client.submit(request(CORRECT)) for _ in range(3)]
    assert len(qc.names(qdir.requests)) == 3 and len(qc.names(qdir.hosts)) == 1
    client.close()
    assert all(f.cancelled() for f in futures)
    assert qc.names(qdir.requests) == [] and qc.names(qdir.hosts) == []
    with pytest.raises(QueueError):
        client.submit(request(CORRECT))


def test_results_of_gone_sessions_are_swept_once_old(tmp_path):
    qdir = qc.QueueDir(tmp_path / "io").ensure()
    live, gone = qc.new_session(), qc.new_session()
    qc.register_host(qdir, live, {})
    for session in (live, gone):
        ticket = qc.new_ticket(session, 1)
        qc.write_json(qdir.results, qc.result_name(ticket), {"ticket": ticket})
    assert qc.sweep_orphans(qdir, min_age_s=60) == 0, "young files stay (their host may be starting)"
    old = time.time() - 120
    for name in qc.names(qdir.results):
        os.utime(qdir.results / name, (old, old))
    assert qc.sweep_orphans(qdir, min_age_s=60) == 1
    assert [qc.ticket_session(qc.parse_result_name(n)) for n in qc.names(qdir.results)] == [live]


def test_unwritable_folder_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(QueueError, match="cannot use"):
        QueueClient(Path(blocker) / "io")


def test_a_request_deleted_from_the_folder_is_written_again(tmp_path):
    """A candidate inside a container can delete files in the folder: the host notices a request that
    is nowhere (not queued, claimed or answered) and writes it again, a bounded number of times."""
    qdir = qc.QueueDir(tmp_path / "io").ensure()
    fake_heartbeat(qdir, "hand", pid=os.getpid())
    client = QueueClient(qdir.root, stale_after_s=60, max_attempts=2)
    try:
        future = client.submit(request(CORRECT))
        (name,) = qc.names(qdir.requests)
        os.unlink(qdir.requests / name)
        wait_until(lambda: qc.names(qdir.requests) == [name.replace(".a0.", ".a1.")])
        os.unlink(qdir.requests / name.replace(".a0.", ".a1."))
        with pytest.raises(QueueError, match="vanished from the queue folder"):
            future.result(timeout=15)
    finally:
        client.close()


def test_planted_fifos_and_links_in_the_folder_are_refused_not_waited_on(tmp_path):
    """In the docker evaluator without bubblewrap a candidate can write the queue folder: a FIFO named as
    a result or a heartbeat would block an open() for good, a link to /dev/zero would be read without
    end. Each is refused and set aside; the real result still arrives and the client keeps running."""
    key = b"s" * 32
    qdir = qc.QueueDir(tmp_path / "io").ensure()
    fake_heartbeat(qdir, "hand", pid=os.getpid())
    os.mkfifo(qdir.workers / "planted.json")
    assert "planted" in qc.read_heartbeats(qdir).unreadable  # returned: the FIFO was not waited on
    client = QueueClient(qdir.root, key=key, stale_after_s=60)
    try:
        req = request(CORRECT)
        future = client.submit(req)
        ticket, _ = _serve_one(qdir, key)
        os.mkfifo(qdir.results / qc.result_name(qc.new_ticket(client.session, 998)))
        os.symlink("/dev/zero", qdir.results / qc.result_name(qc.new_ticket(client.session, 999)))
        wait_until(lambda: len([n for n in os.listdir(qdir.bad) if not n.endswith(".why")]) == 2)
        assert qc.names(qdir.results) == []  # both taken and set aside by the client's one thread
        qc.write_json(qdir.results, qc.result_name(ticket), _result(ticket, req.request_id, "incorrect", key))
        assert future.result(timeout=10).category == "incorrect"
    finally:
        client.close()


def test_read_json_refuses_what_is_not_a_plain_message_file(tmp_path):
    (tmp_path / "ok.json").write_text('{"a": 1}')
    assert qc.read_json(tmp_path / "ok.json") == {"a": 1}
    assert qc.read_json(tmp_path / "gone.json") is None
    os.symlink(tmp_path / "ok.json", tmp_path / "link.json")
    os.mkfifo(tmp_path / "fifo.json")
    with open(tmp_path / "huge.json", "wb") as handle:  # sparse: no disk used, but over the cap
        handle.truncate(qc.MAX_MESSAGE_BYTES + 1)
    for name in ("link.json", "fifo.json", "huge.json"):
        with pytest.raises(ValueError):
            qc.read_json(tmp_path / name)


# Files a candidate in a container can write into the queue folder: not one may stop a reader.
HOSTILE_MESSAGES = {
    "nested-array.json": b"[" * 100_000,
    "nested-object.json": b'{"a":' * 50_000,
    "endless-digits.json": b'{"n": ' + b"9" * 50_000 + b"}",
    "not-utf8.json": b'{"a": "\xff\xfe"}',
    "half.json": b'{"protocol": "pikeh-queue/1", "work',
}


def test_read_json_turns_whatever_a_file_holds_into_value_error(tmp_path):
    """json.loads raises RecursionError on deep nesting (and more than ValueError elsewhere): a planted
    file must be a bad message for every caller (they catch ValueError), never the reader's crash."""
    for name, data in HOSTILE_MESSAGES.items():
        (tmp_path / name).write_bytes(data)
        with pytest.raises(ValueError):
            qc.read_json(tmp_path / name)
        with pytest.raises(ValueError):
            qc.read_json(tmp_path, name)
    (tmp_path / "big.json").write_bytes(b'{"a": "' + b"x" * 2000 + b'"}')
    with pytest.raises(ValueError, match="cap"):
        qc.read_json(tmp_path, "big.json", max_bytes=1000)
    assert qc.read_json(tmp_path, "big.json", max_bytes=4000) == {"a": "x" * 2000}


def test_planted_heartbeats_and_requests_are_set_aside_not_fatal(tmp_path):
    """Planted in workers/ and requests/, each hostile file is no news (a heartbeat) or set aside in
    bad/ (a request), for the host's monitor and for a worker's code that claims requests alike."""
    qdir = qc.QueueDir(tmp_path / "io").ensure()
    for name, data in HOSTILE_MESSAGES.items():
        (qdir.workers / name).write_bytes(data)
    (qdir.workers / "started.json").write_text('{"worker_id": "started", "started": [1], "seq": {"a": 1}}')
    beats = qc.read_heartbeats(qdir)
    assert beats.unreadable == {name[:-5] for name in HOSTILE_MESSAGES}
    liveness = qc.Liveness(60)
    liveness.update(beats)
    assert qc.recover_dead_workers(qdir, liveness, beats, max_attempts=3) == []
    client = QueueClient(qdir.root, stale_after_s=60, wait_for_worker_s=60)
    try:
        client._check_workers()  # the monitor's step, here in the test's thread: it returns
        assert "started" in client.live_workers()
    finally:
        client.close()


def _plant_link(folder: Path, outside: Path) -> None:
    """What a candidate in the container does: rename a folder of the channel away, put a link in its place."""
    os.rename(folder, folder.with_name(folder.name + ".old"))
    os.symlink(outside, folder)


def test_links_planted_in_place_of_folders_are_never_followed(tmp_path):
    """A candidate in the container renames requests/, hosts/, results/... away and puts links to a
    folder of the host's user in their place: the host and the workers refuse them. Nothing is written
    into that folder, and nothing in it is moved, deleted or read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    gone = qc.new_session()
    planted = {qc.result_name(qc.new_ticket(gone, 1)): b'{"x": 1}',
               qc.request_name(qc.new_ticket(gone, 2), 0): b'{"ticket": "x"}',
               "w.json": b'{"worker_id": "w"}'}
    for name, data in planted.items():
        (outside / name).write_bytes(data)
        os.utime(outside / name, (0, 0))  # old enough to be swept, were it followed

    def untouched() -> None:
        assert {p.name: p.read_bytes() for p in outside.iterdir()} == planted

    qdir = qc.QueueDir(tmp_path / "io").ensure()
    client = QueueClient(qdir.root, stale_after_s=60, wait_for_worker_s=60)
    try:
        for name in ("requests", "hosts", "results", "failed", "workers", "bad"):
            _plant_link(qdir.root / name, outside)
        with pytest.raises(QueueError, match="requests is a link or not a folder"):
            client.submit(request(CORRECT))
        with pytest.raises(OSError, match="is a link"):
            qc.register_host(qdir, client.session, {})
        with pytest.raises(OSError):
            qc.write_json(qdir.results, qc.result_name(qc.new_ticket(client.session, 1)), {"a": 1})
        assert qc.sweep_orphans(qdir, min_age_s=0) == 0
        assert qc.names(qdir.requests) == [] and qc.names(qdir.results) == []
        assert qc.read_heartbeats(qdir) == {}
        assert qc.host_waiting(qdir, gone), "a hosts/ that cannot be looked into is no sign the host has gone"
        client._collect_results()
        client._collect_failed()
        client._check_workers()  # re-registering the host file, which hosts/ no longer holds: refused
        client._find_lost()
        untouched()
        with pytest.raises(qc.ChannelError, match="is a link or not a folder"):
            qc.QueueDir(qdir.root).ensure()
    finally:
        client.close()
    untouched()
    assert not any(p.is_symlink() for p in outside.iterdir())


def test_claim_folders_replaced_by_links_are_never_followed(tmp_path):
    """claimed/<worker>/ and claimed/ itself: giving back a dead worker's claims never moves files out
    of a folder a link names, nor into it."""
    outside = tmp_path / "outside"
    outside.mkdir()
    ticket = qc.new_ticket(qc.new_session(), 1)
    (outside / qc.request_name(ticket, 0)).write_text("{}")
    qdir = qc.QueueDir(tmp_path / "io").ensure()
    os.symlink(outside, qdir.claimed / "dead")
    assert qc.release_claims(qdir, "dead", died=True, max_attempts=3) == []
    liveness = qc.Liveness(0.0)
    beats = qc.Heartbeats({"dead": {"worker_id": "dead", "state": "stopped", "epoch": "e", "seq": 1,
                                    "overdue": [qc.request_name(ticket, 0)]}})
    liveness.update(beats)
    assert qc.recover_dead_workers(qdir, liveness, beats, max_attempts=3) == []
    qc.write_json(qdir.requests, qc.request_name(ticket, 1), {"ticket": ticket})
    with pytest.raises(OSError, match="is a link"):
        qc.claim(qdir, qc.request_name(ticket, 1), "dead")
    _plant_link(qdir.root / "claimed", outside)
    assert qc.names(qdir.claimed) == []
    with pytest.raises(OSError, match="is a link"):
        qc.claim(qdir, qc.request_name(ticket, 1), "alive")
    assert os.listdir(outside) == [qc.request_name(ticket, 0)]
    assert qc.names(qdir.requests) == [qc.request_name(ticket, 1)]
