"""Say so when a run stops making progress, with every thread's stack, while it goes on waiting.

Why: a run waits on evaluations and LLM answers that each have their own time limits, but a wait
between them (a device lock, a queue) has none, so a deadlock in the evaluator stops a 12-hour run
without a word. On an H100 a run did wait for good that way (two candidates each waiting to run alone
for the other's model to leave the device). The watch changes nothing about the run: when evaluations
are open and the journal has not grown for ``PIKEH_STALL_WARN_S`` seconds (default 900), it prints one
line and appends every thread's stack to the run's log.txt, once per quiet spell.
"""

from __future__ import annotations

import faulthandler
import os
import time
from collections.abc import Callable

from pike_harness.host.store import LOG_FILE, RunStore, now

STALL_ENV = "PIKEH_STALL_WARN_S"
DEFAULT_STALL_S = 900.0


def stall_seconds() -> float:
    """The quiet spell that counts as a stall: ``PIKEH_STALL_WARN_S``, else DEFAULT_STALL_S (0 turns it off)."""
    try:
        return max(0.0, float(os.environ.get(STALL_ENV, DEFAULT_STALL_S)))
    except ValueError:
        return DEFAULT_STALL_S


class StallWatch:
    """Polled by the run's main loop: ``poll()`` is cheap and acts at most once per quiet spell."""

    def __init__(self, store: RunStore, open_count: Callable[[], int], say: Callable[[str], None],
                 threshold_s: float | None = None):
        self.store, self.open_count, self.say = store, open_count, say
        self.threshold_s = stall_seconds() if threshold_s is None else threshold_s
        self._told_for: float | None = None  # the journal write the last warning was about

    def poll(self) -> bool:
        """Warn if evaluations are open and the journal has been quiet too long; True when it warned."""
        last = self.store.last_write
        if self.threshold_s <= 0 or last == self._told_for:
            return False
        quiet_s = time.monotonic() - last
        open_now = self.open_count()
        if quiet_s < self.threshold_s or open_now == 0:
            return False
        self._told_for = last
        self.say(f"no evaluation or LLM answer has ended for {quiet_s:.0f} s while {open_now} evaluation(s) "
                 f"are open: the run may be stuck; every thread's stack is in {LOG_FILE} (it keeps waiting; "
                 "Ctrl-C stops it and the same command resumes)")
        with (self.store.path / LOG_FILE).open("a", encoding="utf-8") as handle:
            handle.write(f"{now()} stall: {quiet_s:.0f} s without a journal event, {open_now} evaluation(s) "
                         "open; the stacks of every thread follow\n")
            handle.flush()
            faulthandler.dump_traceback(file=handle, all_threads=True)
        return True
