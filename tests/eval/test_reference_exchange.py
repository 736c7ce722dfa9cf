"""Reference outputs computed once and kept; hidden inputs as tensors, never seeds; no disk round trip.

The reference process's state (``reference._Server``) is exercised in this process (it is plain
torch); the whole path (exchange folder in shared memory, the candidate's view) through the session's
CPU evaluator and the corpus's ``seed_search`` candidate.
"""

from __future__ import annotations

import dataclasses
import os
import re
import secrets
from pathlib import Path

import pytest
import torch
from corpus_cases import CORPUS, load_case

from pike_harness.worker.output_file import write_outputs
from pike_harness.worker.supervise.exchange import ROOM_MB, sweep_exchange_folders
from pike_harness.worker.supervise.exchange import on_tmpfs as _on_tmpfs
from pike_harness.worker.supervise.exchange import shared_memory_root as _shared_memory_root
from pike_harness.worker.supervise.refcache import ByteLRU, tensor_bytes
from pike_harness.worker.supervise.reference import TaskInputsVary, _Server

TASK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(n))

    def forward(self, x):
        return x * self.scale


def get_inputs():
    return [torch.randn(4, 8)]


def get_init_inputs():
    return [8]
"""


def test_byte_lru_keeps_within_its_cap_and_evicts_the_oldest():
    cache = ByteLRU(100)
    made = []
    for key in ("a", "b", "a", "c"):
        cache.get_or_make(key, lambda k=key: made.append(k) or k, lambda _: 40)
    assert made == ["a", "b", "c"]  # "a" came from the cache the second time
    assert "b" not in cache and "a" in cache and "c" in cache  # "b" was the least recently used
    assert cache.held_bytes == 80 and cache.stats.to_dict() == {"hits": 1, "misses": 3, "evictions": 1}
    cache.get_or_make("huge", lambda: "x", lambda _: 101)  # larger than the cap: used, never kept
    assert "huge" not in cache and cache.held_bytes == 80
    assert tensor_bytes([[torch.zeros(3)], (torch.zeros(2, dtype=torch.float64), 7)]) == 12 + 16


@pytest.fixture
def server():
    """A reference process's state in this process; it sets torch's backend flags, restored after."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark)
    yield _Server(1 << 20)
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark = saved


def _compare(server: _Server, tmp_path, outputs, *, seeds=(1, 2, 3), precision="fp32", device="cpu"):
    path = tmp_path / f"outputs-{secrets.token_hex(4)}.pt"
    if isinstance(outputs, bytes):
        path.write_bytes(outputs)
    else:
        write_outputs(path, outputs)
    return server.handle({"op": "compare", "source": TASK, "weight_seed": 42, "precision": precision,
                          "device": device, "seeds": list(seeds), "outputs": str(path),
                          "labels": [f"set {s}" for s in seeds], "atol": 1e-5, "rtol": 1e-5,
                          "plan": [[0, index, False] for index in range(len(seeds))]})


def _right_answer(server: _Server, tmp_path) -> list[list[torch.Tensor]]:
    """The task's outputs for seeds 1, 2, 3, from the input sets the server writes (as a candidate gets them)."""
    inputs_path = tmp_path / "inputs.pt"
    server.handle({"op": "inputs", "source": TASK, "seeds": [1, 2, 3], "out": str(inputs_path)})
    inputs = torch.load(inputs_path, weights_only=True)
    torch.manual_seed(42)
    scale = torch.randn(8)
    return [[values[0] * scale] for values in inputs]


def test_reference_outputs_are_computed_once_per_task_seeds_and_mode(server, tmp_path):
    right = _right_answer(server, tmp_path)
    first = _compare(server, tmp_path, right)
    assert first["computed"] is True and first["comparison"]["category"] is None
    second = _compare(server, tmp_path, [[t + 1.0 for t in values] for values in right])
    assert second["computed"] is False and second["comparison"]["check"] == "allclose"
    assert _compare(server, tmp_path, right)["computed"] is False
    assert _compare(server, tmp_path, right, precision="tf32")["computed"] is True  # another mode
    assert _compare(server, tmp_path, right[:2], seeds=(1, 2))["computed"] is True  # another seed sequence
    stats = server.handle({"op": "stats"})
    assert stats["outputs"] == {"hits": 2, "misses": 3, "evictions": 0}
    assert stats["inputs"]["misses"] == 3  # input sets are made once per seed, whoever asks


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_references_stay_on_the_gpu_and_are_compared_there(server, tmp_path):
    right = _right_answer(server, tmp_path)
    before = torch.cuda.memory_allocated()
    first = _compare(server, tmp_path, right, device="cuda")
    assert first["computed"] is True and first["comparison"]["category"] is None, first
    (kept, _), = server.references._items.values()
    assert all(t.is_cuda for values in kept for t in values)
    wrong = _compare(server, tmp_path, [[t * 1.5 for t in values] for values in right], device="cuda")
    assert wrong["computed"] is False and wrong["comparison"]["check"] == "allclose"
    held = sum(t.numel() * t.element_size() for values in kept for t in values)
    assert torch.cuda.memory_allocated() - before <= held + (1 << 20)  # the model, the references: no outputs left


def test_malformed_or_linked_outputs_are_rejected_without_following(server, tmp_path):
    assert "no valid index" in _compare(server, tmp_path, b"not an outputs file at all")["malformed"]
    assert "holds 2 calls, expected 3" in _compare(server, tmp_path, [[torch.zeros(8)]] * 2)["malformed"]
    target = tmp_path / "elsewhere.pt"
    write_outputs(target, [[torch.zeros(4, 8)]] * 3)
    link = tmp_path / "link.pt"
    link.symlink_to(target)
    reply = server.handle({"op": "compare", "source": TASK, "weight_seed": 42, "precision": "fp32", "device": "cpu",
                           "seeds": [1, 2, 3], "outputs": str(link), "labels": ["a", "b", "c"], "atol": 1e-5,
                           "rtol": 1e-5, "plan": [[0, 0, False], [0, 1, False], [0, 2, False]]})
    assert reply["malformed"] == "the outputs file is a link"


def test_the_candidate_never_sees_a_hidden_seed_and_the_exchange_is_in_memory(corpus_results):
    _, result = corpus_results["seed_search"]
    assert result.category == "correct", result.reason
    stdout = result.stdout_tail
    # It found the folder its hidden inputs came from: nothing else there but the file its own outputs go to.
    listing = re.search(r"exchange: \[(.*)\]", stdout).group(1)
    assert "'inputs.pt'" in listing and set(listing.split(", ")) <= {"'inputs.pt'", "'outputs.pt'"}, listing
    numbers = set(re.search(r"numbers: (.*)", stdout).group(1).split())
    hidden = [str(seed) for seed in result.seeds["hidden"]]
    assert hidden and not numbers & set(hidden)
    # Shared memory holds a folder with room for its candidate's disk limit beyond those of the folders
    # there already (exchange.make): room for 16 of them covers every process the session batch runs at once.
    if _shared_memory_root(16 * ROOM_MB) is not None:
        assert result.environment["exchange"] == "shared_memory"


def test_candidates_of_a_task_share_hidden_inputs_and_one_reference_computation(cpu_evaluator):
    """Two evaluations of one task (made unique to this test): one reference computation per checked
    instance (the plan's first instance, then the second), same hidden sets; the drawn timed outputs
    are judged against the first instance's, kept since the check."""
    case = load_case(CORPUS / "ok_plain.py")
    oracle = cpu_evaluator.engine.provider.oracles["cpu"]
    before, served = oracle.stats()["outputs"], oracle.figures()
    request = case.request()
    request = dataclasses.replace(request, reference_source=request.reference_source + f"\n# {secrets.token_hex(8)}\n")
    first = cpu_evaluator.submit(request).result(timeout=300)
    second = cpu_evaluator.submit(dataclasses.replace(request, request_id=request.request_id + "-2")).result(timeout=300)
    assert first.category == second.category == "correct", (first.reason, second.reason)
    assert first.seeds["hidden"] == second.seeds["hidden"] and first.seeds["hidden"]
    after = oracle.stats()["outputs"]
    assert after["misses"] - before["misses"] == 2 and after["hits"] - before["hits"] == 2 + 2
    assert "reference" in first.stage_seconds and "inputs" in first.stage_seconds
    now = oracle.figures()  # the process's busy time: one input write and two comparisons each
    for op in ("inputs", "compare", "compare_timed"):
        assert now[op]["requests"] - served.get(op, {"requests": 0})["requests"] == 2, (op, served, now)
        assert now[op]["busy_s"] > served.get(op, {"busy_s": 0.0})["busy_s"]


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc/mounts")
def test_tmpfs_detection(tmp_path):
    assert _on_tmpfs(Path("/proc/self")) is False
    if _shared_memory_root(1) is not None:
        assert _on_tmpfs(Path("/dev/shm/x"))


def test_a_comparison_goes_before_waiting_input_writes():
    """Requests made while holding the device gate (urgent) pass those made before it (ordinary)."""
    import threading
    import time

    from pike_harness.worker.supervise.reference import _PriorityLock

    lock, order = _PriorityLock(), []

    def take(name: str, urgent: bool) -> None:
        with lock.hold(urgent):
            order.append(name)

    with lock.hold(urgent=False):
        ordinary = threading.Thread(target=take, args=("inputs", False))
        ordinary.start()
        urgent = threading.Thread(target=take, args=("compare", True))
        urgent.start()
        deadline = time.monotonic() + 10
        while lock._urgent == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
    ordinary.join(10)
    urgent.join(10)
    assert order == ["compare", "inputs"]


def test_exchange_folders_of_gone_harnesses_are_swept(tmp_path):
    import subprocess
    import sys

    from pike_harness.worker.supervise import sandbox

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    namespace, pid, start = sandbox.owner_name().split(".")
    assert int(pid) == os.getpid()
    dead = tmp_path / f"pikeh-x-{namespace}.{gone.stdout.strip()}.{start}-abc"
    reused = tmp_path / f"pikeh-x-{namespace}.{pid}.{int(start) + 1}-ghi"  # this pid, another process's start
    live = tmp_path / f"pikeh-x-{sandbox.owner_name()}-def"
    # A harness of another pid namespace sharing /dev/shm (a container with the host's IPC), whose pid
    # means nothing here, and a folder named the former way (the pid alone): both left alone.
    other = tmp_path / f"pikeh-x-{int(namespace) + 1}.{gone.stdout.strip()}.{start}-jkl"
    former = tmp_path / f"pikeh-x-{gone.stdout.strip()}-mno"
    for folder in (dead, reused, live, other, former):
        folder.mkdir()
        (folder / "outputs.pt").write_bytes(b"x")
    assert sweep_exchange_folders(tmp_path) == 2
    assert not dead.exists() and not reused.exists()
    assert live.exists() and other.exists() and former.exists()


def test_the_reference_process_runs_nothing_planted_in_its_work_folder(tmp_path):
    """In the docker evaluator without bubblewrap a candidate can write the evaluator's work folder,
    which is the reference process's working folder and HOME: a package named like ours there, or a
    .pth file in the user site folder under it, must not run in that trusted process."""
    import sys

    from pike_harness.worker.supervise.reference import ReferenceOracle

    work = tmp_path / "work"
    canary = tmp_path / "canary"
    plant = f"open({str(canary)!r}, 'a').write('ran\\n')\n"
    (work / "pike_harness").mkdir(parents=True)
    (work / "pike_harness" / "__init__.py").write_text(plant + "raise SystemExit(3)\n")
    (work / "torch.py").write_text(plant)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = work / ".local" / "lib" / version / "site-packages"
    site.mkdir(parents=True)
    (site / "planted.pth").write_text("import os; " + plant.strip().replace("\n", "; ") + "\n")
    oracle = ReferenceOracle("cpu", work)
    try:
        assert isinstance(oracle.stats(), dict)  # it started, imported the real package and answered
    finally:
        oracle.close()
    assert not canary.exists()


@pytest.mark.parametrize("plant", ["fifo", "link"])
def test_a_planted_log_neither_blocks_nor_redirects_the_reference_process(tmp_path, plant):
    """Where candidates share the harness's uid and can write its work folder (docker without
    bubblewrap), a FIFO at the reference process's log name blocked its (re)start forever, the oracle's
    lock held; a link sent its log elsewhere. Neither is opened: the log goes to a fresh name, the FIFO
    is never written, the link's target is untouched. The process is not dumpable either, so a
    same-uid candidate cannot read its memory through /proc/<pid>/mem."""
    import stat
    import threading

    from pike_harness.worker.supervise.reference import ReferenceOracle

    work = tmp_path / "work"
    work.mkdir(mode=0o700)
    oracle = ReferenceOracle("cpu", work)
    planted = oracle.log_path
    target = tmp_path / "target"
    target.write_bytes(b"the candidate's file")
    if plant == "fifo":
        os.mkfifo(planted)
    else:
        planted.symlink_to(target)
    replies: list = []
    starting = threading.Thread(target=lambda: replies.append(oracle.stats()), daemon=True)
    try:
        starting.start()
        starting.join(300)
        assert not starting.is_alive(), "the reference process's start blocked on the planted log"
        (stats,) = replies
        assert stats["dumpable"] == 0
        assert oracle.log_path != planted and oracle.log_path.parent == work
        assert stat.S_ISREG(os.lstat(oracle.log_path).st_mode)
        if plant == "fifo":
            assert stat.S_ISFIFO(os.lstat(planted).st_mode)
        else:
            assert planted.is_symlink() and target.read_bytes() == b"the candidate's file"
    finally:
        if starting.is_alive() and plant == "fifo":  # unblock the open that the fix is there to avoid
            os.close(os.open(planted, os.O_RDONLY | os.O_NONBLOCK))
            starting.join(300)
        oracle.close()


def test_the_reference_process_keeps_appending_to_its_own_log(tmp_path):
    """A regular file at the log's name (its own, from an earlier start) is appended to, as before."""
    from pike_harness.worker.supervise.reference import ReferenceOracle

    oracle = ReferenceOracle("cpu", tmp_path / "work")
    oracle.workdir.mkdir(mode=0o700)
    oracle.log_path.write_bytes(b"earlier start\n")
    fd = oracle._open_log()
    try:
        os.write(fd, b"this start\n")
    finally:
        os.close(fd)
    assert oracle.log_path.read_bytes() == b"earlier start\nthis start\n"


def _compare_timed(server: _Server, tmp_path, outputs, sets, plan, seeds=(1, 2, 3)):
    path = tmp_path / f"timed-{secrets.token_hex(4)}.pt"
    write_outputs(path, outputs)
    return server.handle({"op": "compare_timed", "source": TASK, "weight_seed": 42, "precision": "fp32",
                          "device": "cpu", "seeds": list(seeds), "outputs": str(path), "sets": sets,
                          "labels": [f"set {s}" for s in seeds], "atol": 1e-5, "rtol": 1e-5, "plan": plan})


def test_drawn_timed_outputs_are_judged_against_each_sets_checked_call(server, tmp_path):
    """The reference for a drawn timed output is that of its set's first sight in the check plan (the
    validated one): right passes, wrong is ``timed_output_mismatch`` naming the set; malformed files are
    the candidate's."""
    from pike_harness.worker.check_plan import check_plan

    right = _right_answer(server, tmp_path)
    plan = [[c.instance, c.set_index, c.repeat] for c in check_plan(3)]
    assert _compare_timed(server, tmp_path, right, [0, 1, 2], plan)["comparison"]["category"] is None
    assert _compare_timed(server, tmp_path, [right[2]], [2], plan)["comparison"]["category"] is None
    wrong = _compare_timed(server, tmp_path, [right[0], [right[1][0] + 1.0]], [0, 1], plan)["comparison"]
    assert (wrong["category"], wrong["check"]) == ("rejected", "timed_output_mismatch")
    assert "input set 1 (set 2)" in wrong["reason"] and "compared in the reference process" in wrong["reason"]
    swapped = _compare_timed(server, tmp_path, [right[1], right[0]], [0, 1], plan)["comparison"]
    assert swapped["check"] == "timed_output_mismatch"  # each entry is judged against its own set
    assert "holds 1 calls, expected 2" in _compare_timed(server, tmp_path, [right[0]], [0, 1], plan)["malformed"]


def test_the_second_instance_is_built_under_the_next_weight_seed(server, tmp_path):
    """Weights packed once per class give the second instance the first one's weights: with both built
    under one seed that matched; its reference is built under seed + 1, so it does not."""
    from pike_harness.worker.check_plan import check_plan

    right = _right_answer(server, tmp_path)
    inputs = torch.load(tmp_path / "inputs.pt", weights_only=True)
    torch.manual_seed(43)
    second = [inputs[0][0] * torch.randn(8)]
    plan = [[c.instance, c.set_index, c.repeat] for c in check_plan(3)]  # set 0 twice, 1, 2, set 0 on instance 1

    def judged(last):
        path = tmp_path / f"outputs-{secrets.token_hex(4)}.pt"
        write_outputs(path, [right[0], right[0], right[1], right[2], last])
        return server.handle({"op": "compare", "source": TASK, "weight_seed": 42, "precision": "fp32",
                              "device": "cpu", "seeds": [1, 2, 3], "outputs": str(path),
                              "labels": ["a", "b", "c"], "atol": 1e-5, "rtol": 1e-5, "plan": plan})["comparison"]

    assert judged(second)["category"] is None
    assert judged(right[0])["check"] == "state_across_instances"


def test_a_task_whose_input_shapes_follow_the_seed_fails_as_the_tasks_fault(server, tmp_path):
    """Every timed call reuses one buffer per input, so a task whose shapes follow the seed cannot be
    timed; the reference process names the task's fault (an infrastructure error) where a timed loop
    would have failed the candidate. A value that is not a tensor may vary: it is passed as it is."""
    varying = TASK.replace("torch.randn(4, 8)", "torch.randn(4 + torch.randint(0, 3, ()).item(), 8)")
    seeds = next([a, b] for a in range(1, 50) for b in range(a + 1, 50)
                 if _rows(varying, a) != _rows(varying, b))
    with pytest.raises(TaskInputsVary, match=r"seed \d+: float32 \[\d, 8\]; seed \d+: float32 \[\d, 8\].*must not depend"):
        server.handle({"op": "inputs", "source": varying, "seeds": seeds, "out": str(tmp_path / "in.pt")})
    assert not (tmp_path / "in.pt").exists()
    scalar = TASK.replace("return [torch.randn(4, 8)]", "return [torch.randn(4, 8), int(torch.randint(0, 9, ()))]")
    reply = server.handle({"op": "inputs", "source": scalar, "seeds": [1, 2, 3, 4], "out": str(tmp_path / "ok.pt")})
    assert reply["ok"] and reply["sha256"]


def _rows(source: str, seed: int) -> int:
    namespace: dict = {}
    exec(compile(source, "task", "exec"), namespace)  # noqa: S102 - the test's own task text
    torch.manual_seed(seed)
    return int(namespace["get_inputs"]()[0].shape[0])
