"""The device gate's shared check phase (issue 19): checks overlap each other, never a timing, and a
candidate that ran out of device memory among others' models can run alone."""

from __future__ import annotations

import threading
import time

from pike_harness.worker.supervise.scheduling import DeviceGate


def _enter(session, phase: str, timeout: float = 0.02) -> bool:
    return session.phase(phase).acquire(timeout=timeout)


def test_checks_overlap_up_to_the_slots_and_never_a_timing():
    gate = DeviceGate("cuda:0", check_slots=2)
    a, b, c = gate.session(1), gate.session(2), gate.session(3)
    assert _enter(a, "check") and _enter(b, "check")
    assert not _enter(c, "check"), "a third check waits for a slot"
    assert not _enter(a, "time"), "a timing waits for the checks in progress"
    b.end()  # b's check failed: its slot and its residency go
    assert not _enter(c, "check"), "no new check starts while a timing waits"
    assert _enter(a, "time", 1.0), "the timing starts once no check runs"
    assert not _enter(c, "check")
    assert gate.others_resident(1) is False
    a.end()
    assert _enter(c, "check", 1.0)
    assert gate.stats.checks == 3 and gate.stats.max_checking == 2 and gate.stats.grants == 1
    assert gate.stats.check_phases == 2, "a and b shared one phase; c's opened after a's timing"
    c.end()
    assert gate.stats.check_busy_s > 0


def test_timings_go_in_submission_order_after_their_checks():
    gate = DeviceGate("cuda:0", check_slots=3)
    sessions = [gate.session(seq) for seq in (4, 5, 6)]
    for session in sessions:
        assert _enter(session, "check")
    order: list[int] = []

    def time_it(session):
        assert session.phase("time").acquire(timeout=5)
        order.append(session.seq)
        time.sleep(0.01)
        session.end()

    threads = [threading.Thread(target=time_it, args=(s,)) for s in reversed(sessions)]
    for thread in threads:
        thread.start()
        time.sleep(0.02)  # 6 finishes its check first, then 5, then 4
    for thread in threads:
        thread.join(timeout=5)
    assert order == [4, 5, 6]


def test_alone_waits_until_no_other_checked_model_is_resident():
    gate = DeviceGate("cuda:0", check_slots=3)
    a, b, c, d = (gate.session(seq) for seq in (1, 2, 3, 4))
    for session in (a, b, c):
        assert _enter(session, "check")
    assert gate.others_resident(1)
    assert not _enter(b, "alone"), "b ran out of memory while a and c check"
    assert not _enter(d, "check"), "no new check while someone waits to run alone"
    assert _enter(a, "time", 1.0) is False, "c still checks"
    c.end()  # c's check failed
    assert _enter(a, "time", 1.0), "a timing goes ahead of the one waiting to run alone"
    assert not _enter(b, "alone"), "a's model is still resident"
    a.end()
    assert _enter(b, "alone", 1.0)
    assert not gate.others_resident(2)
    assert not _enter(d, "check")
    b.end()
    assert _enter(d, "check", 1.0)
    assert gate.stats.alone == 1


def test_two_that_ran_out_of_memory_together_run_alone_one_after_the_other():
    """Both checked side by side and both ran out of memory (the reference process's out-of-memory
    error reaches every check in progress): each waits to run alone, and neither may wait for the
    other's model to leave, or both wait for good (seen on an H100 in a pike-b run)."""
    gate = DeviceGate("cuda:0", check_slots=3)
    a, b, c = gate.session(1), gate.session(2), gate.session(3)
    assert _enter(a, "check") and _enter(b, "check") and _enter(c, "check")
    assert not _enter(b, "alone") and not _enter(a, "alone"), "c still checks"
    c.end()
    assert _enter(a, "alone", 1.0), "a, first in line, runs while b's model waits beside it"
    assert not _enter(b, "alone"), "b waits for a"
    a.end()
    assert _enter(b, "alone", 1.0)
    b.end()
    assert gate.stats.alone == 2 and gate.holder is None


def test_a_timing_that_ran_out_of_memory_gives_the_device_up_while_it_waits_to_run_alone():
    gate = DeviceGate("cuda:0", check_slots=2)
    a, b = gate.session(1), gate.session(2)
    assert _enter(a, "check") and _enter(b, "check")
    assert not _enter(a, "time")
    assert not _enter(b, "time")  # both checked: queued for timing in order
    assert _enter(a, "time", 1.0) and gate.holder == 1
    assert not _enter(a, "alone"), "b's checked model is resident"
    assert gate.holder is None
    assert _enter(b, "time", 1.0), "b times while a waits to run alone"
    b.end()
    assert _enter(a, "alone", 1.0)
    a.end()
    assert gate.holder is None and not gate.others_resident(0)


class _Clock:
    """The scheduling module's ``time``, with ``monotonic`` moved forward by ``advance`` (the real
    clock still runs, so the gate's waits with a timeout end)."""

    def __init__(self) -> None:
        self.offset = 0.0

    def advance(self, seconds: float) -> None:
        self.offset += seconds

    def monotonic(self) -> float:
        return time.monotonic() + self.offset

    def __getattr__(self, name: str):
        return getattr(time, name)


def test_a_long_check_lets_new_checks_use_the_wait_but_only_once(monkeypatch):
    from pike_harness.worker.supervise import scheduling

    # "Long" is a clock the test moves, not wall time: with a short LONG_CHECK_S and sleeps, a stall
    # of the runner before "slow has not run long yet" made slow count as long already. An hour: no
    # stall is that long, and the waits with a timeout below still end by the real clock.
    clock = _Clock()
    monkeypatch.setattr(scheduling, "time", clock)
    monkeypatch.setattr(scheduling, "LONG_CHECK_S", 3600.0)
    gate = DeviceGate("cuda:0", check_slots=3)
    slow, quick, late, later = (gate.session(seq) for seq in (1, 2, 3, 4))
    assert _enter(slow, "check") and _enter(quick, "check")
    assert not _enter(quick, "time"), "quick checked; its timing waits for slow"
    assert not _enter(late, "check"), "slow has not run long yet"
    clock.advance(scheduling.LONG_CHECK_S)
    assert _enter(late, "check"), "slow has run long: late uses the wait"
    slow.end()
    clock.advance(scheduling.LONG_CHECK_S)
    assert not _enter(later, "check", 0.05), "late started during the wait: it lets no one else in"
    late.end()
    assert _enter(quick, "time", 1.0)


def test_the_lowest_rank_goes_first_whatever_its_seq():
    """The engine ranks waiters by its work order (work class, seq): a candidate whose long CPU work
    is done goes to the device before quick ones submitted earlier, in every phase and on a ticket."""
    gate = DeviceGate("cuda:0", check_slots=3)
    holder = gate.session(0, (2, 0))
    assert _enter(holder, "check") and _enter(holder, "time")
    quick, long_done = gate.session(1, (2, 1)), gate.session(9, (1, 9))
    assert not _enter(quick, "check") and not _enter(long_done, "check")  # both queued behind the timing
    holder.end()
    assert not _enter(quick, "check"), "the higher rank waits though its seq is lower"
    assert _enter(long_done, "check") and _enter(quick, "check")
    assert not _enter(quick, "time"), "long_done is still checking"
    assert _enter(long_done, "time"), "checks over: the lower rank is timed first, though it queued last"
    assert not _enter(quick, "time")
    long_done.end()
    assert _enter(quick, "time", 1.0)
    quick.end()

    tickets = DeviceGate("cuda:0")
    first, early, late = tickets.ticket(0, (2, 0)), tickets.ticket(1, (2, 1)), tickets.ticket(9, (0, 9))
    assert first.acquire(timeout=1)
    assert not early.acquire(timeout=0.01) and not late.acquire(timeout=0.01)
    first.release()
    assert not early.acquire(timeout=0.01), "a build's candidate (class 0) goes before a quick one"
    assert late.acquire(timeout=1)
    late.release()
    assert early.acquire(timeout=1)


def test_without_a_rank_a_waiter_ranks_by_its_seq():
    gate = DeviceGate("cuda:0")
    holder, late, early = gate.ticket(5), gate.ticket(9), gate.ticket(7)
    assert holder.acquire(timeout=1)
    assert not late.acquire(timeout=0.01) and not early.acquire(timeout=0.01)
    holder.release()
    assert not late.acquire(timeout=0.01)
    assert early.acquire(timeout=1)
