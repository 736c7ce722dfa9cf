"""How the supervisor weighs a candidate's processes against its memory limit (sandbox.memory_bytes):
by their PSS (copy-on-write pages of forks count once), which is dear to read (smaps_rollup), so it is
read only when the RSS sum, which bounds it from above and comes with the /proc scan, is over the
limit. Checked on this test process itself, a real process holding torch."""

from __future__ import annotations

import os

from pike_harness.worker.supervise import sandbox


def test_smaps_is_read_only_when_the_rss_sum_is_over_the_limit(monkeypatch):
    me = sandbox._read_stat(os.getpid())
    assert me is not None and me.rss_bytes > 0
    reads = []
    real = sandbox.unique_memory_bytes
    monkeypatch.setattr(sandbox, "unique_memory_bytes", lambda info: reads.append(info.pid) or real(info))

    assert sandbox.memory_bytes([me, me], 2 * me.rss_bytes) == 2 * me.rss_bytes  # within by RSS: within by PSS
    assert reads == []

    weighed = sandbox.memory_bytes([me, me], 2 * me.rss_bytes - 1)  # over by RSS: the PSS decides
    assert reads == [os.getpid(), os.getpid()]
    assert 0 < weighed <= 2 * me.rss_bytes + 2 * 1024 * 1024  # PSS never exceeds RSS (pages moved meanwhile aside)
