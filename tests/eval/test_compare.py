"""``compare``'s rules across input sets and for exact dtypes, on tensors built here (no evaluator):
an answer that ignores its input is rejected by how little it moves between the sets, not only when it is
bitwise constant; ``reference_constant`` is decided by the reference's outputs alone; integer and bool
outputs must equal the reference's exactly."""

from __future__ import annotations

import pytest
import torch

from pike_harness.worker.supervise.compare import FOLLOWS_INPUT, compare_outputs


def _compare(candidate, reference, atol=1e-2, rtol=1e-2):
    return compare_outputs(candidate, reference, atol=atol, rtol=rtol,
                           set_labels=[f"set {i}" for i in range(len(reference))])


def _insensitive(seed: int = 0, sets: int = 3, move: float = 1e-3):
    """Like level3-pike 10 (ResNet101): outputs about 0.1 in size that move between input sets by about
    ``move`` each, far more than rounding and far less than atol 1e-2, so one constant passes every set."""
    generator = torch.Generator().manual_seed(seed)
    base = 0.1 * torch.randn(10, 1000, generator=generator)
    return [[base + move * torch.randn(10, 1000, generator=generator)] for _ in range(sets)]


# -- an answer that ignores its input ---------------------------------------------------------------

def test_a_cached_answer_with_a_tiny_wobble_is_rejected():
    """The audit's cheat: the first set's answer, plus 1e-7 of the input, for every set. Each set passes
    allclose and no two sets are bitwise equal; it moves by about 1e-4 of what the reference does."""
    refs = _insensitive()
    inputs = [torch.randn(10, 1) for _ in refs]
    cheat = _compare([[refs[0][0] + 1e-7 * x] for x in inputs], refs)
    assert all(check.ok for check in cheat.checks)
    assert (cheat.category, cheat.check) == ("rejected", "constant_output")
    assert cheat.reason.startswith("nearly the same output for every input set (output 0, 3 sets)")
    assert "reference_constant" in cheat.flags


def test_the_bitwise_constant_keeps_its_reason():
    refs = _insensitive()
    cheat = _compare([[refs[0][0].clone()] for _ in refs], refs)
    assert (cheat.category, cheat.check) == ("rejected", "constant_output")
    assert cheat.reason.startswith("the same output for every input set")


def test_a_wobble_just_under_the_threshold_is_rejected_and_one_over_it_is_not():
    """The boundary is the candidate's root-sum-square change over the sets against the reference's:
    below a tenth it ignores its input. A wobble above it is the limit of any rule on outputs alone
    (the flag is what stays on the record)."""
    refs = _insensitive()
    changes = torch.stack([r[0] - refs[0][0] for r in refs[1:]])
    ref_moved = float(changes.double().norm())
    wobble = torch.randn(10, 1000)
    wobble = wobble / wobble.double().norm() * ref_moved / (2 ** 0.5)  # two changes from the first set

    def with_wobble(share):
        return [[refs[0][0]]] + [[refs[0][0] + share * wobble * (1 if i == 1 else -1)] for i in (1, 2)]

    assert _compare(with_wobble(0.9 * FOLLOWS_INPUT), refs).check == "constant_output"
    over = _compare(with_wobble(1.1 * FOLLOWS_INPUT), refs)
    assert over.category is None and "reference_constant" in over.flags


@pytest.mark.parametrize("seed", range(5))
def test_honest_candidates_are_not_rejected(seed):
    """An honest candidate's output is the reference's plus an error: independent noise of any size the
    tolerance admits, bfloat16 or float16 rounding of the result, or the first set's error carried by
    every set (a fixed bias). None of them makes the outputs stop following the input."""
    refs = _insensitive(seed)
    generator = torch.Generator().manual_seed(100 + seed)
    noise = [[r[0] + 0.002 * torch.randn(10, 1000, generator=generator)] for r in refs]
    bias = 0.003 * torch.randn(10, 1000, generator=generator).clamp(-2, 2)
    for candidate in (noise,
                      [[r[0].bfloat16().float()] for r in refs],
                      [[r[0].half().float()] for r in refs],
                      [[r[0] + bias] for r in refs]):
        result = _compare(candidate, refs)
        assert result.category is None, result.reason
        assert "reference_constant" in result.flags


@pytest.mark.parametrize("rel", [2 ** -8 * 1.05, 2 ** -7, 2 ** -6])
def test_half_precision_rounding_keeps_the_movement(rel):
    """A reference moving by just more than bfloat16's rounding of its size (where the exemption ends):
    an honest bfloat16 output is the reference's rounded, which moves by the reference's change in
    expectation. 200 draws, none rejected."""
    generator = torch.Generator().manual_seed(7)
    for _ in range(200):
        base = 0.5 + 0.5 * torch.rand(8, 16, generator=generator)
        step = rel * float(base.max())
        refs = [[base + step * (2 * torch.rand(8, 16, generator=generator) - 1)] for _ in range(3)]
        result = _compare([[r[0].bfloat16().float()] for r in refs], refs)
        assert result.category is None, result.reason


def test_a_reference_moving_only_by_rounding_admits_a_wobbling_constant_but_flags_it():
    """Below 2^-8 of its size the reference's change is no evidence (an honest half-precision candidate
    returns the same bits every time), so nothing is rejected there; the flag says the check is blind."""
    base = torch.linspace(-0.2, 0.2, 16)
    refs = [[base + 1e-9 * torch.randn(16)] for _ in range(3)]
    wobbling = _compare([[base + 1e-7 * torch.randn(16)] for _ in range(3)], refs)
    assert wobbling.category is None and "reference_constant" in wobbling.flags


def test_a_reference_that_moves_beyond_the_tolerance_is_not_flagged():
    torch.manual_seed(0)
    refs = [[torch.randn(32, 32)] for _ in range(3)]
    result = _compare([[r[0].clone()] for r in refs], refs)
    assert result.category is None and "reference_constant" not in result.flags


def test_complex_outputs_move_by_their_imaginary_part_too():
    """A reference whose change between sets is all imaginary: a constant answer is rejected (``double()``
    would have dropped the part that moves), and the differences recorded include it."""
    torch.manual_seed(0)
    base = 0.1 * torch.randn(64, dtype=torch.complex64)
    refs = [[base + 1e-3j * torch.randn(64)] for _ in range(3)]
    cheat = _compare([[refs[0][0].clone()] for _ in refs], refs)
    assert cheat.check == "constant_output" and cheat.checks[1].max_abs_diff > 1e-4
    assert _compare([[r[0].clone()] for r in refs], refs).category is None


# -- reference_constant: the reference's outputs alone ----------------------------------------------

def test_the_flag_does_not_depend_on_what_the_candidate_returned():
    """On a task where one constant passes every set, the record says so whether the candidate computed
    honestly, returned a constant, or was wrong."""
    refs = _insensitive()
    honest = _compare([[r[0].clone()] for r in refs], refs)
    wrong = _compare([[r[0] + 1.0] for r in refs], refs)
    assert honest.category is None and "reference_constant" in honest.flags
    assert wrong.check == "allclose" and "reference_constant" in wrong.flags


def test_the_flag_asks_for_one_answer_within_the_tolerance_of_every_set():
    """Not only the first set's answer: a midpoint can pass where the first set's does not. Sets 1.0
    and 1.025 (tolerance 0.02 and 0.02025): 1.0125 passes both, so the flag is set; 1.0 and 1.05 share
    no answer."""
    near = [[torch.tensor([1.0])], [torch.tensor([1.025])]]
    far = [[torch.tensor([1.0])], [torch.tensor([1.05])]]
    assert "reference_constant" in _compare([[t[0].clone()] for t in near], near).flags
    assert "reference_constant" not in _compare([[t[0].clone()] for t in far], far).flags


def test_the_flag_needs_the_same_non_finite_values_in_every_set():
    nan, inf = float("nan"), float("inf")
    same = [[torch.tensor([nan, inf, 0.5])], [torch.tensor([nan, inf, 0.501])]]
    moved = [[torch.tensor([nan, inf, 0.5])], [torch.tensor([0.5, inf, 0.501])]]
    assert "reference_constant" in _compare([[t[0].clone()] for t in same], same).flags
    assert "reference_constant" not in _compare([[t[0].clone()] for t in moved], moved).flags


def test_one_input_set_says_nothing_across_sets():
    refs = _insensitive(sets=1)
    result = _compare([[refs[0][0].clone()]], refs)
    assert result.category is None and result.flags == []


# -- integer and bool outputs: exact ----------------------------------------------------------------

def test_an_argmax_off_by_one_is_incorrect():
    """allclose(atol=rtol=1e-2) admitted an index off by one wherever it was 99 or more."""
    torch.manual_seed(0)
    refs = [[torch.randn(16, 256, 8).argmax(dim=1)] for _ in range(3)]
    shifted = [[r[0] + (r[0] >= 100).to(r[0].dtype)] for r in refs]
    result = _compare(shifted, refs)
    assert (result.category, result.check) == ("incorrect", "allclose")
    assert "must equal the reference's exactly" in result.reason
    assert result.checks[0].max_abs_diff == 1.0 and not result.checks[0].ok
    exact = _compare([[r[0].clone()] for r in refs], refs)
    assert exact.category is None and exact.flags == []


@pytest.mark.parametrize("dtype", [torch.int8, torch.int32, torch.int64, torch.uint8])
def test_integers_are_compared_exactly(dtype):
    want = torch.tensor([0, 1, 100, 120], dtype=dtype)
    off = want.clone()
    off[3] += 1
    assert _compare([[off]], [[want]]).check == "allclose"
    assert _compare([[want.clone()]], [[want]]).category is None


def test_bool_outputs_are_compared_exactly_and_never_vacuous():
    want = torch.tensor([False, True, False])
    assert _compare([[torch.tensor([False, True, True])]], [[want]]).check == "allclose"
    zeros = torch.zeros(4, dtype=torch.bool)
    result = _compare([[zeros.clone()]], [[zeros]])
    assert result.category is None and "tolerance_vacuous" not in result.flags


def test_integer_references_are_flagged_only_when_equal_in_every_set():
    steady = [[torch.arange(5)] for _ in range(3)]
    moving = [[torch.arange(5) + i] for i in range(3)]
    assert "reference_constant" in _compare([[t[0].clone()] for t in steady], steady).flags
    assert "reference_constant" not in _compare([[t[0].clone()] for t in moving], moving).flags


def test_floating_outputs_keep_the_tolerance():
    want = torch.tensor([150.0])
    assert _compare([[torch.tensor([151.0])]], [[want]]).category is None  # 1 <= 0.01 + 0.01 * 150


def test_outputs_whose_shape_changes_between_sets_are_not_judged_across_them():
    refs = [[torch.arange(n, dtype=torch.float32)] for n in (3, 4, 5)]
    result = _compare([[r[0].clone()] for r in refs], refs)
    assert result.category is None and result.flags == []


def test_movement_skips_elements_non_finite_in_some_set():
    """NaN at the same places in candidate and reference (required per set) are left out of both
    movements; the cached answer is still rejected on the finite part."""
    refs = _insensitive()
    for index, r in enumerate(refs):
        r[0][0, index] = float("nan")
    cached = refs[0][0].clone()
    cached[0, 0] = refs[1][0][0, 0]  # where set 0 has its NaN, the value of a set that has none
    cheat = [[torch.where(torch.isnan(r[0]), r[0], cached + 1e-7)] for r in refs]
    result = _compare(cheat, refs)
    assert result.check == "constant_output" and "reference_constant" not in result.flags


@pytest.mark.parametrize("scale", [9e-4, 1.0e-3, 1.1e-3])
def test_a_bfloat16_model_whose_outputs_cluster_at_a_grid_value_is_not_rejected(scale):
    """A sigmoid of a small pre-activation sits near 0.5, where bfloat16's grid is coarser than the
    outputs move: an honest bfloat16 model rounds nearly every element alike in every set (an audit,
    2026-12-01: rejected 9 times in 10 at 1.1e-3, every output within 1.5e-3). The reference rounded
    to bfloat16 loses most of its movement there too, so the rule stands aside."""
    torch.manual_seed(0)
    pre = [scale * torch.randn(1 << 20) for _ in range(4)]
    reference = [[torch.sigmoid(p)] for p in pre]
    candidate = [[torch.sigmoid(p.to(torch.bfloat16)).float()] for p in pre]
    result = compare_outputs(candidate, reference, atol=1e-2, rtol=1e-2, set_labels=["0", "1", "2", "3"])
    assert result.category is None, result.reason
