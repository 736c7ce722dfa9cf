"""How the supervisor weighs a candidate's processes against its memory limit (sandbox.memory_bytes):
copy-on-write pages shared by a forked family count once (PSS), and the dear PSS is read only when
the cheap RSS sum says the limit may be broken."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from pike_harness.worker.supervise import sandbox

MB = 1024 * 1024
FAMILY = """
import os, sys, time
block = bytearray(os.urandom(64 * 1024 * 1024))  # 64 MB, every page touched
for _ in range(3):
    if os.fork() == 0:
        break  # a child: shares the block copy-on-write
print("ready", flush=True)
time.sleep(120)
"""


@pytest.fixture
def family():
    """A process holding 64 MB and three forked children sharing it: (root, its live members)."""
    proc = subprocess.Popen([sys.executable, "-c", FAMILY], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        lines = 0
        while lines < 4 and time.monotonic() < deadline:  # each of the four says ready
            lines += proc.stdout.readline() == "ready\n"
        members = sandbox.session_members(proc.pid, fresh=True)
        assert len(members) == 4, members
        yield members
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the whole family: one process group
        proc.wait(timeout=30)


def test_a_forked_family_is_weighed_once_and_smaps_is_read_only_above_the_limit(family, monkeypatch):
    rss = sum(info.rss_bytes for info in family)
    assert rss > 4 * 64 * MB  # each member's RSS counts the shared block again
    pss = sandbox.memory_bytes(family, 100 * MB)  # over the limit by RSS: the PSS decides
    assert 64 * MB < pss < 2 * 64 * MB + 40 * MB, (pss / MB, rss / MB)

    reads = []
    real = sandbox.unique_memory_bytes
    monkeypatch.setattr(sandbox, "unique_memory_bytes", lambda info: reads.append(info.pid) or real(info))
    assert sandbox.memory_bytes(family, rss) == rss  # within the limit by RSS: within it by PSS too
    assert reads == []
    assert sandbox.memory_bytes(family, rss - 1) < rss
    assert sorted(reads) == sorted(info.pid for info in family)
