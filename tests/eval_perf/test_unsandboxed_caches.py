"""Shared caches where candidates run without the sandbox (a docker worker without user namespaces,
``--unsafe-no-sandbox``): the build cache and the JIT caches are off by default, and asking for them by
name is refused, since a candidate running as the supervisor's user could plant what later ones load.

The engines here are built as a container's worker builds its own (``--sandbox-optional``) on a host
whose bubblewrap "cannot" make a sandbox (``find_bwrap`` gives ``/bin/false``), as in test_isolation.py.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perf_helpers import PLAIN, smoke  # noqa: E402

from pike_harness.contracts.model import Limits  # noqa: E402
from pike_harness.worker.supervise import isolation  # noqa: E402
from pike_harness.worker.supervise.buildcache import BuildCache, cache_key, canonical_spec, jit_cache_key  # noqa: E402
from pike_harness.worker.supervise.engine import (  # noqa: E402
    Engine,
    EngineConfig,
    EngineError,
    default_cache_root,
    for_isolation,
    resolve,
)

CORPUS = Path(__file__).resolve().parents[1] / "eval" / "corpus"
# A C library built with load_inline at import (a second or so of g++), used in forward.
BUILDS = (CORPUS / "ok_load_inline_cpu.py").read_text()
BUILD_SPEC = {"name": "pikeh_corpus_scale", "cpp_sources": ['extern "C" int pikeh_corpus_scale() { return 1; }'],
              "no_implicit_headers": True, "is_python_module": False}  # what its load_inline call asks
# Reads what its Triton cache holds, as Triton and Inductor load compiled kernels and FX graphs from there.
USES_JIT_CACHE = '''
import json
import os

_CACHED = os.path.join(os.environ.get("TRITON_CACHE_DIR", "/nonexistent"), "pikeh_kernel.json")
SCALE = json.load(open(_CACHED))["scale"] if os.path.exists(_CACHED) else 1.0
''' + PLAIN.replace("return torch.relu(self.linear(x))", "return torch.relu(self.linear(x)) * SCALE")
# Correct itself; at import it plants, in the folder where the worker's default cache would be, a folder
# where the build's lock file goes (open(..., "a+") then raises IsADirectoryError) and a Triton cache
# entry for another source whose kernel doubles its output.
PLANTS = '''
import json
import pathlib

ROOT = pathlib.Path(__ROOT__)
(ROOT / "build" / "locks" / (__BUILD_KEY__ + ".lock")).mkdir(parents=True, exist_ok=True)
_entry = ROOT / "jit" / __JIT_KEY__ / "triton"
_entry.mkdir(parents=True, exist_ok=True)
(_entry / "pikeh_kernel.json").write_text(json.dumps({"scale": 2.0}))
''' + PLAIN


def _request(source: str):
    # a build on a loaded 2-core machine can take long (the corpus file's own limits)
    return smoke(1).eval_request(source, limits=Limits(compile_timeout_s=600, run_timeout_s=600, memory_mb=6000))


@pytest.fixture
def no_sandbox(monkeypatch, tmp_path) -> Path:
    """A host whose bubblewrap cannot make a sandbox; the worker's default cache folder under tmp_path."""
    monkeypatch.setattr(isolation, "find_bwrap", lambda: "/bin/false")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("PIKEH_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home-cache"))  # $HOME/.cache: /scratch/.cache in docker
    return default_cache_root().absolute()


def test_without_the_sandbox_nothing_is_shared_and_plants_harm_no_later_candidate(no_sandbox, tmp_path):
    would_be = no_sandbox
    # What an attacker computes: the build's key (the toolchain, as the supervisor's probe reports it)
    # and the JIT key of the source it targets.
    build_key = cache_key(canonical_spec(BUILD_SPEC), BuildCache(tmp_path / "probe").toolchain("cpu"))
    plants = (PLANTS.replace("__ROOT__", repr(str(would_be))).replace("__BUILD_KEY__", repr(build_key))
              .replace("__JIT_KEY__", repr(jit_cache_key(USES_JIT_CACHE, None))))
    engine = Engine(EngineConfig(device="cpu", jobs=1, prestart=0, sandbox_optional=True, workdir=tmp_path / "work"))
    try:
        assert engine.isolation.label.startswith("container (")
        assert engine.cache_root is None and engine.build_cache is None and engine.settings.jit_cache_root is None
        settings = engine.describe()["scheduling"]
        assert settings["build_cache"] is None and settings["jit_cache"] == "private"
        assert "without the sandbox" in settings["cache_note"] and "\n" not in settings["cache_note"]
        assert "without the sandbox" in engine.stats()["cache_note"]
        assert not would_be.exists(), "no cache folder was made"

        planter = engine.submit(_request(plants)).result(600)
        assert planter.category == "correct", planter.reason
        assert (would_be / "build" / "locks" / f"{build_key}.lock").is_dir(), "the plants are in place"

        builds, uses_jit = engine.submit(_request(BUILDS)), engine.submit(_request(USES_JIT_CACHE))
        built, jitted = builds.result(600), uses_jit.result(600)
        assert built.category == "correct", built.reason  # its build never meets the planted lock
        assert jitted.category == "correct", jitted.reason  # its Triton cache holds nothing planted
    finally:
        engine.close()


def test_asking_for_a_shared_cache_without_the_sandbox_is_refused_unless_unsafe(no_sandbox, tmp_path, monkeypatch):
    cache, work = tmp_path / "cache", tmp_path / "work"
    asks = [({"build_cache": str(cache)}, "--build-cache"), ({"jit_cache": "shared"}, "--jit-cache shared")]
    for setting, named in asks:
        with pytest.raises(EngineError) as refused:
            Engine(EngineConfig(device="cpu", prestart=0, sandbox_optional=True, workdir=work, **setting))
        message = str(refused.value)
        assert named in message and "without the sandbox" in message and "--unsafe-no-sandbox" in message
        assert "\n" not in message
    monkeypatch.setenv("PIKEH_CACHE_DIR", str(cache))
    with pytest.raises(EngineError, match=r"\$PIKEH_CACHE_DIR asks for a shared build/JIT cache"):
        Engine(EngineConfig(device="cpu", prestart=0, sandbox_optional=True, workdir=work))
    assert not cache.exists() and not work.exists(), "a refused setting creates nothing"
    assert not no_sandbox.exists()

    # --unsafe-no-sandbox (candidates trusted) keeps a cache asked for by name, saying so; only by name
    unsafe = isolation.choose(unsafe=True)
    plan = for_isolation(resolve(EngineConfig(build_cache=str(cache), unsafe_no_sandbox=True), ["cpu"]), unsafe)
    assert plan.cache_root == cache and plan.jit_mode == "shared" and "--unsafe-no-sandbox" in plan.cache_note
    monkeypatch.delenv("PIKEH_CACHE_DIR")
    plan = for_isolation(resolve(EngineConfig(unsafe_no_sandbox=True), ["cpu"]), unsafe)
    assert plan.cache_root is None and plan.jit_mode == "private"
    # in the sandbox, the caches are as they were (the default folder and shared JIT caches)
    sandboxed = isolation.Isolation("bwrap", "/usr/bin/bwrap")
    plan = resolve(EngineConfig(), ["cpu"])
    assert for_isolation(plan, sandboxed) == plan and plan.cache_root == no_sandbox and plan.jit_mode == "shared"
