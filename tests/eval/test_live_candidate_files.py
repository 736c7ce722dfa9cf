"""What the supervisor does with the candidate's files while the candidate may still run: it never
recurses into one of its folders (a chain a thread keeps extending would hold it, and the device, for as
long as the candidate likes), its disk is policed while it waits for the reference process, and notes
that carry a file name it chose are kept escaped in the result.

Each test drives ``supervisor.Evaluation`` with a stand-in for the reference process and for the
candidate's channel (no process is started unless the test says so) and checks what happened on disk,
not only the verdict.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest
import stand_ins

from pike_harness.worker.records import EvalRequest, Limits
from pike_harness.worker.supervise import supervisor, trusted_files
from pike_harness.worker.supervise.errors import InfrastructureError
from pike_harness.worker.supervise.supervisor import Evaluation, RetryAlone, WorkerSettings

OOM = "the task's reference Model failed: OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


class _Channel:
    def close(self) -> None:
        pass


class _Oracle:
    """The reference process as the supervisor calls it; ``on_compare(outputs)`` is what the candidate
    does while its outputs are compared; the first ``starved`` comparisons run out of device memory."""

    def __init__(self, on_compare=None, starved: int = 0):
        self.on_compare, self.starved, self.compared = on_compare, starved, 0

    def hidden_seeds(self, request):
        return [7]

    def set_bytes(self, request):
        return None

    def write_inputs(self, request, seeds, path, timeout_s, tick=None):
        path.write_bytes(b"inputs")
        return None, hashlib.sha256(b"inputs").hexdigest()

    def compare(self, request, seeds, outputs, labels, plan, *, warmed, timeout_s):
        self.compared += 1
        if self.on_compare is not None:
            self.on_compare(outputs)
        if self.compared <= self.starved:
            raise InfrastructureError(OOM)
        return {"ok": True, "malformed": "the outputs file is a folder"}


def _evaluation(tmp_path: Path, oracle, **limits) -> Evaluation:
    request = EvalRequest(task="t", reference_source="", candidate_source="", device="cpu",
                          limits=Limits(**limits))
    evaluation = Evaluation(request, oracle=oracle, settings=WorkerSettings(workdir=tmp_path / "work"))
    evaluation.scratch = tmp_path / "scratch"
    evaluation.spawned_exchange = tmp_path / "exchange"
    evaluation.scratch.mkdir()
    evaluation.spawned_exchange.mkdir()
    evaluation.channel = _Channel()  # type: ignore[assignment]
    evaluation._send = lambda *args, **kwargs: None  # type: ignore[method-assign]
    evaluation._await = lambda *args, **kwargs: {"event": "checked"}  # type: ignore[method-assign]
    return evaluation


def _chain(folder: Path, depth: int) -> Path:
    """``folder`` made a folder holding ``d/d/.../d/leaf``: what the candidate leaves where a file goes."""
    folder.unlink(missing_ok=True)
    deep = folder
    for _ in range(depth):
        deep = deep / "d"
    deep.mkdir(parents=True)
    (deep / "leaf").write_bytes(b"x" * 100)
    return deep / "leaf"


@pytest.mark.parametrize("path", ["verdict", "retry_alone", "reference_starved"])
def test_a_folder_where_an_exchange_file_goes_is_set_aside_not_removed_while_the_candidate_runs(
        tmp_path, monkeypatch, path):
    """The candidate makes outputs.pt and inputs.pt folders while its outputs are compared. Removing them
    then (under the device lock, the candidate alive) walked a tree a thread of its can grow faster
    than it is removed: 36 s for 1.5 million levels. They are renamed aside, contents untouched, and go
    with the exchange folder once the evaluation is closed."""
    removals: list[str] = []
    real_remove = trusted_files.remove_tree
    monkeypatch.setattr(trusted_files, "remove_tree",
                        lambda folder: removals.append(os.fspath(folder)) or real_remove(folder))
    planted: list[Path] = []

    def plant(outputs: Path) -> None:
        if not planted:
            planted.extend([_chain(outputs, 5), _chain(outputs.parent / "inputs.pt", 5)])

    evaluation = _evaluation(tmp_path, _Oracle(plant, starved=1 if path != "verdict" else 0))
    exchange = evaluation.spawned_exchange
    assert exchange is not None
    if path == "retry_alone":
        with pytest.raises(RetryAlone):
            evaluation.check(shared=True)
    else:
        result = evaluation.check(shared=False)
        assert result is not None and (result.category, result.check) == ("rejected", "outputs_file")
    assert removals == [], "nothing was removed recursively while the candidate could run"
    assert not (exchange / "outputs.pt").exists()  # the name is free again (a check run again alone writes it)
    if path != "retry_alone":  # kept when the check runs again alone: it reads them again
        assert not (exchange / "inputs.pt").exists()
    names = ["outputs.pt"] if path == "retry_alone" else ["outputs.pt", "inputs.pt"]
    aside = {entry.name for entry in exchange.iterdir() if entry.name.startswith(supervisor.SET_ASIDE_PREFIX)}
    assert len(aside) == len(names), aside
    for name in names:
        (folder,) = [entry for entry in aside if entry.startswith(f"{supervisor.SET_ASIDE_PREFIX}{name}-")]
        leaf = exchange / folder / "d" / "d" / "d" / "d" / "d" / "leaf"
        assert leaf.read_bytes() == b"x" * 100, "its contents were not touched"
    evaluation.close()
    assert not exchange.exists(), "closed: the exchange folder is gone, what was set aside with it"
    assert os.fspath(exchange) in removals


def test_a_file_where_an_exchange_file_goes_is_unlinked_and_a_link_never_followed(tmp_path):
    target = tmp_path / "target"
    target.mkdir()
    (target / "kept").write_bytes(b"k")

    def plant(outputs: Path) -> None:
        outputs.unlink(missing_ok=True)
        outputs.symlink_to(target, target_is_directory=True)

    evaluation = _evaluation(tmp_path, _Oracle(plant))
    evaluation.check()
    exchange = evaluation.spawned_exchange
    assert exchange is not None and sorted(os.listdir(exchange)) == []
    assert (target / "kept").read_bytes() == b"k"
    evaluation.close()


class _Lock:
    """The device's lock as ``wait_for`` takes it: not free the first time, free the next."""

    def __init__(self) -> None:
        self.asked = 0

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        self.asked += 1
        return self.asked > 1

    def release(self) -> None:
        pass


FILLS_ITS_SCRATCH = """
import os, sys, time
with open(os.path.join(sys.argv[1], "big"), "wb") as handle:
    handle.write(os.urandom(3 << 20))
print("ready", flush=True)
time.sleep(600)
"""


def test_a_file_deleted_but_held_open_counts_against_the_disk_limit(tmp_path):
    """The candidate writes 3 MB into a file it unlinked (no folder lists it; unlinking the supervisor's
    .stdout does the same for whatever it prints): over a 1 MB disk limit, it is judged and killed."""
    evaluation = _evaluation(tmp_path, _Oracle(), disk_mb=1)
    assert evaluation.scratch is not None
    process = stand_ins.start(stand_ins.HOLDS_A_DELETED_FILE, evaluation.scratch)
    evaluation.popen = process
    try:
        assert os.listdir(evaluation.scratch) == []
        result = evaluation.wait_for(_Lock())
        assert result is not None and (result.category, result.check) == ("runtime_error", "disk_limit")
        assert "deleted but held open" in (result.reason or ""), result.reason
        assert process.poll() is not None, "the candidate's process was killed"
    finally:
        process.kill()
        process.wait()
        evaluation.close()


def test_the_candidate_is_policed_while_it_waits_for_the_reference_process(tmp_path):
    """Writing the hidden inputs waits for the reference process, which other candidates' comparisons
    and timings hold for minutes; nothing was policed meanwhile. Here it is held throughout: the
    candidate, over its disk limit, is judged and killed during that wait, and nothing was sent to the
    reference process (it never started, no inputs were written)."""
    from pike_harness.worker.supervise.reference import ReferenceOracle

    oracle = ReferenceOracle("cpu", tmp_path / "reference")
    evaluation = _evaluation(tmp_path, oracle, disk_mb=1)
    assert evaluation.scratch is not None and evaluation.spawned_exchange is not None
    process = stand_ins.start(FILLS_ITS_SCRATCH, evaluation.scratch)
    evaluation.popen = process
    held = oracle._lock.hold(urgent=False)
    held.__enter__()  # another candidate's timing holds the reference process
    results: list = []
    waiting = threading.Thread(target=lambda: results.append(evaluation.wait_for(_Lock())), daemon=True)
    try:
        waiting.start()
        waiting.join(120)
        assert not waiting.is_alive(), "the wait for the reference process never policed the candidate"
        (result,) = results
        assert result is not None and (result.category, result.check) == ("runtime_error", "disk_limit")
        assert process.poll() is not None, "the candidate's process was killed"
        assert oracle.pid is None and not (evaluation.spawned_exchange / "inputs.pt").exists()
        assert oracle._lock._urgent == 0 and oracle._lock._held  # still the other holder's, and only its
    finally:
        held.__exit__(None, None, None)
        waiting.join(600)
        process.kill()
        process.wait()
        oracle.close()
        evaluation.close()


def test_why_a_jit_cache_was_not_shared_reaches_the_result_escaped_and_cut(tmp_path, monkeypatch):
    """The note was set on the evaluation's environment after the verdict had copied it: lost. It names
    a file the candidate chose (a terminal escape, a megabyte of name): kept in the result, escaped and cut."""
    from pike_harness.worker.supervise import jit_caches

    note = "the JIT cache was not shared: triton/\x1b]52;c;cGF5bG9hZA==\x07" + "n" * 100_000 + " is a FIFO"
    published: list[Path] = []
    monkeypatch.setattr(jit_caches, "publish", lambda root, folder, source, mode: published.append(folder) or note)
    evaluation = _evaluation(tmp_path, _Oracle())
    assert evaluation.scratch is not None
    evaluation.settings.jit_cache_root = tmp_path / "jit"
    evaluation.jit_folder = evaluation.scratch / "jit"
    result = evaluation._conclude("correct", None, None)
    evaluation.close()
    assert published == [tmp_path / "scratch" / "jit"]
    kept = result.environment.get("jit_cache")
    assert kept is not None and kept.startswith("the JIT cache was not shared: triton/\\x1b]52;"), kept
    assert "\x1b" not in kept and "\x07" not in kept and len(kept) < 1_000


class _TimedOracle(_Oracle):
    """As ``_Oracle``; the first ``starved`` judgements of the drawn timed outputs run out of device memory,
    then they pass."""

    def __init__(self, starved: int):
        super().__init__()
        self.timed_starved, self.timed = starved, 0

    def compare_timed(self, request, seeds, outputs, sets, labels, plan, *, timeout_s, fresh_seeds=()):
        self.timed += 1
        if self.timed <= self.timed_starved:
            raise InfrastructureError(OOM)
        return {"ok": True, "comparison": {"checks": [], "category": None}}


@pytest.mark.parametrize("starved", [1, 9])
def test_a_reference_starved_judging_the_timed_outputs_ends_the_candidate_first(tmp_path, starved):
    """The drawn timed outputs are judged while the candidate still runs, and may hold the device memory
    the reference process needs: as for the check, its processes are ended and the judgement made again.
    If it runs then, the candidate held the memory (``memory_limit``); if not, the memory is held
    elsewhere and the error stays the infrastructure's. The exchange file is cleared either way."""
    oracle = _TimedOracle(starved)
    evaluation = _evaluation(tmp_path, oracle)
    evaluation._await = lambda *args, **kwargs: {"event": "sampled", "sets": [0]}  # type: ignore[method-assign]
    killed: list[bool] = []
    evaluation._kill = lambda: killed.append(True)  # type: ignore[method-assign]
    evaluation.exchange = evaluation.spawned_exchange
    assert evaluation.exchange is not None
    (evaluation.exchange / "timed.pt").write_bytes(b"outputs")
    try:
        if starved == 1:
            with pytest.raises(supervisor.Concluded) as done:
                evaluation._judge_timed_outputs()
            assert (done.value.result.category, done.value.result.check) == ("runtime_error", "memory_limit")
        else:
            with pytest.raises(InfrastructureError, match="held outside this evaluation"):
                evaluation._judge_timed_outputs()
        assert killed and oracle.timed == min(starved, 4) + (starved == 1)
        assert not (evaluation.exchange / "timed.pt").exists()
    finally:
        evaluation.close()
