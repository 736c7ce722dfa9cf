"""Taking a pre-started process: a caller waits for one that is still starting only if no other caller
already waits for it; the rest start their own at once (the pool starts only a few at a time)."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from pike_harness.worker.supervise.prestart import PrestartPool


class _Process:
    """Stands in for a ``Spawned`` process: ``take`` asks only whether it is alive."""

    def alive(self) -> bool:
        return True

    def discard(self) -> None:
        raise AssertionError("a live process is never discarded")


def test_one_caller_waits_per_starting_process_and_the_others_start_their_own():
    pool = PrestartPool(SimpleNamespace(start_slots=None), ["cpu"], per_device=0)  # starts nothing itself
    starting = _Process()
    pool._starting["cpu"].append((starting, None))
    taken: dict[int, object] = {}
    first_waits = threading.Event()

    def take(index: int) -> None:
        taken[index] = pool.take("cpu", tick=first_waits.set if index == 0 else lambda: None)

    first = threading.Thread(target=take, args=(0,), daemon=True)
    first.start()
    assert first_waits.wait(timeout=30), "the first caller waits for the starting process"
    others = [threading.Thread(target=take, args=(i,), daemon=True) for i in (1, 2, 3)]
    for thread in others:
        thread.start()
    for thread in others:
        thread.join(timeout=30)
    assert [taken.get(i, "still waiting") for i in (1, 2, 3)] == [None, None, None], \
        "callers beyond the starting process do not queue behind it"
    assert first.is_alive() and 0 not in taken
    with pool._cond:  # the process says ready: the refill thread moves it (by hand here)
        pool._starting["cpu"].clear()
        pool._ready["cpu"].append(starting)
        pool._cond.notify_all()
    first.join(timeout=30)
    assert taken[0] is starting
    assert (pool.served, pool.missed) == (1, 3)
    pool.close()


class _Ready(_Process):
    """A process that said "ready"; ``discard`` when the pool is closed."""

    def __init__(self, pid: int):
        self.popen = SimpleNamespace(pid=pid)

    def discard(self) -> None:
        pass


def test_a_process_turning_ready_is_listed_by_the_pool_all_along(monkeypatch):
    """The move from starting to ready leaves no moment in which the process is in neither list: there
    ``idle_pids`` missed it and the abort tests' leftover check counted a live pool process."""
    from pike_harness.worker.supervise import prestart

    pid = 1 << 30  # above any pid_max: no process of that session exists to be listed with it
    seen: list[list[int]] = []
    pool = PrestartPool(SimpleNamespace(start_slots=SimpleNamespace(release=lambda: seen.append(pool.idle_pids()))),
                        ["cpu"], per_device=0,
                        registry=SimpleNamespace(remove=lambda token: seen.append(pool.idle_pids())))
    ready = _Ready(pid)
    pool._starting["cpu"].append((ready, 7))
    monkeypatch.setattr(prestart, "poll_ready", lambda spawned: True)
    pool._collect_ready()
    assert seen == [[pid], [pid]], "listed while it leaves the quiet registry and gives its start slot back"
    assert pool._ready["cpu"] == [ready] and pool._starting["cpu"] == []
    pool.close()
