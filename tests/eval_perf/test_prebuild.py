"""The engine's ``prebuild`` option: the checked instance constructed in the CPU slot, before the check phase.

Every candidate is submitted at once to one engine (a 2-core CI runner pays each engine start: the
reference process's torch imports), and each test reads its own candidate's result.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from perf_helpers import PLAIN, REPO, request  # noqa: E402

from pike_harness.worker.supervise.engine import Engine, EngineConfig, resolve  # noqa: E402

CORPUS = REPO / "tests" / "eval" / "corpus"

# The constructor fails as a candidate's own bug would: a verdict, given before the check phase.
RAISES = PLAIN.replace("        super().__init__()\n", '''        super().__init__()
        raise ValueError("no such layer")
''')
# The first construction runs out of host memory (as beside other candidates' models): no verdict.
MEMORY_ONCE = PLAIN.replace("    def __init__(self, in_features, out_features):\n", '''    failed = False

    def __init__(self, in_features, out_features):
        if not ModelNew.failed:
            ModelNew.failed = True
            raise MemoryError("out of host memory while constructing")
''')
# Only the very first instance ever called runs out of device memory, at its first call, and is spoiled
# for good (wrong outputs after); every other instance is correct. Reusing the prebuilt instance in the
# check run again alone would be judged incorrect; a fresh one is correct.
SPOILED_BY_OOM = PLAIN.replace("        super().__init__()\n", '''        super().__init__()
        self.spoiled = False
''').replace("    def forward(self, x):\n        return torch.relu(self.linear(x))\n", '''    raised = False

    def forward(self, x):
        if not ModelNew.raised:  # the first checked call ever, on the prebuilt instance
            ModelNew.raised = True
            self.spoiled = True
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        if self.spoiled:
            return torch.relu(self.linear(x)) + 1
        return torch.relu(self.linear(x))
''')

CANDIDATES = {
    "plain": PLAIN,
    "raises": RAISES,
    "memory_once": MEMORY_ONCE,
    "borrows_reference": (CORPUS / "ok_borrows_reference.py").read_text(),
    "seed_specialisation": (CORPUS / "seed_specialisation.py").read_text(),
    "spoiled_by_oom": SPOILED_BY_OOM,
}


def test_the_candidates_are_what_their_names_say():
    """A source edit by ``str.replace`` that stops matching PLAIN would silently test PLAIN instead."""
    for name in ("raises", "memory_once", "spoiled_by_oom"):
        assert CANDIDATES[name] != PLAIN, name
    assert 'raise ValueError("no such layer")' in RAISES
    assert "raise MemoryError" in MEMORY_ONCE
    assert "self.spoiled = False" in SPOILED_BY_OOM and "+ 1" in SPOILED_BY_OOM


@pytest.fixture(scope="module")
def prebuilding_engine(tmp_path_factory):
    """One engine that prebuilds, with two check slots (a shared check phase, where a device
    out-of-memory error runs the check again alone), for every test of this module."""
    patch = pytest.MonkeyPatch()
    patch.setenv("OMP_NUM_THREADS", "1")
    engine = Engine(EngineConfig(device="cpu", jobs=2, prestart=0, build_cache="off", check_slots=2,
                                 prebuild=True, workdir=tmp_path_factory.mktemp("prebuild") / "work"))
    yield engine
    engine.close()
    patch.undo()


@pytest.fixture(scope="module")
def results(prebuilding_engine):
    """Every candidate evaluated once, all submitted together (smoke/1): name -> EvalResult."""
    futures = {name: prebuilding_engine.submit(request(source)) for name, source in CANDIDATES.items()}
    return {name: future.result(300) for name, future in futures.items()}


def test_prebuild_is_off_by_default_and_reported_when_on(prebuilding_engine):
    """The option changes where construction happens, so it is opt-in, and the engine's description
    says which way it ran (results from either must be comparable knowingly)."""
    assert resolve(EngineConfig(device="cpu"), ["cpu"]).prebuild is False
    assert resolve(EngineConfig(device="cpu", prebuild=True), ["cpu"]).prebuild is True
    assert prebuilding_engine.describe()["scheduling"]["prebuild"] is True


def test_a_plain_candidate_is_checked_on_its_prebuilt_instance(results):
    """The ordinary path: the instance is constructed early (its own stage) and the check then judges it."""
    result = results["plain"]
    assert result.category == "correct", result.reason
    assert result.environment["prebuilt"] is True
    assert "prebuild" in result.stage_seconds and "correctness" in result.stage_seconds


def test_a_failing_constructor_is_judged_before_the_check_phase(results):
    """A constructor's failure is the verdict the check would give (runtime_error, construct), only
    earlier: the candidate never waits for the device."""
    result = results["raises"]
    assert (result.category, result.check) == ("runtime_error", "construct"), result.reason
    assert "no such layer" in result.reason
    assert "correctness" not in result.stage_seconds, "judged before the check phase"


def test_running_out_of_memory_while_prebuilding_is_no_verdict(results):
    """Out of memory during the early construction may be other candidates' doing: the instance is
    dropped and the check constructs its own, as without the option."""
    result = results["memory_once"]
    assert result.category == "correct", result.reason
    assert result.environment["prebuilt"] is False, "the check constructed the instance"


def test_the_reference_guard_watches_the_early_construction(results):
    """Building the reference to borrow its weights is noted whichever stage constructs the instance."""
    result = results["borrows_reference"]
    assert result.category == "correct", result.reason
    assert result.environment["prebuilt"] is True
    assert "borrows_reference" in result.flags


def test_an_answer_computed_at_construction_is_still_caught_by_hidden_inputs(results):
    """The public input sets are made early, but the hidden ones still arrive only with the check, so a
    constructor that specialises to the public input gains nothing from being run sooner."""
    result = results["seed_specialisation"]
    assert (result.category, result.check) == ("incorrect", "hidden_input"), result.reason


def test_a_check_run_again_alone_constructs_a_fresh_instance(results):
    """The prebuilt instance is taken once: after a device out-of-memory error in the shared check
    phase, the check run alone constructs anew instead of reusing the instance the failed attempt
    touched (here spoiled: it would give wrong outputs)."""
    result = results["spoiled_by_oom"]
    assert result.category == "correct", result.reason
    assert result.environment["prebuilt"] is True, "the first attempt used the prebuilt instance"
    assert result.environment["ran_alone"].startswith("correctness: ")
