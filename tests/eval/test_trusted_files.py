"""The trusted side never touches what a candidate can write (worker/supervise/trusted_files.py).

Two halves. Unit tests of the module: links, FIFOs, sockets, devices, oversized and swapped files are
refused without a hang or a write elsewhere, and the tree removal survives what a candidate can
leave. Then the hostile corpus in ``corpus_files/``: real candidates in the real sandbox, evaluated
with an honest neighbour in the session batch (conftest.py) by the one CPU evaluator, which has a
secret in its (hidden) work folder and a canary in its environment; each test checks what happened
outside the sandbox.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import tempfile
from pathlib import Path

import pytest
from corpus_cases import HERE, cases

from pike_harness.kit.failure_reports import failure_report
from pike_harness.worker.supervise import jit_caches, trusted_files
from pike_harness.worker.supervise.buildcache import _built_library, jit_cache_key
from pike_harness.worker.supervise.trusted_files import UntrustedFile

FILES_CORPUS = HERE / "corpus_files"
CANARY_NAME = "PIKEH_FILES_CANARY"  # conftest.py puts it in the evaluator's environment


# -- the module, alone ---------------------------------------------------------------------------


@pytest.fixture
def planted(tmp_path: Path) -> dict[str, Path]:
    """A folder as a candidate leaves it: a link to a secret outside, a link to /dev/zero and to
    /proc/self/environ, a FIFO, a bound unix socket, a folder, a plain file."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("the-secret")
    folder = tmp_path / "planted"
    folder.mkdir()
    (folder / "secret_link").symlink_to(outside / "secret.txt")
    (folder / "zero").symlink_to("/dev/zero")
    (folder / "environ").symlink_to("/proc/self/environ")
    os.mkfifo(folder / "fifo")
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(folder / "socket"))
    (folder / "folder").mkdir()
    (folder / "plain").write_bytes(b"x" * 100)
    yield {"folder": folder, "outside": outside}
    listener.close()


@pytest.mark.timeout(60)
def test_every_lying_file_is_refused_without_a_hang(planted):
    folder = planted["folder"]
    for name, says in (
        ("secret_link", "is a link"),
        ("zero", "is a link"),
        ("environ", "is a link"),
        ("fifo", "a FIFO"),
        ("socket", "socket"),
        ("folder", "a folder"),
    ):
        with pytest.raises(UntrustedFile, match=says):
            trusted_files.read_regular(folder / name, 1000)
    with pytest.raises(UntrustedFile, match="over the 10-byte cap"):
        trusted_files.read_regular(folder / "plain", 10)
    assert trusted_files.read_regular(folder / "plain", 1000) == b"x" * 100
    assert trusted_files.tail(folder / "secret_link", 100) == ""  # a log by path: a link reads as nothing


@pytest.mark.timeout(60)
def test_a_name_swapped_in_a_loop_never_yields_the_links_target(planted):
    """Between any check and use: a thread swaps one name between a plain file and a link to a secret
    as fast as it can; every read gets the plain content or a refusal, never the secret."""
    import threading

    folder, outside = planted["folder"], planted["outside"]
    name, stop = folder / "swapped", threading.Event()

    def swap() -> None:
        while not stop.is_set():
            for make in (lambda p: p.write_text("plain"), lambda p: p.symlink_to(outside / "secret.txt")):
                (folder / "next").unlink(missing_ok=True)
                make(folder / "next")
                os.replace(folder / "next", name)

    thread = threading.Thread(target=swap)
    thread.start()
    seen = set()
    try:
        for _ in range(2000):
            try:
                seen.add(trusted_files.read_regular(name, 100))
            except UntrustedFile as exc:
                seen.add(str(exc).endswith(("is a link", "is missing")))
    finally:
        stop.set()
        thread.join()
    assert b"the-secret" not in seen and seen <= {b"plain", True}


@pytest.mark.timeout(60)
def test_creating_a_file_never_writes_through_what_is_there(planted):
    folder, outside = planted["folder"], planted["outside"]
    for name in ("secret_link", "fifo", "socket", "folder", "plain"):
        with pytest.raises(UntrustedFile):
            trusted_files.create_exclusive(folder / name)
    assert (outside / "secret.txt").read_text() == "the-secret"
    assert (folder / "plain").read_bytes() == b"x" * 100


def test_a_log_tail_through_its_descriptor_is_bounded(tmp_path):
    fd = trusted_files.create_exclusive(tmp_path / "log", readable=True)
    try:
        os.ftruncate(fd, 1 << 40)  # a sparse terabyte, as a candidate can make of its own stdout
        os.lseek(fd, 0, os.SEEK_END)
        trusted_files.write_all(fd, b"last words")
        assert trusted_files.tail_fd(fd, 50).endswith("last words")
        assert len(trusted_files.tail_fd(fd, 50)) == 50
    finally:
        os.close(fd)


@pytest.mark.timeout(120)
def test_tree_removal_survives_depth_links_fifos_sockets_and_locked_folders(planted, tmp_path):
    """1,500 levels (past Python's recursion limit and the descriptor budget), a link to a folder
    outside, a FIFO, a socket, a folder made unreadable inside one made read-only: all gone, nothing
    outside touched, no problem reported."""
    folder, outside = planted["folder"], planted["outside"]
    (folder / "outside_folder").symlink_to(outside)
    fd = os.open(folder, os.O_RDONLY)
    for _ in range(1500):
        os.mkdir("d", dir_fd=fd)
        deeper = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = deeper
    os.close(fd)
    (folder / "locked" / "inner").mkdir(parents=True)
    (folder / "locked" / "inner" / "file").write_text("x")
    os.chmod(folder / "locked" / "inner", 0)
    os.chmod(folder / "locked", stat.S_IRUSR | stat.S_IXUSR)
    assert trusted_files.remove_tree(folder) == []
    assert not folder.exists()
    assert (outside / "secret.txt").read_text() == "the-secret"
    link = tmp_path / "link_to_outside"
    link.symlink_to(outside)
    assert trusted_files.remove_tree(link) == []  # a link given as the tree: the link goes, not its folder
    assert not link.is_symlink() and (outside / "secret.txt").exists()


def test_copy_tree_copies_only_folders_and_plain_files_within_caps(planted, tmp_path):
    (planted["folder"] / "folder" / "nested").write_text("n")
    target = tmp_path / "copy"
    target.mkdir()
    source_fd, target_fd = os.open(planted["folder"], os.O_RDONLY), os.open(target, os.O_RDONLY)
    try:
        trusted_files.copy_tree(source_fd, target_fd, max_files=100, max_bytes=1000)
    finally:
        os.close(source_fd)
        os.close(target_fd)
    assert sorted(p.name for p in target.rglob("*")) == ["folder", "nested", "plain"]
    capped = tmp_path / "capped"
    capped.mkdir()
    source_fd, target_fd = os.open(planted["folder"], os.O_RDONLY), os.open(capped, os.O_RDONLY)
    try:
        with pytest.raises(UntrustedFile, match="cap"):
            trusted_files.copy_tree(source_fd, target_fd, max_files=100, max_bytes=50)
    finally:
        os.close(source_fd)
        os.close(target_fd)


def test_a_built_library_behind_a_link_is_never_published(tmp_path):
    """The builder (which runs the candidate's flags) leaves its library, or its build folder, as a
    link to a file of its choosing: the supervisor refuses it instead of copying that file."""
    (tmp_path / "secret").write_text("k")
    staging = tmp_path / "staging"
    (staging / "build").mkdir(parents=True)
    (staging / "build" / "ext.so").symlink_to(tmp_path / "secret")
    fd = os.open(staging, os.O_RDONLY)
    try:
        with pytest.raises(UntrustedFile, match="link"):
            _built_library(fd, "ext.so")
        (staging / "build" / "ext.so").unlink()
        (staging / "build").rmdir()
        (staging / "build").symlink_to(tmp_path)
        with pytest.raises(UntrustedFile, match="link"):
            _built_library(fd, "secret")
    finally:
        os.close(fd)


def test_a_squatted_jit_entry_is_removed_and_never_followed(tmp_path):
    """What an older harness let a candidate plant in the shared JIT root (a plain file or a link where
    a source's folder goes) is removed at that source's next evaluation, never followed or fatal."""
    root, outside = tmp_path / "jit", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "keep").write_text("keep")
    for index, plant in enumerate((lambda p: p.write_text("squatted"), lambda p: p.symlink_to(outside))):
        source = f"source {index}"
        plant(root / jit_cache_key(source, None))
        scratch = tmp_path / f"scratch{index}"
        scratch.mkdir()
        folder, env = jit_caches.prepare(root, scratch, source, None)
        assert folder.parent == scratch and env["TRITON_CACHE_DIR"] == str(folder / "triton")
        assert not (root / jit_cache_key(source, None)).exists()
        (folder / "triton").mkdir()
        (folder / "triton" / "kernel.bin").write_bytes(b"k")
        (folder / "triton" / "escape").symlink_to(outside)
        assert jit_caches.publish(root, folder, source, None) is None
        published = root / jit_cache_key(source, None)
        assert (published / "triton" / "kernel.bin").read_bytes() == b"k"
        assert not (published / "triton" / "escape").exists()  # links are not shared
        again, _ = jit_caches.prepare(root, scratch, source, None)
        assert (again / "triton" / "kernel.bin").read_bytes() == b"k"
    assert (outside / "keep").read_text() == "keep"


def _tree_bytes(folder: Path) -> tuple[int, int]:
    """What the files below ``folder`` really hold: apparent bytes and bytes allocated on disk."""
    apparent = allocated = 0
    for path in folder.rglob("*"):
        info = path.lstat()
        apparent += info.st_size
        allocated += info.st_blocks * 512
    return apparent, allocated


def _jit_folder(tmp_path: Path, root: Path, source: str, files: dict[str, int]) -> Path:
    """A candidate's JIT folder (from ``prepare``) holding ``files`` (path under it: bytes, written)."""
    scratch = Path(tempfile.mkdtemp(prefix="scratch-", dir=tmp_path))
    folder, _ = jit_caches.prepare(root, scratch, source, None)
    for name, size in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"k" * size)
    return folder


def test_a_sparse_file_in_a_jit_folder_is_counted_in_full_and_never_fills_the_shared_cache(tmp_path):
    """A 1 GiB sparse file costs its candidate a few kB of disk; copied, it would be 1 GiB in the
    persistent cache, for every source that carries one: it is over the entry's cap, not shared."""
    root = tmp_path / "jit"
    folder = _jit_folder(tmp_path, root, "sparse source", {"triton/kernel.cubin": 10})
    (folder / "inductor").mkdir()
    with open(folder / "inductor" / "graph", "wb") as sparse:
        sparse.truncate(1 << 30)
    assert _tree_bytes(folder)[1] < 1 << 20  # what the candidate's disk pays
    assert jit_caches.MAX_BYTES < 1 << 30
    note = jit_caches.publish(root, folder, "sparse source", None)
    assert note is not None and "cap" in note
    assert not (root / jit_cache_key("sparse source", None)).exists()
    apparent, allocated = _tree_bytes(root)
    assert apparent <= jit_caches.MAX_BYTES and allocated <= jit_caches.MAX_BYTES
    assert [p.name for p in root.iterdir()] == []  # the staging folder is gone too


def test_only_the_triton_and_inductor_folders_are_shared(tmp_path):
    root = tmp_path / "jit"
    folder = _jit_folder(tmp_path, root, "source", {"triton/a.cubin": 3, "inductor/fxgraph/b": 4, "other/c": 5,
                                                     "top.bin": 6})
    assert jit_caches.publish(root, folder, "source", None) is None
    entry = root / jit_cache_key("source", None)
    assert sorted(p.name for p in entry.iterdir()) == [".charge", "inductor", "triton"]
    again = _jit_folder(tmp_path, root, "source", {})
    assert sorted(str(p.relative_to(again)) for p in again.rglob("*") if p.is_file()) == [
        "inductor/fxgraph/b", "triton/a.cubin"]


def test_the_shared_jit_cache_evicts_the_least_recently_used_entries_past_its_total(tmp_path, monkeypatch):
    """Every correct candidate with a new source adds an entry; past the total the entries used
    longest ago go (whole, renamed out of the way first), the one just published stays."""
    root = tmp_path / "jit"
    entry_charge = 1000 + 3 * jit_caches.BLOCK  # 1,000 bytes in one file, a folder, the entry itself
    monkeypatch.setattr(jit_caches, "MAX_TOTAL_BYTES", 2 * entry_charge + 10)
    entries = {}
    for when, source in enumerate(("a", "b")):
        assert jit_caches.publish(root, _jit_folder(tmp_path, root, source, {"triton/k.cubin": 1000}),
                                  source, None) is None
        entries[source] = root / jit_cache_key(source, None)
        os.utime(entries[source], (1_000 + when, 1_000 + when))  # published long ago, "a" first
    assert (entries["a"] / ".charge").read_text() == str(entry_charge)
    _jit_folder(tmp_path, root, "a", {})  # "a" is used again: "b" is now the least recently used
    assert jit_caches.publish(root, _jit_folder(tmp_path, root, "c", {"triton/k.cubin": 1000}), "c", None) is None
    assert sorted(p.name for p in root.iterdir()) == sorted(
        [entries["a"].name, jit_cache_key("c", None)])
    assert (entries["a"] / "triton" / "k.cubin").read_bytes() == b"k" * 1000
    apparent, _ = _tree_bytes(root)
    assert apparent <= jit_caches.MAX_TOTAL_BYTES


def test_eviction_measures_old_entries_keeps_their_age_and_never_follows_a_link(tmp_path, monkeypatch):
    """An entry an older version published (no recorded charge) is measured without following the
    link it may hold, keeps its age, and goes first; a removal a crash left behind is finished."""
    root, outside = tmp_path / "jit", tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_bytes(b"x" * 5000)
    old = root / jit_cache_key("old", None)
    (old / "triton").mkdir(parents=True)
    (old / "triton" / "k.cubin").write_bytes(b"k" * 1000)
    (old / "triton" / "escape").symlink_to(outside)
    os.utime(old, (1_000, 1_000))
    (root / ".evicted-0123").mkdir()
    (root / ".evicted-0123" / "left").symlink_to(outside / "keep")
    monkeypatch.setattr(jit_caches, "MAX_TOTAL_BYTES", 10 ** 9)
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        jit_caches.evict(root, root_fd)
        # 1,000 bytes, a block each for the folder, the file, the link and the entry: nothing behind the link
        assert int((old / ".charge").read_text()) == 1000 + 4 * jit_caches.BLOCK
        assert old.stat().st_mtime == 1_000
        monkeypatch.setattr(jit_caches, "MAX_TOTAL_BYTES", 0)
        jit_caches.evict(root, root_fd)
    finally:
        os.close(root_fd)
    assert list(root.iterdir()) == []
    assert (outside / "keep").read_bytes() == b"x" * 5000


@pytest.mark.timeout(120)
def test_the_reference_process_refuses_planted_exchange_files(tmp_path):
    """inputs.pt planted as a link (to a file outside) or a FIFO: refused, the target untouched, no
    hang; outputs.pt as a FIFO: malformed, no hang."""
    torch = pytest.importorskip("torch", reason="the checked tensor file needs torch to write")
    from pike_harness.worker.supervise.reference import _Server

    task = (
        "import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        return x * 2\ndef get_inputs():\n    return [torch.randn(4)]\ndef get_init_inputs():\n    return []\n"
    )
    server = _Server(1 << 20)
    target = tmp_path / "target.txt"
    target.write_text("untouched")
    (tmp_path / "link.pt").symlink_to(target)
    os.mkfifo(tmp_path / "fifo.pt")
    for name in ("link.pt", "fifo.pt"):
        reply = server.handle({"op": "inputs", "source": task, "seeds": [1], "out": str(tmp_path / name)})
        assert reply["ok"] and "could not be written" in reply["planted"], reply
    assert target.read_text() == "untouched"
    written = server.handle({"op": "inputs", "source": task, "seeds": [1], "out": str(tmp_path / "new.pt")})
    sets = torch.load(tmp_path / "new.pt")
    assert written == {"ok": True, "sha256": hashlib.sha256((tmp_path / "new.pt").read_bytes()).hexdigest(),
                       "set_bytes": sum(t.numel() * t.element_size() for t in sets[0])}
    assert len(sets) == 1

    # The candidate's process loads the file only as the reference process wrote it; anything the
    # candidate did to it since (its exchange folder is its own to write) is its verdict, never a hang
    # or an error the harness would take for its own.
    from pike_harness.worker.inside import child
    from pike_harness.worker.inside import trusted as T

    good = (tmp_path / "new.pt").read_bytes()
    assert child._exchange_bytes(T, str(tmp_path / "new.pt"), written["sha256"]) == good
    (tmp_path / "cut.pt").write_bytes(good[: len(good) // 2])
    (tmp_path / "linked.pt").symlink_to(tmp_path / "new.pt")
    for name, said in (("cut.pt", "is not what the reference process wrote there"),
                       ("linked.pt", "could not be read from the exchange folder"),
                       ("fifo.pt", "not a plain file"), ("absent.pt", "could not be read")):
        with pytest.raises(child.Verdict) as verdict:
            child._exchange_bytes(T, str(tmp_path / name), written["sha256"])
        assert (verdict.value.category, verdict.value.check) == ("rejected", "exchange_file")
        assert said in verdict.value.reason, verdict.value.reason
    reply = server.handle(
        {
            "op": "compare",
            "source": task,
            "weight_seed": 1,
            "precision": "fp32",
            "device": "cpu",
            "seeds": [1],
            "outputs": str(tmp_path / "fifo.pt"),
            "labels": ["a"],
            "atol": 1e-5,
            "rtol": 1e-5,
            "plan": [[0, 0, False]],
        }
    )
    assert reply["malformed"] == "the outputs file is a FIFO, not a plain file"


# -- the hostile corpus, evaluated ---------------------------------------------------------------


@pytest.fixture(scope="session")
def files_results(sandboxed_batch):
    """Every candidate of corpus_files/, evaluated in the session batch (conftest.py) by the one
    sandboxed CPU evaluator, which has a secret in its (hidden) work folder and a canary in its
    environment: name -> (case, result)."""
    return {case.name: sandboxed_batch[case.name] for case in cases(FILES_CORPUS)}


@pytest.fixture(scope="module")
def files_run(files_results, file_plants, cpu_evaluator):
    """The batch's file attacks, then the honest one again in a second evaluator on the same caches
    (a later, separate run, in a work folder of its own), whose toolchain probes are counted: it
    builds nothing, so it never probes."""
    from pikeh_local import LocalEvaluator

    from pike_harness.contracts.evaluation import EvaluatorOptions
    from pike_harness.worker.supervise import buildcache

    probes = []
    real_probe = buildcache.probe_toolchain

    def counted_probe(*args, **kwargs):
        probes.append(args[0])
        return real_probe(*args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(buildcache, "probe_toolchain", counted_probe)
        later = LocalEvaluator(EvaluatorOptions(device="cpu", protocol="quick",
                                                workdir=file_plants.workdir.parent / "later-work",
                                                config=LocalEvaluator.Config(jobs=1, prestart=0,
                                                                             build_cache=str(file_plants.cache))))
        try:
            honest = files_results["files_honest"][0]
            again = later.evaluate(honest.request())
        finally:
            later.close()
    return {"results": files_results, "again": again, "later_probes": probes, "workdir": file_plants.workdir,
            "cache": file_plants.cache, "secret": file_plants.secret, "canary": file_plants.canary,
            "evaluator": cpu_evaluator}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("name", [case.name for case in cases(FILES_CORPUS)])
def test_each_file_attack_ends_in_its_verdict(files_run, name):
    case, result = files_run["results"][name]
    verdict = f"{name}: {result.category}/{result.check}: {result.reason}"
    assert result.category == case.category, verdict
    assert case.check is None or result.check == case.check, verdict
    # everything it left in its folders was removed
    assert "cleanup" not in result.environment, result.environment.get("cleanup")


@pytest.mark.timeout(900)
def test_no_secret_or_harness_environment_reaches_a_result_or_a_prompt(files_run):
    for name, (_, result) in files_run["results"].items():
        for text in (json.dumps(result.to_dict()), failure_report(result)):
            assert files_run["secret"] not in text, name
            assert files_run["canary"] not in text and CANARY_NAME not in text, name


@pytest.mark.timeout(900)
def test_the_reported_log_is_the_candidates_own_output(files_run):
    _, result = files_run["results"]["files_log_links"]
    assert "honest line before the swap" in result.stdout_tail
    assert "failing on purpose" in result.stderr_tail


@pytest.mark.timeout(900)
def test_nothing_outside_the_sandbox_was_written_or_left(files_run):
    workdir, cache = files_run["workdir"], files_run["cache"]
    assert (workdir / "pikeh-target.txt").read_text() == "untouched"
    assert (workdir / "pikeh-secret.txt").read_text() == files_run["secret"]
    # every scratch folder, traps included, removed; the evaluator's idle pre-started processes keep theirs
    left = list((workdir / "scratch").iterdir())
    pool = files_run["evaluator"].engine.prestart
    assert [p for p in left if p not in set(pool.idle_scratch() if pool is not None else ())] == []
    key = jit_cache_key((FILES_CORPUS / "files_honest.py").read_text(), None)
    entry = cache / "jit" / key
    assert not entry.exists() or (entry.is_dir() and not entry.is_symlink())
    assert not os.path.lexists(cache / "jit" / f"{key}-link")
    # no hand-out of a built library went through the links files_handout_links planted
    assert sorted(p.name for p in workdir.iterdir() if p.name.startswith("pikeh-")) == [
        "pikeh-secret.txt",
        "pikeh-target.txt",
    ]
    assert not [p for p in workdir.iterdir() if len(p.name) == 64 or p.suffix == ".so"]


@pytest.mark.timeout(900)
def test_the_honest_neighbour_and_a_later_run_of_it_are_correct(files_run):
    _, honest = files_run["results"]["files_honest"]
    assert honest.category == "correct" and honest.runtime_ms is not None
    assert files_run["again"].category == "correct", files_run["again"].reason
    assert files_run["later_probes"] == []  # an engine that builds nothing never probes the toolchain
