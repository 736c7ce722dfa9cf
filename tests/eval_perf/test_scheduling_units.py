"""The scheduling primitives on their own: ordered slots, the device gate, quiet timing on real processes."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import threading
import time

import pytest

from pike_harness.worker.supervise.scheduling import DeviceGate, OrderedSlots, QuietRegistry, cpu_partition


def test_ordered_slots_grant_lowest_key_first():
    slots = OrderedSlots(1)
    slots.acquire(0)
    order: list[int] = []
    threads = []
    for count, ticket in enumerate((3, 1, 2), start=1):  # arrive out of order
        thread = threading.Thread(target=lambda t=ticket: (slots.acquire(t), order.append(t), slots.release()))
        thread.start()
        threads.append(thread)
        # Slots rank only the waiters already inside acquire: wait until this one is queued (a sleep
        # let a thread started late on a loaded runner arrive after the release and go last).
        deadline = time.monotonic() + 30
        while _queued(slots) < count and time.monotonic() < deadline:
            time.sleep(0.001)
        assert _queued(slots) == count, "a thread never reached acquire"
    slots.release()
    for thread in threads:
        thread.join(timeout=60)
    assert order == [1, 2, 3]


def _queued(slots: OrderedSlots) -> int:
    with slots._cond:
        return len(slots._waiting)


def test_device_gate_goes_to_the_oldest_waiter_and_counts_busy_time():
    gate = DeviceGate("cuda:0")
    first = gate.ticket(5)
    assert first.acquire(timeout=1)
    late, early = gate.ticket(9), gate.ticket(7)
    assert not late.acquire(timeout=0.01)  # registers 9 while 5 holds the device
    assert not early.acquire(timeout=0.01)  # registers 7
    got: list[int] = []

    def wait(ticket):
        assert ticket.acquire(timeout=60)
        got.append(ticket.seq)
        time.sleep(0.02)
        ticket.release()

    threads = [threading.Thread(target=wait, args=(t,)) for t in (late, early)]
    for thread in threads:
        thread.start()
    time.sleep(0.1)
    first.release()
    for thread in threads:
        thread.join(timeout=60)
    assert got == [7, 9]
    assert gate.stats.grants == 3
    assert gate.stats.busy_s >= 0.1
    # The device went straight from one holder to the next waiting one. The gap is a thread's wake-up,
    # which a loaded runner (2 cores, 3 test workers) can stretch past a second, so the bound is loose;
    # a release that woke no waiter would leave the device idle until the waiter's 60 s timeout.
    assert gate.stats.max_idle_with_waiters_s < 10.0


def test_a_cancelled_waiter_does_not_block_the_next():
    gate = DeviceGate("cpu")
    holder, quitter, next_one = gate.ticket(0), gate.ticket(1), gate.ticket(2)
    assert holder.acquire(timeout=1)
    assert not quitter.acquire(timeout=0.01)
    assert not next_one.acquire(timeout=0.01)
    quitter.cancel()
    holder.release()
    assert next_one.acquire(timeout=1)


def _sleeper(marker: str) -> subprocess.Popen:
    """A process in its own session that counts, carrying a sandbox marker."""
    env = {**os.environ, "PIKEH_SANDBOX": marker}
    code = "import time\nwhile True:\n    time.sleep(0.01)\n"
    return subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return handle.read().rsplit(b")", 1)[1].split()[0].decode()


def _wait_state(pid: int, wanted: str, timeout: float = 5.0) -> str:
    deadline = time.monotonic() + timeout
    state = _state(pid)
    while state != wanted and time.monotonic() < deadline:
        time.sleep(0.01)
        state = _state(pid)
    return state


def test_a_process_just_started_reads_as_ours_once_its_environment_is_awaited():
    """``Popen`` returns before the child's new environment is in place (its environ reads empty for
    a moment; 2 of 300 starts on a loaded VM), and a member seen without its marker is not stopped.
    After ``await_environment`` every start shows its marker; a process that is gone ends the wait."""
    from pike_harness.worker.supervise import sandbox

    for _ in range(20):
        marker = secrets.token_hex(8)
        started = _sleeper(marker)
        try:
            assert sandbox.await_environment(started.pid, 10.0)
            assert sandbox.has_marker(started.pid, f"{sandbox.MARKER_ENV}={marker}".encode())
        finally:
            started.kill()
            started.wait()
    began = time.monotonic()
    assert not sandbox.await_environment(started.pid, 60.0)  # reaped: nothing left to wait for
    assert time.monotonic() - began < 30, "a gone process ended the wait at once, not at the timeout"


def test_registering_a_member_first_awaits_its_environment(monkeypatch):
    from pike_harness.worker.supervise import sandbox

    awaited: list[int] = []
    monkeypatch.setattr(sandbox, "await_environment", lambda pid, timeout_s: awaited.append(pid) or True)
    QuietRegistry().add(os.getpid(), "m", "cuda:0")
    assert awaited == [os.getpid()]


def test_quiet_timing_stops_neighbours_of_the_device_and_resumes_them():
    registry = QuietRegistry()
    markers = [secrets.token_hex(8) for _ in range(3)]
    same_gpu, other_gpu, builder = (_sleeper(m) for m in markers)
    try:
        registry.add(same_gpu.pid, markers[0], "cuda:0")
        registry.add(other_gpu.pid, markers[1], "cuda:1")
        registry.add(builder.pid, markers[2], "host")
        with registry.quiet("cuda:0", exempt_pid=None):
            assert _wait_state(same_gpu.pid, "T") == "T"
            assert _state(other_gpu.pid) != "T"
            assert _state(builder.pid) != "T"  # CPU-only work does not disturb a GPU timing
        assert _wait_state(same_gpu.pid, "S") in ("S", "R")
        with registry.quiet("cpu", exempt_pid=None):  # on the CPU device everything is stopped
            assert all(_wait_state(p.pid, "T") == "T" for p in (same_gpu, other_gpu, builder))
        assert all(_wait_state(p.pid, "S") in ("S", "R") for p in (same_gpu, other_gpu, builder))
    finally:
        for process in (same_gpu, other_gpu, builder):
            process.kill()
            process.wait()


def test_quiet_timing_stops_a_process_that_starts_meanwhile_and_never_signals_a_stranger():
    registry = QuietRegistry()
    marker = secrets.token_hex(8)
    late = _sleeper(marker)
    stranger = _sleeper(secrets.token_hex(8))
    try:
        with registry.quiet("cuda:0", exempt_pid=None):
            token = registry.add(late.pid, marker, "cuda:0")
            assert _wait_state(late.pid, "T") == "T"
            registry.add(stranger.pid, "not-its-marker", "cuda:0")  # a reused pid: the marker check refuses
            time.sleep(0.05)
            assert _state(stranger.pid) != "T"
            registry.remove(token)  # removed while stopped: resumed
            assert _wait_state(late.pid, "S") in ("S", "R")
    finally:
        for process in (late, stranger):
            process.kill()
            process.wait()


def test_a_candidate_leaving_the_quiet_registry_keeps_how_long_it_was_stopped():
    """What ends a batch can be a warm-up stopped for every neighbour's timing: the sequence notes,
    per candidate, the time the quiet rule held its process stopped (a real process, stopped and
    continued), so a run's breakdown can name it."""
    from types import SimpleNamespace

    from pike_harness.worker.supervise.engine.jobs import JobTrace
    from pike_harness.worker.supervise.engine.sequence import EvaluationSequence

    registry = QuietRegistry()
    marker = secrets.token_hex(8)
    warming = _sleeper(marker)
    job = SimpleNamespace(trace=JobTrace(seq=0, task="t", submitted=0.0))
    sequence = EvaluationSequence(SimpleNamespace(quiet=registry), job)  # type: ignore[arg-type]
    try:
        sequence.quiet_token = registry.add(warming.pid, marker, "cuda:0")
        for _ in range(2):  # two neighbours timed while it waits
            with registry.quiet("cuda:0", exempt_pid=None):
                assert _wait_state(warming.pid, "T") == "T"
        stopped = registry.paused_seconds(sequence.quiet_token)
        sequence._leave_quiet()
        kept = job.trace.paused_s
        assert 0 < stopped <= kept <= registry.paused_s
        assert sequence.quiet_token is None
        sequence._leave_quiet()  # a second leave (the sequence's finally) adds nothing
        assert job.trace.paused_s == kept
    finally:
        warming.kill()
        warming.wait()


@pytest.mark.parametrize(("cores", "devices", "expected"), [
    (16, ["cuda:0"], (set(range(15)), {15})),
    (16, ["cuda:0", "cuda:1"], (set(range(14)), {14, 15})),
    (2, ["cuda:0"], (None, None)),
    (16, ["cpu"], (None, None)),
])
def test_cpu_partition_keeps_one_core_per_gpu_for_timing(cores, devices, expected):
    assert cpu_partition(devices, set(range(cores))) == expected


def test_quiet_timing_stops_the_whole_tree_even_a_child_in_its_own_session():
    """Compile workers, nvcc under ninja, a sandbox's inner session: all leave the member's group."""
    marker = secrets.token_hex(8)
    env = {**os.environ, "PIKEH_SANDBOX": marker}
    parent = subprocess.Popen(
        [sys.executable, "-c",
         "import subprocess, sys, time\n"
         "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], start_new_session=True)\n"
         "print(child.pid, flush=True)\n"
         "time.sleep(60)\n"],
        env=env, stdout=subprocess.PIPE, text=True, start_new_session=True)
    child_pid = int(parent.stdout.readline())
    registry = QuietRegistry()
    try:
        registry.add(parent.pid, marker, "cuda:0")
        with registry.quiet("cuda:0", exempt_pid=None):
            assert _wait_state(parent.pid, "T") == "T"
            assert _wait_state(child_pid, "T") == "T"
        assert _wait_state(child_pid, "S") in ("S", "R")
        assert _wait_state(parent.pid, "S") in ("S", "R")
    finally:
        parent.kill()
        parent.wait()
        os.kill(child_pid, 9)
