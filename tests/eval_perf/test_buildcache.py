"""The load_inline build cache: keying, real builds in the trusted builder, hits, and poisoning."""

from __future__ import annotations

import ctypes
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from pike_harness.worker.supervise.buildcache import BuildCache, cache_key, canonical_spec, probe_toolchain

# A library that needs neither torch's headers nor nvcc: the builder's real path in about a second.
SOURCE = 'extern "C" int pikeh_answer() { return %d; }'


def spec(value: int = 42, **changes):
    base = {"name": "pikeh_answer", "cpp_sources": [SOURCE % value], "cuda_sources": None, "functions": None,
            "extra_cflags": None, "extra_ldflags": None, "extra_include_paths": None, "with_cuda": None,
            "is_python_module": False, "with_pytorch_error_handling": True, "no_implicit_headers": True}
    base.update(changes)
    return base


TOOLCHAIN = {"torch": "2.x", "cuda": "13.0", "cxx": "g++ 12", "arch": "9.0", "python": "3.11"}


def key_of(s, toolchain=TOOLCHAIN):
    return cache_key(canonical_spec(s), toolchain)


def test_identical_content_gives_one_key_whatever_the_spelling():
    assert key_of(spec()) == key_of(spec())
    # a string and a one-element list are the same sources for load_inline
    assert key_of(spec(cpp_sources=SOURCE % 42)) == key_of(spec())
    assert key_of(spec(functions={"b": "b", "a": "a"})) == key_of(spec(functions={"a": "a", "b": "b"}))


def test_content_flags_toolchain_and_architecture_each_change_the_key():
    base = key_of(spec())
    assert key_of(spec(7)) != base
    assert key_of(spec(extra_cflags=["-O3"])) != base
    assert key_of(spec(name="pikeh_other")) != base
    assert key_of(spec(), {**TOOLCHAIN, "arch": "8.0"}) != base
    assert key_of(spec(), {**TOOLCHAIN, "torch": "2.y"}) != base
    # a candidate that set TORCH_CUDA_ARCH_LIST itself (Hopper kernels want "9.0a") gets its own key
    assert key_of(spec(arch="9.0a")) != base


@pytest.mark.parametrize("changes", [
    {"extra_include_paths": ["."]},  # files whose content is not in the key
    {"extra_cflags": ["-wrapper", "/bin/sh,-c,touch /tmp/x"]},  # makes gcc run another program
    {"extra_ldflags": ["@flags.txt"]},
    {"cpp_sources": [b"bytes"]},
    {"name": "not a name"},
    {"arch": "9.0; rm -rf /"},
])
def test_unshareable_arguments_are_not_cached(changes):
    assert canonical_spec(spec(**changes)) is None


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return BuildCache(tmp_path_factory.mktemp("cache"))


def scratch(tmp_path: Path, name: str) -> Path:
    """A candidate's scratch folder: it exists before anything is handed out into it."""
    folder = tmp_path / name
    folder.mkdir(parents=True)
    return folder


def _load(path: str) -> int:
    return ctypes.CDLL(path).pikeh_answer()


def test_a_build_is_shared_by_identical_calls_and_handed_out_as_private_copies(cache, tmp_path):
    far = time.monotonic() + 300
    first = cache.serve(spec(41), "cpu", scratch(tmp_path, "a"), deadline=far)
    assert first["ok"] and not first["hit"], first
    second = cache.serve(spec(41), "cpu", scratch(tmp_path, "b"), deadline=far)
    assert second["ok"] and second["hit"]
    assert first["path"] != second["path"]
    assert Path(second["path"]).is_relative_to(tmp_path / "b")  # the candidate's own copy
    assert _load(second["path"]) == 41
    entry = cache.root / "ext" / first["key"]
    assert not os.stat(entry).st_mode & stat.S_IWUSR  # published entries are read-only


def test_a_tampered_entry_is_detected_and_rebuilt(cache, tmp_path):
    """A candidate (same user) overwrites a published library with its own: the next hand-out notices,
    discards the entry and builds again, so the victim loads what its source says."""
    far = time.monotonic() + 300
    # the entry the test above published (a hit after it; built here when this test runs alone): one
    # builder process fewer, and the rebuild below is the build this test is about
    built = cache.serve(spec(41), "cpu", scratch(tmp_path, "a"), deadline=far)
    library = cache.root / "ext" / built["key"] / "pikeh_answer.so"
    os.chmod(library.parent, 0o755)  # read-only stops accidents, not a same-user attacker
    os.chmod(library, 0o644)
    library.write_bytes(library.read_bytes().replace(b"pikeh_answer", b"pikeh_ANSWER"))
    tampered_before = cache.stats.tampered
    victim = cache.serve(spec(41), "cpu", scratch(tmp_path, "victim"), deadline=far)
    assert victim["ok"] and not victim["hit"], victim
    assert cache.stats.tampered == tampered_before + 1
    assert _load(victim["path"]) == 41


@pytest.mark.slow
def test_a_compile_error_is_reported_with_the_log_and_remembered(cache, tmp_path):
    far = time.monotonic() + 300
    broken = spec(cpp_sources=["extern \"C\" int pikeh_answer() { return undefined_name; }"])
    first = cache.serve(broken, "cpu", scratch(tmp_path, "a"), deadline=far)
    assert not first["ok"] and "undefined_name" in first["log"]
    again = cache.serve(broken, "cpu", scratch(tmp_path, "b"), deadline=far)
    assert not again["ok"] and again["hit"]


def test_unshareable_calls_fall_back_to_a_private_build(cache, tmp_path):
    reply = cache.serve(spec(extra_include_paths=["/tmp"]), "cpu", tmp_path, deadline=time.monotonic() + 60)
    assert reply == {"fallback": True}


def test_the_toolchain_probe_runs_nothing_planted_in_the_callers_working_folder(tmp_path, monkeypatch):
    """The docker evaluator's worker runs in /scratch, which candidates can write: a package named like
    ours or a torch.py planted there must not run in the probe, whose answer keys every build and sets
    the builders' TORCH_CUDA_ARCH_LIST."""
    planted, canary = tmp_path / "scratch", tmp_path / "canary"
    plant = f"open({str(canary)!r}, 'a').write('ran\\n')\n"
    (planted / "pike_harness").mkdir(parents=True)
    (planted / "pike_harness" / "__init__.py").write_text(plant)
    (planted / "torch.py").write_text(plant)
    monkeypatch.chdir(planted)
    try:
        found = BuildCache(tmp_path / "cache").toolchain("cpu")  # it runs in a folder of its own
        assert found["torch"] and found["python"]  # the real probe answered
        # and, were it run there, python -s -P puts no working folder on sys.path
        assert probe_toolchain("cpu", sys.executable, os.environ, cwd=planted)["torch"]
    finally:
        assert not canary.exists(), canary.read_text()


class _RecordingIsolation:
    """An active isolation that records what it was asked to hide and runs the builder as it is."""

    active = True

    def __init__(self) -> None:
        self.hidden: list[list[Path]] = []

    def wrap(self, argv, *, cwd, hide=(), writable=(), seccomp_fd=None):
        self.hidden.append([Path(p) for p in hide])
        return list(argv)


def test_a_builder_sees_neither_the_jit_caches_nor_any_candidates_scratch_folder(tmp_path):
    """What a candidate's sandbox hides (spawn.sandboxed: the build and JIT caches, the scratch root),
    a builder, which compiles a candidate's sources and flags, does not see either: an #include of a
    path under a visible folder cannot read another source's JIT cache or another candidate's files."""
    isolation = _RecordingIsolation()
    cache = BuildCache(tmp_path / "cache" / "build", isolation=isolation)
    reply = cache.serve(spec(43), "cpu", scratch(tmp_path / "scratch-root", "eval-a"),
                        deadline=time.monotonic() + 300)
    assert reply["ok"], reply
    assert len(isolation.hidden) == 1
    assert {cache.root, tmp_path / "cache" / "jit", tmp_path / "scratch-root"} <= set(isolation.hidden[0])


# -- bounds on a build, and on the cache -------------------------------------------------------------

def _padded(value: int, pad_bytes: int) -> dict:
    """A library whose object and library hold ``pad_bytes`` of zeros: a top-level asm directive, which
    passes every flag check and takes the assembler no time (300 MB in 0.24 s)."""
    padding = f'asm(".section .data.pikeh_pad,\\"aw\\"\\n.space {pad_bytes}\\n.previous");\n'
    return spec(cpp_sources=[padding + SOURCE % value])


def _nothing_left_behind(cache: BuildCache) -> None:
    assert list((cache.root / "staging").iterdir()) == []  # the builder's folder is gone
    assert list((cache.root / "ext").iterdir()) == []  # and nothing was published


def test_a_build_that_writes_past_the_file_size_bound_is_the_candidates_failure(tmp_path):
    """RLIMIT_FSIZE in the builder's process tree: the assembler dies writing the padded object. The
    candidate's build fails with ``build_limit`` (remembered: not the machine's transient failure),
    its staging folder is removed and nothing is published."""
    cache = BuildCache(tmp_path / "cache", max_file_bytes=1 << 20)
    far = time.monotonic() + 300
    first = cache.serve(_padded(44, 8 << 20), "cpu", scratch(tmp_path, "a"), deadline=far)
    assert not first["ok"] and first["check"] == "build_limit", first
    assert "1 MiB file-size limit" in first["reason"] and first["log"].startswith(first["reason"])
    _nothing_left_behind(cache)
    again = cache.serve(_padded(44, 8 << 20), "cpu", scratch(tmp_path, "b"), deadline=far)
    assert again["hit"] and again["check"] == "build_limit"
    assert cache.stats.limited == 1


def test_a_build_whose_folder_outgrows_its_disk_bound_is_the_candidates_failure(tmp_path):
    """The staging folder is measured while the builder runs and once more as it ends: a 4 MiB
    object and library against a 1 MB bound (the request's disk_mb, under the cache's own)."""
    cache = BuildCache(tmp_path / "cache")
    reply = cache.serve(_padded(45, 4 << 20), "cpu", scratch(tmp_path, "a"), deadline=time.monotonic() + 300,
                        disk_mb=1)
    assert not reply["ok"] and reply["check"] == "build_limit", reply
    assert "over the 1 MB disk limit" in reply["reason"]
    _nothing_left_behind(cache)


def test_a_builder_over_its_memory_bound_is_stopped(tmp_path):
    """The builder's processes are polled like a candidate's: over the request's memory_mb (1 MB here,
    which the builder's Python passes as it starts), the build is killed and is the candidate's failure."""
    cache = BuildCache(tmp_path / "cache")
    reply = cache.serve(spec(46), "cpu", scratch(tmp_path, "a"), deadline=time.monotonic() + 300, memory_mb=1)
    assert not reply["ok"] and reply["check"] == "build_limit", reply
    assert "over the 1 MB memory limit" in reply["reason"]
    _nothing_left_behind(cache)


def test_a_library_over_the_library_bound_is_not_published(tmp_path, monkeypatch):
    """The bound is 256 MiB (a torch extension is a few MB; it was 2 GiB, and a 1.9 GB library of
    zeros was published and kept). Here it is lowered to 1 MiB for a 2 MiB library."""
    from pike_harness.worker.supervise import buildcache

    assert buildcache.MAX_LIBRARY_BYTES <= 256 << 20
    monkeypatch.setattr(buildcache, "MAX_LIBRARY_BYTES", 1 << 20)
    cache = BuildCache(tmp_path / "cache")
    reply = cache.serve(_padded(47, 2 << 20), "cpu", scratch(tmp_path, "a"), deadline=time.monotonic() + 300)
    assert not reply["ok"] and reply["check"] == "build_limit", reply
    assert "library" in reply["reason"]
    _nothing_left_behind(cache)


def _charge(entry: Path) -> int:
    return int((entry / ".charge").read_text())


def test_the_build_cache_evicts_the_least_recently_used_entries_past_its_total(tmp_path):
    """Each publication keeps the entries within the total: the entry used longest ago goes first (a
    hand-out counts as a use), the one just published stays."""
    cache = BuildCache(tmp_path / "cache")
    far = time.monotonic() + 300
    entries = {}
    for when, value in enumerate((61, 62)):
        reply = cache.serve(spec(value), "cpu", scratch(tmp_path, f"built-{value}"), deadline=far)
        assert reply["ok"], reply
        entries[value] = cache.root / "ext" / reply["key"]
        os.utime(entries[value], (1_000 + when, 1_000 + when))  # published long ago, 61 first
    assert cache.serve(spec(61), "cpu", scratch(tmp_path, "again-61"), deadline=far)["hit"]  # 62 is now the oldest
    smaller = min(_charge(entries[61]), _charge(entries[62]))
    cache.max_total_bytes = _charge(entries[61]) + _charge(entries[62]) + smaller // 2  # room for two
    third = cache.serve(spec(63), "cpu", scratch(tmp_path, "built-63"), deadline=far)
    assert third["ok"], third
    assert sorted(p.name for p in (cache.root / "ext").iterdir()) == sorted([entries[61].name, third["key"]])
    assert cache.stats.evicted == 1
    total = sum(_charge(entry) for entry in (cache.root / "ext").iterdir())
    assert total <= cache.max_total_bytes
    evicted = cache.serve(spec(62), "cpu", scratch(tmp_path, "again-62"), deadline=far)  # built again
    assert evicted["ok"] and not evicted["hit"] and _load(evicted["path"]) == 62


def test_eviction_never_removes_an_entry_in_use_nor_follows_a_link(tmp_path):
    """An entry whose key's lock is held (a build or hand-out of it, in any harness process) stays, and
    the next least recently used goes instead; an entry is charged its apparent bytes, links not followed."""
    import fcntl

    cache = BuildCache(tmp_path / "cache")
    ext, outside = cache.root / "ext", tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_bytes(b"x" * 5000)
    names = [f"{n:064x}" for n in range(1, 5)]
    for when, name in enumerate(names):  # names[0] used longest ago
        (ext / name).mkdir()
        (ext / name / "lib.so").write_bytes(b"k" * 1000)
        (ext / name / "escape").symlink_to(outside)
        os.utime(ext / name, (1_000 + when, 1_000 + when))
    charge = 1000 + 3 * 4096  # the file's bytes, a block each for it, the link and the folder
    cache.max_total_bytes = 2 * charge + 10  # room for two
    with open(cache.root / "locks" / f"{names[0]}.lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # names[0] is being handed out
        cache._evict(keep=names[3])
    assert sorted(p.name for p in ext.iterdir()) == [names[0], names[3]]
    assert int((ext / names[0] / ".charge").read_text()) == charge
    assert (outside / "keep").read_bytes() == b"x" * 5000
