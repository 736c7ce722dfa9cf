"""An exchange folder without room is the candidate's verdict, and ``/dev/shm`` holds a folder only
with room for its candidate's whole disk limit.

A candidate may fill its exchange folder up to its disk limit (32 GB by default), and a folder in
``/dev/shm`` shares that file system with the host and the other candidates. One that filled it at
import made the reference process's ``torch.save`` of its hidden inputs fail with ENOSPC: the request
failed and the supervisor reported an infrastructure error ("the task's reference Model failed:
OSError: [Errno 28] No space left on device"), which stops a run. Then every such write became the
candidate's ``rejected/exchange_file``, an honest candidate's too when others had filled the host's
``/dev/shm``. Now: the reference replies ``no_space``, what it wrote is removed, and the supervisor
measures whose it is (``no_space``): the candidate's verdict when its own usage explains it (its disk
limit reached, or a file system that holds little but its folders), else an infrastructure error that
says the host's shared memory or disk is full. A folder goes to ``/dev/shm`` only when the limits of
all this process's folders there fit in its free space. A built library handed out into a scratch
folder without room is judged the same way, and a build that found no space is the host's when the
build cache's disk is short of what a build may take.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
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


# -- whose is a write that found no space: the candidate's or the host's (``no_space``) --------------------

HONEST = """import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(x)
"""
INPUTS_BYTES = 3 * 256 * 256 * 4  # TASK's three input sets


def _fill(path: Path, size: int) -> Path:
    """``size`` bytes written to ``path`` (a tmpfs allocates them), fewer if its file system runs out."""
    with contextlib.suppress(OSError), open(path, "wb") as out:
        for _ in range(size >> 16):
            out.write(bytes(1 << 16))
    return path


def _no_space_in(exchange: Path) -> str:
    """The reference process's real write of TASK's hidden inputs into ``exchange``: it must find no space."""
    from pike_harness.worker.supervise.reference import _Server

    reply = _Server(1 << 20).handle({"op": "inputs", "source": TASK, "seeds": [1, 2, 3], "out": str(exchange / "inputs.pt")})
    assert reply.get("needed_bytes") == INPUTS_BYTES and "no space was left" in reply.get("no_space", ""), reply
    assert not (exchange / "inputs.pt").exists()
    return str(reply["no_space"])


def _blame(folders: list[Path], written: Path, limit_mb: int = 32768):
    from pike_harness.worker.supervise import no_space

    return no_space.blame(folders, written, limit_mb=limit_mb, needed_bytes=INPUTS_BYTES, max_entries=1000)


def test_a_candidate_that_filled_its_own_small_file_system_keeps_the_verdict_even_once_it_deleted_its_files(
        tmp_path):
    """A 4 MB tmpfs that holds nothing but the candidate's exchange folder (an ``exchange_root`` of its
    own, the docker evaluator's ``/scratch``), filled by it well within its 32 GB disk limit: its doing.
    Deleting its files after the write failed, to look small when it is measured, changes nothing: what
    others hold there is measured, not only what it holds."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with _small_tmpfs(tmp_path / "shm", 4) as shm:
        exchange = shm / "pikeh-x-1"
        exchange.mkdir()
        filler = _fill(exchange / "filler", 8 << 20)
        _no_space_in(exchange)
        blame = _blame([scratch, exchange], shm)
        assert blame.candidate, blame.reason
        assert "the candidate filled it" in blame.reason and "tmpfs mounted at" in blame.reason, blame.reason
        filler.unlink()
        again = _blame([scratch, exchange], shm)
        assert again.candidate, again.reason


def test_a_write_into_a_file_system_that_others_filled_is_the_host_s(tmp_path):
    """The same tmpfs filled by another tenant (a file beside the exchange folder), the candidate's
    folders empty: the host's shared memory is full, and the reason says how much is free, where."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    with _small_tmpfs(tmp_path / "shm", 4) as shm:
        exchange = shm / "pikeh-x-1"
        exchange.mkdir()
        _fill(shm / "another-tenant", 8 << 20)
        _no_space_in(exchange)
        blame = _blame([scratch, exchange], shm)
        assert not blame.candidate, blame.reason
        assert blame.reason.startswith("the host's shared memory is full, not by the candidate: "), blame.reason
        assert f"free of 4.0 MB on {shm} (tmpfs mounted at {shm})" in blame.reason, blame.reason
        assert "the candidate's folders hold 0.0 MB of its 32,768 MB disk limit" in blame.reason, blame.reason


def test_a_candidate_at_its_disk_limit_keeps_the_verdict_where_others_filled_the_rest(tmp_path):
    """Others hold most of the tmpfs and the candidate the rest, 1 MB in its scratch folder (on another
    file system) and 1 MB in its exchange folder: with the inputs, that is its 2 MB disk limit, so the
    write that found no space is its doing whoever holds the rest."""
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    _fill(scratch / "own", 1 << 20)
    with _small_tmpfs(tmp_path / "shm", 4) as shm:
        exchange = shm / "pikeh-x-1"
        exchange.mkdir()
        _fill(exchange / "own", 1 << 20)
        _fill(shm / "another-tenant", 8 << 20)
        _no_space_in(exchange)
        assert _blame([scratch, exchange], shm, limit_mb=2).candidate
        assert not _blame([scratch, exchange], shm, limit_mb=64).candidate  # far from a larger limit: the host's


def test_the_deciding_rule_on_the_host_s_real_disk(tmp_path):
    """``judge`` with the figures measured here, whether or not a tmpfs can be mounted: the host's own
    disk (``tmp_path``'s), which holds far more than a candidate's folders. A candidate far from its
    limit there is not the reason a write found no space; one at its limit is."""
    from pike_harness.worker.supervise import no_space, scratch_usage

    folder = tmp_path / "scratch"
    folder.mkdir()
    _fill(folder / "own", 1 << 20)
    room = no_space.room_of(tmp_path)
    assert room is not None and room.total > 0 and room.used > 0
    usage = scratch_usage.measure([folder], 1000)
    assert usage.bytes >= 1 << 20
    if room.used - usage.bytes <= no_space.others_allowance(room):
        pytest.skip(f"{tmp_path}'s file system holds almost nothing but this test's files: {room}")
    far = no_space.judge(candidate_bytes=usage.bytes, here_bytes=usage.bytes, limit_bytes=32768 * 2**20,
                         needed_bytes=INPUTS_BYTES, room=room)
    assert not far.candidate and far.reason.startswith("the host's "), far.reason
    at = no_space.judge(candidate_bytes=usage.bytes, here_bytes=usage.bytes, limit_bytes=usage.bytes + INPUTS_BYTES,
                        needed_bytes=INPUTS_BYTES, room=room)
    assert at.candidate, at.reason


def _evaluation_writing_into(tmp_path: Path, exchange: Path, **limits):
    """A supervisor's evaluation whose exchange folder is ``exchange``, with a real ``ReferenceOracle``
    whose requests are served in this process (``_Server``) instead of its own: the client's reply
    handling and the supervisor's verdict are the real ones, no candidate process is started."""
    from pike_harness.worker.records import EvalRequest, Limits
    from pike_harness.worker.supervise.reference import ReferenceOracle, _Server
    from pike_harness.worker.supervise.supervisor import Evaluation, WorkerSettings

    server = _Server(1 << 20)
    oracle = ReferenceOracle("cpu", tmp_path / "reference")
    oracle._call = lambda request, message, timeout_s, urgent, tick=None: server.handle(  # type: ignore[method-assign]
        {**message, "source": TASK})
    request = EvalRequest(task="t", reference_source=TASK, candidate_source="", device="cpu", limits=Limits(**limits))
    evaluation = Evaluation(request, oracle=oracle, settings=WorkerSettings(workdir=tmp_path / "work"))
    evaluation.scratch = tmp_path / "scratch"
    evaluation.scratch.mkdir()
    evaluation.spawned_exchange = exchange
    return evaluation


def test_the_supervisor_judges_a_full_exchange_folder_by_what_it_measures(tmp_path):
    """Through ``Evaluation``: the candidate's exchange folder filled by the candidate is its
    ``rejected/exchange_file``; the same write where another tenant filled the file system is an
    infrastructure error (the engine retries or stops on it), never a verdict."""
    from pike_harness.worker.supervise.errors import InfrastructureError

    with _small_tmpfs(tmp_path / "shm", 4) as shm:
        exchange = shm / "pikeh-x-1"
        exchange.mkdir()
        _fill(exchange / "filler", 8 << 20)
        (tmp_path / "own").mkdir()
        evaluation = _evaluation_writing_into(tmp_path / "own", exchange)
        try:
            result = evaluation.wait_for(threading.Lock())
        finally:
            evaluation.close()
        assert result is not None and (result.category, result.check) == ("rejected", "exchange_file"), result
        assert "no space was left in the exchange folder" in (result.reason or "")
        assert "the candidate filled it" in (result.reason or ""), result.reason

    with _small_tmpfs(tmp_path / "shm2", 4) as shm:
        exchange = shm / "pikeh-x-2"
        exchange.mkdir()
        _fill(shm / "another-tenant", 8 << 20)
        (tmp_path / "host").mkdir()
        evaluation = _evaluation_writing_into(tmp_path / "host", exchange)
        try:
            with pytest.raises(InfrastructureError) as raised:
                evaluation.wait_for(threading.Lock())
        finally:
            evaluation.close()
        assert str(raised.value).startswith("the host's shared memory is full, not by the candidate: "), raised.value
        assert str(raised.value).endswith("no space was left in the exchange folder (No space left on device)")


def test_an_honest_candidate_whose_shared_memory_others_filled_is_an_infrastructure_error(tmp_path):
    """End to end, as the candidate that fills its own folder above: a real evaluator whose exchange
    folders go to a small tmpfs, filled before the evaluation by another tenant. The honest candidate
    is not marked failed: the evaluation fails as the host's, saying so."""
    from pikeh_local import LocalEvaluator

    from pike_harness.contracts.evaluation import EvaluatorError, EvaluatorOptions
    from pike_harness.contracts.model import Limits

    with _small_tmpfs(tmp_path / "shm", 48) as shm:
        os.chmod(shm, 0o755)
        _fill(shm / "another-tenant", 46 << 20)
        evaluator = LocalEvaluator(EvaluatorOptions(device="cpu", protocol="quick", workdir=tmp_path / "work",
                                                    config=LocalEvaluator.Config(jobs=1, prestart=0)))
        try:
            evaluator.engine.settings.exchange_root = shm
            limits = Limits(compile_timeout_s=120, run_timeout_s=120, memory_mb=6000)
            with pytest.raises(EvaluatorError) as raised:
                evaluator.evaluate(SMOKE.task(5).eval_request(HONEST, limits=limits))
        finally:
            evaluator.close()
        assert "the host's shared memory is full, not by the candidate" in str(raised.value), raised.value
        assert sorted(p.name for p in shm.iterdir()) == ["another-tenant"]  # its folder went with its evaluation


# -- a built library handed out into a scratch folder without room, and a build that found none -------------

class _HandingOut:
    """A build cache that hands out one published library (the real ``_hand_out``), built beforehand."""

    def __init__(self, root: Path, size: int):
        import hashlib

        from pike_harness.worker.supervise.buildcache import BuildCache, _Entry

        self.cache = BuildCache(root)
        self.key = "a" * 64
        entry = root / "ext" / self.key
        entry.mkdir()
        data = os.urandom(size)
        (entry / "lib.so").write_bytes(data)
        self.entry = _Entry(hashlib.sha256(data).hexdigest(), "lib.so")
        self.root, self.disk_mb = self.cache.root, self.cache.disk_mb

    def serve(self, spec, device, scratch, **kwargs):
        return {"ok": True, "path": str(self.cache._hand_out(self.key, self.entry, scratch))}


class _NoReference:
    def hidden_seeds(self, request):
        return [7]

    def set_bytes(self, request):
        return None


def _evaluation_building(tmp_path: Path, scratch: Path, cache, **limits):
    from pike_harness.worker.records import EvalRequest, Limits
    from pike_harness.worker.supervise.supervisor import Evaluation, WorkerSettings

    request = EvalRequest(task="t", reference_source="", candidate_source="", device="cpu", limits=Limits(**limits))
    evaluation = Evaluation(request, oracle=_NoReference(),  # type: ignore[arg-type]
                            settings=WorkerSettings(workdir=tmp_path / "work", build_cache=cache))
    evaluation.scratch = scratch
    return evaluation


def _serve(evaluation):
    import time

    from pike_harness.worker.supervise.supervisor import _Concluded

    try:
        return evaluation._serve_build({}, time.monotonic() + 60, "compile", 60)
    except _Concluded as done:
        return done.result


def test_a_hand_out_into_a_scratch_folder_without_room_is_judged_by_what_is_measured(tmp_path):
    """The library (2 MB) copied into the candidate's scratch folder on a 4 MB tmpfs: the candidate's
    ``rejected/scratch_file`` when its own files filled it; an infrastructure error when another's did."""
    from pike_harness.worker.supervise.errors import InfrastructureError

    cache = _HandingOut(tmp_path / "cache", 2 << 20)
    with _small_tmpfs(tmp_path / "own", 4) as root:
        scratch = root / "eval-1"
        scratch.mkdir()
        _fill(scratch / "filler", 3 << 20)
        result = _serve(_evaluation_building(tmp_path, scratch, cache))
        assert (result.category, result.check) == ("rejected", "scratch_file"), result
        assert "No space left on device" in result.reason and "the candidate filled it" in result.reason, result.reason
    with _small_tmpfs(tmp_path / "host", 4) as root:
        scratch = root / "eval-2"
        scratch.mkdir()
        _fill(root / "another-candidate", 3 << 20)
        with pytest.raises(InfrastructureError, match="^the host's shared memory is full, not by the candidate: "):
            _serve(_evaluation_building(tmp_path, scratch, cache))
        (copy,) = scratch.glob("extension-*/lib.so")
        assert copy.stat().st_blocks == 0, "the partial copy gave its room back before the measurement"


class _FailedBuild:
    """A build cache whose build failed within its bounds, its log saying it found no space."""

    def __init__(self, root: Path, disk_mb: int):
        (root / "staging").mkdir(parents=True)
        self.root, self.disk_mb = root, disk_mb

    def serve(self, spec, device, scratch, **kwargs):
        return {"ok": False, "log": "/usr/bin/ld: final link failed: No space left on device", "hit": False}


def test_a_build_that_found_no_space_is_the_host_s_only_when_its_disk_is_short_of_a_build(tmp_path):
    """Measured on this host's real disk: a build may take more than it has free (a bound of 10**9 MB),
    so the failure is an infrastructure error that says so; with a bound of 1 MB, which it has, the
    log's words alone (the candidate's source can print them) change nothing: the reply goes back."""
    from pike_harness.worker.supervise.errors import InfrastructureError

    (tmp_path / "scratch").mkdir()
    short = _evaluation_building(tmp_path, tmp_path / "scratch", _FailedBuild(tmp_path / "short", 10**9),
                                 disk_mb=10**9)
    with pytest.raises(InfrastructureError, match="^a load_inline build found no space: the host's (disk|shared "
                                                  "memory) is full: .* free of .*, under the 1,000,000,000 MB"):
        _serve(short)
    room = _evaluation_building(tmp_path, tmp_path / "scratch", _FailedBuild(tmp_path / "room", 1))
    assert _serve(room) == {"ok": False, "log": "/usr/bin/ld: final link failed: No space left on device",
                            "hit": False}


HIDE = """
import os, socket, sys, time
path = sys.argv[1]
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
os.write(fd, bytes(3_900_000))
ends = socket.socketpair(socket.AF_UNIX)
socket.send_fds(ends[0], [b"x"], [fd])  # in flight, never received: no process holds it any more
os.close(fd)
os.unlink(path)
print("ready", flush=True)
time.sleep(120)
"""


def test_space_held_where_no_walk_sees_it_is_the_candidates_once_its_processes_end(tmp_path):
    """A file passed through a socket and never received, then unlinked, holds its blocks where neither
    the disk walk nor a process's descriptors or maps show it: measured, the exchange file system looks
    full by others, which would make the candidate's own doing the host's infrastructure error (an
    audit, 2026-11-30). The supervisor kills the candidate's processes and measures again: the room
    that came free was the candidate's, and so is the verdict."""
    from pike_harness.worker.supervise import scratch_usage

    with _small_tmpfs(tmp_path / "shm", 4) as shm:
        exchange = shm / "pikeh-x-3"
        exchange.mkdir()
        (tmp_path / "own").mkdir()
        evaluation = _evaluation_writing_into(tmp_path / "own", exchange)
        hider = subprocess.Popen([sys.executable, "-c", HIDE, str(exchange / "hidden")], stdout=subprocess.PIPE,
                                 text=True, start_new_session=True)
        try:
            assert hider.stdout is not None and hider.stdout.readline().strip() == "ready"
            assert scratch_usage.measure([exchange], 100, pids=[(hider.pid, None)]).bytes < 1 << 20
            evaluation.popen = hider
            result = evaluation.wait_for(threading.Lock())
        finally:
            hider.kill()
            hider.wait()
            evaluation.close()
        assert result is not None and (result.category, result.check) == ("rejected", "exchange_file"), result
        assert "came free" in (result.reason or "") and "once the candidate's processes ended" in (result.reason or "")


def test_room_another_evaluation_frees_while_the_supervisor_waits_is_not_the_candidate_s(tmp_path):
    """The host's shared memory full by another evaluation's folder, which this process removes while
    the supervisor waits to see whether the killed candidate held room: what comes free then cannot be
    told from the candidate's, so the failure stays the host's (it was the honest candidate's
    ``exchange_file`` before: an audit, 2026-12-01)."""
    from pike_harness.worker.supervise import trusted_files
    from pike_harness.worker.supervise.errors import InfrastructureError

    with _small_tmpfs(tmp_path / "shm", 4) as shm:
        exchange, neighbour = shm / "pikeh-x-3", shm / "pikeh-x-4"
        exchange.mkdir()
        neighbour.mkdir()
        _fill(neighbour / "inputs.pt", 8 << 20)  # fills the file system
        (tmp_path / "own").mkdir()
        evaluation = _evaluation_writing_into(tmp_path / "own", exchange)
        quiet = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
        kill = evaluation._kill

        def kill_then_neighbour_closes():  # the other evaluation's folder goes in the wait's window
            kill()
            trusted_files.remove_tree(neighbour)

        evaluation._kill = kill_then_neighbour_closes
        try:
            evaluation.popen = quiet
            with pytest.raises(InfrastructureError, match="not by the candidate"):
                evaluation.wait_for(threading.Lock())
        finally:
            quiet.kill()
            quiet.wait()
            evaluation.close()
        assert not neighbour.exists()


def test_a_build_short_of_room_the_candidate_held_where_no_walk_sees_it_is_the_candidate_s(tmp_path):
    """A build whose log says it found no space, on a build cache's disk filled by a file the candidate
    passed through a socket and never received (no walk, descriptor or map shows it): measured, the
    disk is short by others, which made the candidate's own doing an infrastructure error, retried on
    every attempt (an audit, 2026-12-01). The supervisor kills the candidate's processes and measures
    again, as for a trusted write: the room that came free makes it the candidate's ``disk_limit``."""
    with _small_tmpfs(tmp_path / "disk", 4) as disk:
        cache = _FailedBuild(disk, 2)
        (tmp_path / "scratch").mkdir()
        evaluation = _evaluation_building(tmp_path, tmp_path / "scratch", cache, disk_mb=2)
        hider = subprocess.Popen([sys.executable, "-c", HIDE, str(disk / "staging" / "hidden")],
                                 stdout=subprocess.PIPE, text=True, start_new_session=True)
        try:
            assert hider.stdout is not None and hider.stdout.readline().strip() == "ready"
            evaluation.popen = hider
            result = _serve(evaluation)
        finally:
            hider.kill()
            hider.wait()
        assert (result.category, result.check) == ("runtime_error", "disk_limit"), result
        assert "came free" in (result.reason or "") and hider.returncode is not None


def test_a_build_short_of_room_is_the_hosts_only_when_the_candidates_own_files_do_not_explain_it(tmp_path):
    """A build whose log says "No space left on device" is measured (the log is the candidate's to
    print): the build cache's disk short of a build's room is the host's, unless the candidate's own
    folders there hold what is missing (it filled the disk through its scratch folder, within its
    limit: an audit, 2026-11-30)."""
    from pike_harness.worker.supervise import no_space

    with _small_tmpfs(tmp_path / "disk", 4) as disk:
        staging, scratch = disk / "staging", disk / "scratch"
        staging.mkdir()
        scratch.mkdir()
        _fill(scratch / "own", 3 << 20)
        assert no_space.host_short(staging, 2 << 20) is not None
        assert no_space.host_short(staging, 2 << 20, own=[scratch]) is None
        (scratch / "own").unlink()
        _fill(disk / "another-tenant", 3 << 20)
        short = no_space.host_short(staging, 2 << 20, own=[scratch])
        assert short is not None and short.startswith("the host's "), short
