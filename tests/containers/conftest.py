"""Fixtures for the queue, worker and container tests: two real CPU workers on one shared folder,
started once per session (starting a worker imports torch, which dominates these tests' time)."""

from __future__ import annotations

import pytest
from queue_helpers import NO_POOL, WorkerProcess


@pytest.fixture(scope="session")
def shared_queue(tmp_path_factory):
    """``(io_dir, [worker_a, worker_b])``: two workers, two slots each, serving one folder."""
    root = tmp_path_factory.mktemp("shared-queue")
    io_dir = root / "io"
    workers = [WorkerProcess(io_dir, root / f"worker-{name}.log", "--max-active", "2", *NO_POOL,
                             worker_id=f"shared-{name}") for name in ("a", "b")]
    try:
        for worker in workers:
            worker.wait_ready()
        yield io_dir, workers
    finally:
        codes = [worker.stop() for worker in workers]
    assert codes == [0, 0], "the shared workers must stop cleanly on SIGTERM:\n" + "\n".join(w.log() for w in workers)
