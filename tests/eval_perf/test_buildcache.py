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
