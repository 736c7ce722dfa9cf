"""What the supervisor does with the candidate's files while the candidate may still run: it never
recurses into one of its folders (a chain a thread keeps extending would hold it, and the device, for as
long as the candidate likes), its disk is policed while it waits for the reference process, and notes
that carry a file name it chose are kept escaped in the result.

Each test drives ``supervisor.Evaluation`` with a stand-in for the reference process and for the
candidate's channel (no process is started unless the test says so) and checks what happened on disk,
not only the verdict.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

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

    def write_inputs(self, request, seeds, path, timeout_s, tick=None):
        path.write_bytes(b"inputs")
        return None

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
