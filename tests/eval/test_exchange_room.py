"""An exchange folder without room is the candidate's verdict, and ``/dev/shm`` holds a folder only
with room for its candidate's whole disk limit.

A candidate may fill its exchange folder up to its disk limit (32 GB by default), and a folder in
``/dev/shm`` shares that file system with the host and the other candidates. One that filled it at
import made the reference process's ``torch.save`` of its hidden inputs fail with ENOSPC: the request
failed and the supervisor reported an infrastructure error ("the task's reference Model failed:
OSError: [Errno 28] No space left on device"), which stops a run. Now: the reference replies
``no_space`` (the candidate's ``rejected/exchange_file``), what it wrote is removed, and a folder goes
to ``/dev/shm`` only when the limits of all this process's folders there fit in its free space.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from corpus_cases import SMOKE

from pike_harness.worker.supervise import exchange

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return x * 2


def get_inputs():
    return [torch.randn(256, 256)]


def get_init_inputs():
    return []
"""

# The reference process's state in a process of its own whose files may not grow past 64 KB (the input
# sets are 768 KB): each write past it fails with EFBIG, as a full file system's would with ENOSPC.
WRITE_UNDER_FSIZE = """
import json, resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # EFBIG instead of the signal
from pike_harness.worker.supervise.reference import _Server
server = _Server(1 << 20)
resource.setrlimit(resource.RLIMIT_FSIZE, (65536, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
print(json.dumps(server.handle({"op": "inputs", "source": sys.argv[1], "seeds": [1, 2, 3], "out": sys.argv[2]})))
"""

FILLER = """# fills the exchange folder it finds bound into its sandbox, then behaves
import os

import torch.nn as nn
import torch.nn.functional as F

for line in open("/proc/self/mountinfo"):
    point = line.split()[4]
    if "pikeh-x-" in point:
        try:
            with open(os.path.join(point, "filler"), "wb") as out:
                while True:
                    out.write(bytes(1 << 20))
        except OSError:
            pass


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)
"""


def _write_inputs_in_a_subprocess(out: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", WRITE_UNDER_FSIZE, TASK, str(out)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_write_past_the_folder_s_room_is_the_candidate_s_and_leaves_no_partial_file(tmp_path):
    folder = tmp_path / "exchange"
    folder.mkdir()
    reply = _write_inputs_in_a_subprocess(folder / "inputs.pt")
    assert reply["ok"] is True and "sha256" not in reply, reply
    assert reply["no_space"] == ("the hidden inputs could not be written: no space was left in the exchange folder "
                                 "(File too large)"), reply
    assert list(folder.iterdir()) == []


@contextlib.contextmanager
def _small_tmpfs(where: Path, size_mb: int):
    """A tmpfs of ``size_mb`` at ``where`` for the block; the test skips where mounting is refused."""
    where.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_mb}m,mode=0700", "tmpfs", str(where)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"a tmpfs cannot be mounted here: {mounted.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_tmpfs_under_the_inputs_is_the_candidate_s_and_leaves_no_partial_file(tmp_path):
    from pike_harness.worker.supervise.reference import _Server

    with _small_tmpfs(tmp_path / "shm", 1) as shm:
        (shm / "another").write_bytes(bytes(512 << 10))  # 512 KB left, short of the sets' 768 KB
        reply = _Server(1 << 20).handle({"op": "inputs", "source": TASK, "seeds": [1, 2, 3],
                                         "out": str(shm / "inputs.pt")})
        assert reply.get("no_space", "").endswith("no space was left in the exchange folder (No space left on "
                                                  "device)"), reply
        assert sorted(p.name for p in shm.iterdir()) == ["another"]


def test_a_candidate_filling_its_exchange_folder_is_rejected_not_an_infrastructure_error(tmp_path):
    """End to end: a real evaluator whose exchange folders go to a small tmpfs (``exchange_root``),
    and a candidate that fills its own at import, within its disk limit."""
    from pikeh_local import LocalEvaluator

    from pike_harness.contracts.evaluation import EvaluatorOptions
    from pike_harness.contracts.model import Limits

    with _small_tmpfs(tmp_path / "shm", 48) as shm:
        os.chmod(shm, 0o755)
        evaluator = LocalEvaluator(EvaluatorOptions(device="cpu", protocol="quick", workdir=tmp_path / "work",
                                                    config=LocalEvaluator.Config(jobs=1, prestart=0)))
        try:
            evaluator.engine.settings.exchange_root = shm
            limits = Limits(compile_timeout_s=120, run_timeout_s=120, memory_mb=6000)
            result = evaluator.evaluate(SMOKE.task(5).eval_request(FILLER, limits=limits))
        finally:
            evaluator.close()
        assert (result.category, result.check) == ("rejected", "exchange_file"), result.reason
        assert "no space was left in the exchange folder" in (result.reason or "")
        assert list(shm.iterdir()) == []  # its folder went with its evaluation


def test_shared_memory_holds_a_folder_only_with_room_for_every_limit_there(tmp_path, monkeypatch):
    """Room for two folders at 1,000 MB: the third goes to the fallback; a removed folder's room is
    given back. Free space as statvfs would report it, fixed, so the choice is the test's alone."""
    shm, disk = tmp_path / "shm", tmp_path / "disk"
    shm.mkdir()
    disk.mkdir()
    monkeypatch.setattr(exchange, "SHARED_MEMORY", shm)
    monkeypatch.setattr(exchange, "free_bytes", lambda path: 2500 * 2**20)
    monkeypatch.setattr(exchange, "_RESERVED", {})
    first, second, third = (exchange.make(None, disk, room_mb=1000) for _ in range(3))
    assert (first.parent, second.parent, third.parent) == (shm, shm, disk)
    assert exchange.reserved_mb() == 2000
    first.rmdir()
    assert exchange.reserved_mb() == 1000 and exchange.make(None, disk, room_mb=1000).parent == shm
    assert exchange.make(None, disk, room_mb=3000).parent == disk  # a limit past all the free space
    assert exchange.make(tmp_path, disk).parent == tmp_path and exchange.reserved_mb() == 2000  # a root: no room held


def test_the_default_room_is_the_default_disk_limit():
    from pike_harness.worker.records import Limits

    assert exchange.ROOM_MB == Limits().disk_mb == 32768
