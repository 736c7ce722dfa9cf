"""A watcher thread for the run tests: ``then()`` once ``predicate()`` holds, polled (it waits on
events, not on a duration; ``timeout`` only ends a test whose event never comes)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


def when(predicate: Callable[[], bool], then: Callable[[], object], timeout: float = 120.0) -> threading.Thread:
    def watch() -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not predicate():
            time.sleep(0.02)
        then()

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread
