"""Candidate outputs against reference outputs, in the reference process: a process the candidate never ran in.

The reference process (``reference.serve``) compares on its device (the GPU when there is one) the
outputs it keeps against the candidate's, which it reads with ``output_file.read_outputs`` from the
per-evaluation exchange file in shared memory: raw bytes and a checked index, streamed onto the device
(nothing is unpickled, no tensor subclass can arrive). Only the ``Comparison`` goes back to the supervisor. Per output: same count, shape and dtype; the same non-finite pattern as
the reference (NaN where it has NaN, the same infinity where it has one, finite elsewhere); then
``allclose(atol, rtol)`` on the finite part for floating-point and complex outputs, and exact equality
for every other dtype (integers, bool: an index or a count is right or wrong, a tolerance has no meaning
for it). Across input sets (``_constant_check``): a candidate whose outputs move between the sets by
less than a tenth of what the reference's do ignores its input, and is rejected (``constant_output``),
unless the reference's change is within rounding of its size; and whenever the reference's outputs
are such that one constant answer would pass every set, the result is flagged ``reference_constant``,
whatever the candidate returned. torch only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from pike_harness.worker.records import INCORRECT, REJECTED, OutputCheck


@dataclass
class Comparison:
    checks: list[OutputCheck] = field(default_factory=list)
    category: str | None = None  # None: every output matched
    check: str | None = None
    reason: str | None = None
    flags: list[str] = field(default_factory=list)

    def fail(self, category: str, check: str, reason: str) -> None:
        if self.category is None:
            self.category, self.check, self.reason = category, check, reason

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Comparison:
        return cls(checks=[OutputCheck(**check) for check in data.get("checks", [])], category=data.get("category"),
                   check=data.get("check"), reason=data.get("reason"), flags=list(data.get("flags", [])))


@dataclass(frozen=True)
class _Measured:
    """What one output comparison computes from the tensors, once (``judge`` compares a call twice)."""

    max_abs: float
    max_rel: float
    same_nonfinite: bool
    close: bool
    ref_absmax: float


def _measure(got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> _Measured:
    """Max absolute and relative differences over the elements finite on both sides (the relative one
    divides by |reference| and skips elements where it is 0), whether the non-finite patterns match,
    ``allclose`` as PIKE calls it (exact equality for a dtype that is neither floating point nor
    complex: ``_toleranced``), and the reference's largest magnitude.

    Outputs are usually finite everywhere: then a NaN or infinity on either side would show in the
    difference, so one test of the difference replaces the masks (no boolean indexing, no copies)."""
    wide = torch.complex128 if want.is_complex() else torch.float64  # double() drops an imaginary part
    got64, want64 = got.to(wide), want.to(wide)
    diff = (got64 - want64).abs()
    ref = want64.abs()
    close = (bool(torch.allclose(got, want, atol=atol, rtol=rtol, equal_nan=True)) if _toleranced(want)
             else bool(torch.equal(got, want)))
    if diff.numel() == 0:
        return _Measured(0.0, 0.0, True, close, 0.0)
    if bool(torch.isfinite(diff).all()):
        rel = float(torch.where(ref > 0, diff / ref, torch.zeros((), dtype=diff.dtype, device=diff.device)).max())
        return _Measured(float(diff.max()), rel, True, close, float(ref.max()))
    finite = torch.isfinite(got64) & torch.isfinite(want64)
    max_abs = max_rel = 0.0
    if bool(finite.any()):
        diff, kept = diff[finite], ref[finite]
        nonzero = kept > 0
        max_rel = float((diff[nonzero] / kept[nonzero]).max()) if bool(nonzero.any()) else 0.0
        max_abs = float(diff.max())
    same = _same_nonfinite(got, want) if (want.is_floating_point() or want.is_complex()) else True
    return _Measured(max_abs, max_rel, same, close, float(ref.max()))


def compare_outputs(candidate: Sequence[Sequence[torch.Tensor]], reference: Sequence[Sequence[torch.Tensor]],
                    *, atol: float, rtol: float, set_labels: Sequence[str],
                    set_indexes: Sequence[int] | None = None,
                    measured: dict[tuple[int, int], _Measured] | None = None) -> Comparison:
    """``set_indexes``: the input-set numbers to report for each entry (default: their positions).
    ``measured``: kept across calls that compare the same tensor objects again (``judge``)."""
    result = Comparison()
    if len(candidate) != len(reference):
        result.fail(REJECTED, "protocol", f"{len(candidate)} output sets for {len(reference)} input sets")
        return result
    for position, (got_set, want_set) in enumerate(zip(candidate, reference, strict=True)):
        set_index = set_indexes[position] if set_indexes is not None else position
        where = f"input set {set_index} ({set_labels[position]})"
        if len(got_set) != len(want_set):
            result.fail(INCORRECT, "output_count", f"{where}: {len(got_set)} outputs, expected {len(want_set)}")
            continue
        for index, (got, want) in enumerate(zip(got_set, want_set, strict=True)):
            result.checks.append(_check_one(result, where, set_index, index, got, want, atol, rtol, measured))
    _reference_constant(result, reference, atol, rtol)
    if result.category is None:
        _constant_check(result, candidate, reference, atol)
    return result


def _toleranced(want: torch.Tensor) -> bool:
    """Whether an output is compared within ``atol``/``rtol``: floating point and complex. Any other dtype
    (integers, bool) must equal the reference element for element (``torch.equal``), which PIKE's
    ``allclose`` for every dtype does not ask: an argmax off by one passed it wherever the index was 99 or
    more (rtol 1e-2; corpus ``argmax_off_by_one``)."""
    return want.is_floating_point() or want.is_complex()


def _check_one(result: Comparison, where: str, set_index: int, index: int, got: torch.Tensor,
               want: torch.Tensor, atol: float, rtol: float,
               measured: dict[tuple[int, int], _Measured] | None = None) -> OutputCheck:
    check = OutputCheck(input_set=set_index, index=index, shape=list(got.shape), dtype=str(got.dtype).replace("torch.", ""))
    label = f"{where}, output {index}"
    if type(got) is not torch.Tensor:
        check.problem = "output_type"
        result.fail(REJECTED, "output_type", f"{label}: not a plain tensor")
        return check
    if got.shape != want.shape:
        check.problem = f"shape {list(got.shape)}, expected {list(want.shape)}"
        result.fail(INCORRECT, "shape", f"{label}: {check.problem}")
        return check
    if got.dtype != want.dtype:
        check.problem = f"dtype {check.dtype}, expected {str(want.dtype).replace('torch.', '')}"
        result.fail(INCORRECT, "dtype", f"{label}: {check.problem}")
        return check
    key = (id(got), id(want))
    found = measured.get(key) if measured is not None else None
    if found is None:
        found = _measure(got, want, atol, rtol)
        if measured is not None:
            measured[key] = found
    check.max_abs_diff, check.max_rel_diff = found.max_abs, found.max_rel
    if (want.is_floating_point() or want.is_complex()) and not found.same_nonfinite:
        bad = int((torch.isfinite(want) & ~torch.isfinite(got)).sum())
        check.problem = (f"non-finite values where the reference is finite ({bad} elements)" if bad
                         else "NaN/infinity pattern differs from the reference")
        result.fail(INCORRECT, "nonfinite", f"{label}: {check.problem}")
        return check
    if not found.close:
        if _toleranced(want):
            check.problem = (f"max abs diff {check.max_abs_diff:.3g}, max rel diff {check.max_rel_diff:.3g} "
                             f"(atol {atol:g}, rtol {rtol:g})")
        else:
            wrong = int((got != want).sum())
            check.problem = (f"{wrong} of {want.numel()} elements differ, max abs diff {check.max_abs_diff:.3g} "
                             f"({check.dtype} outputs must equal the reference's exactly)")
        result.fail(INCORRECT, "allclose", f"{label}: {check.problem}")
        return check
    check.ok = True
    if (_toleranced(want) and want.numel() and found.ref_absmax <= atol
            and "tolerance_vacuous" not in result.flags):
        # allclose accepts anything this small: only the relative error says whether it computes the model
        result.flags.append("tolerance_vacuous")
    return check


def _same_nonfinite(got: torch.Tensor, want: torch.Tensor) -> bool:
    """NaN exactly where the reference has NaN, the same infinities where it has them, finite elsewhere."""
    want_inf = torch.isinf(want)
    return (torch.equal(torch.isnan(got), torch.isnan(want)) and torch.equal(torch.isinf(got), want_inf)
            and torch.equal(got[want_inf], want[want_inf]))


# A reference whose outputs move between input sets by no more than this share of their magnitude does
# not depend on its inputs at any precision the default tolerance admits: it is the half-ULP of
# bfloat16 (2**-8). Below it an honest candidate computing in bf16 or fp16 maps every input set to the
# same output (PIKE-B's level3-pike 19 solution, fp16, on MobileNetV1 whose output is its classifier's
# bias to 5e-10; its level3-pike 24, fp32, on EfficientNetB2's, which moves by 3e-7 of it, rejected
# by the comparison in 5 of 19 runs as the hidden sets fell), and a constant answer cannot be told from one.
REFERENCE_VARIES = 2.0 ** -8


# A candidate output that moves between input sets by less than this share of the reference's movement
# (``_movement``) ignores its input (``_constant_check`` says why an honest one does not).
FOLLOWS_INPUT = 0.1
# Where the reference's outputs rounded to bfloat16 keep less than this share of its movement, the rule
# above cannot tell an honest bfloat16 model from a constant (``_coarse_movement``).
COARSE_KEEPS = 0.5


def _constant_check(result: Comparison, candidate: Sequence[Sequence[torch.Tensor]],
                    reference: Sequence[Sequence[torch.Tensor]], atol: float) -> None:
    """Reject an output that ignores its input: one that passed on every input set but moves between them
    by less than ``FOLLOWS_INPUT`` (a tenth) of what the reference's moves, where the reference's moves by
    more than rounding of its size (``REFERENCE_VARIES``). Run only when every output passed.

    Movement is the root-sum-square over the elements finite in every set, and over the sets, of each
    set's output minus the first set's: ``|C - C0|`` for the candidate against ``|R - R0|`` for the
    reference. The tolerance cannot decide this: on a task whose reference moves by less than
    ``atol`` between sets (level3-pike 10, ResNet101: 0.0036 against 0.01) a constant passes every set,
    and so does a constant plus a wobble of 1e-7 of the input, which no test of bitwise equality sees,
    and which a comparison of the two sides' changes within the same ``atol`` does not see either.

    Why an honest candidate is not rejected: its output is the reference's plus its own error ``E``, so
    its movement is ``|D + E|`` where ``D`` is the reference's. An error independent of the input's
    effect (summation order, fused kernels, TF32, lower precision) adds to the movement
    (``|D + E|^2 = |D|^2 + |E|^2`` up to their correlation), whatever its size; rounding to a coarser grid
    leaves a change of ``d`` below the grid step ``g`` as 0 or ``g``, expected square ``g * d >= d^2``, so it
    too keeps the movement in expectation. Falling under a tenth needs an error that cancels nine tenths
    of the reference's movement: a computation that drops the input's part of the output. Two honest
    ways to do that are known, and only the first is exempt: the input's part of the output below
    half precision's rounding (``REFERENCE_VARIES``), and a reference whose change between sets is its own
    rounding noise (an output that is mathematically constant, computed with cancellation), against a
    candidate that computes it more exactly (the rule before this one, on bitwise-equal outputs, had
    the same hole). Chance, where few elements move: simulated on one-element outputs whose honest
    error is as large as the reference's change, about 2 in 1000 fall under a tenth (none on outputs of
    4 elements or more); bfloat16 rounding of a one-element output gives bitwise-equal outputs as
    often as before (1-2.5 % just above ``REFERENCE_VARIES``). What a rule on outputs alone cannot
    catch: a wobble of a tenth of the reference's movement or more, inside the tolerance; every task
    where that is possible is flagged ``reference_constant`` (``_reference_constant``)."""
    if len(candidate) < 2:
        return
    for index in range(len(candidate[0])):
        got = [outputs[index] for outputs in candidate]
        want = [outputs[index] for outputs in reference]
        if any(output.shape != want[0].shape for output in want):
            continue  # shapes that change with the input (the candidate's match them): no constant
        spread = _spread(want)
        if spread == 0.0 or spread <= REFERENCE_VARIES * _magnitude(want):
            continue  # the reference is constant too, or moves only by rounding: honest outputs may not move
        moved, ref_moved = _movement(got, want)
        if not moved < FOLLOWS_INPUT * ref_moved:
            continue
        if _coarse_movement(want) < COARSE_KEEPS * ref_moved:
            continue  # the reference itself, rounded to bfloat16, loses most of its movement: so may honest work
        ending = f"an answer that ignores its input and only passes because of the tolerance (atol {atol:g})"
        if moved == 0.0:
            reason = (f"the same output for every input set (output {index}, {len(got)} sets) while the "
                      f"reference's changes by up to {spread:.3g} between them: {ending}")
        else:
            reason = (f"nearly the same output for every input set (output {index}, {len(got)} sets): it moves "
                      f"between them by {moved / ref_moved:.2g} of what the reference's does (root-sum-square "
                      f"{moved:.3g} against {ref_moved:.3g}; below {FOLLOWS_INPUT:g} the input is ignored), "
                      f"while the reference's changes by up to {spread:.3g}: {ending}")
        result.fail(REJECTED, "constant_output", reason)
        return


def _coarse_movement(want: Sequence[torch.Tensor]) -> float:
    """How far the reference's outputs, rounded to bfloat16, move between the sets (``_movement``). Why:
    where the outputs cluster at a value bfloat16 can hold (a sigmoid near 0.5, a residual near 1) and
    move below its grid, an honest bfloat16 model rounds nearly every element to the same value in
    every set while a tail keeps the reference's spread above rounding: it moved by 0.09 of the
    reference and was rejected, every output within 1.5e-3 of it (an audit, 2026-12-01). There the
    rule cannot tell low precision from a constant, and does not reject (``COARSE_KEEPS``: with a
    tenth, an honest bfloat16 sigmoid still fell under it 2 times in 10 where its own rounding order
    differed from the rounded reference's)."""
    if not want[0].is_floating_point():
        return math.inf  # complex outputs: no exemption
    coarse = [output.to(torch.bfloat16).to(output.dtype) for output in want]
    return _movement(coarse, want)[0]


def _reference_constant(result: Comparison, reference: Sequence[Sequence[torch.Tensor]], atol: float,
                        rtol: float) -> None:
    """Flag ``reference_constant`` where one constant answer would pass every input set for some output:
    for floating-point outputs an interval ``[R - t, R + t]`` (``t = atol + rtol * |R|``, allclose's test)
    common to every set's reference ``R`` at every finite element, and the same non-finite values in
    every set (for complex outputs: the first set's output passes against every other); for any other
    dtype, the same output in every set. Decided by the reference's outputs alone, whatever the
    candidate returned and whether or not it passed: on such a task (level3-pike 9, 10, 15, 16, 19, 20,
    22-24, 26, 27, docs/tasks.md) the comparison cannot show that a correct candidate computed, and
    every record of it says so."""
    if len(reference) < 2 or "reference_constant" in result.flags:
        return
    for index in range(len(reference[0])):
        want = [outputs[index] for outputs in reference]
        if want[0].numel() and _constant_passes(want, atol, rtol):
            result.flags.append("reference_constant")
            return


def _constant_passes(outputs: Sequence[torch.Tensor], atol: float, rtol: float) -> bool:
    first = outputs[0]
    if any(other.shape != first.shape or other.dtype != first.dtype for other in outputs[1:]):
        return False
    if not _toleranced(first):
        return all(torch.equal(first, other) for other in outputs[1:])
    if first.is_complex():
        return all(bool(torch.allclose(first, other, atol=atol, rtol=rtol, equal_nan=True))
                   and _same_nonfinite(first, other) for other in outputs[1:])
    if not all(_same_nonfinite(other, first) for other in outputs[1:]):
        return False
    wide = _wide(first)
    low, high = wide - (atol + rtol * wide.abs()), wide + (atol + rtol * wide.abs())
    for other in outputs[1:]:
        wide = _wide(other)
        slack = atol + rtol * wide.abs()
        low, high = torch.maximum(low, wide - slack), torch.minimum(high, wide + slack)
    # non-finite elements (the same in every set) compare as NaN here: they pass
    return bool(((low <= high) | ~torch.isfinite(_wide(first))).all())


def _movement(got: Sequence[torch.Tensor], want: Sequence[torch.Tensor]) -> tuple[float, float]:
    """Root-sum-square over the sets after the first, and over the elements finite in every reference set,
    of ``got[i] - got[0]`` and of ``want[i] - want[0]`` (float64 sums; complex changes by modulus). The
    candidate's non-finite pattern and shapes are the reference's (``_check_one``), and its shapes are
    the same in every set (``_constant_check``)."""
    finite = None
    if not all(bool(torch.isfinite(output).all()) for output in want):
        finite = torch.stack([torch.isfinite(output) for output in want]).all(dim=0)
    return _root_sum_square(got, finite), _root_sum_square(want, finite)


def _root_sum_square(outputs: Sequence[torch.Tensor], finite: torch.Tensor | None) -> float:
    first = _wide(outputs[0])
    total = 0.0
    for other in outputs[1:]:
        change = _wide(other) - first
        if finite is not None:
            change = change[finite]
        wide = torch.complex128 if change.is_complex() else torch.float64
        total += float(torch.linalg.vector_norm(change, dtype=wide)) ** 2
    return total ** 0.5


def _spread(outputs: Sequence[torch.Tensor]) -> float:
    """The largest element-wise change of one output between input sets: none where both hold the same
    value (the same infinity, or NaN in both), an infinite one where a NaN or an infinity appears."""
    first = _wide(outputs[0])
    spread = 0.0
    for other in outputs[1:]:
        if other.shape != first.shape:
            return float("inf")
        if not other.numel():
            continue
        second = _wide(other)
        same = (second == first) | (torch.isnan(first) & torch.isnan(second))
        change = (second - first).abs().masked_fill(same, 0.0).nan_to_num(nan=float("inf"))
        spread = max(spread, float(change.max()))
    return spread


def _magnitude(outputs: Sequence[torch.Tensor]) -> float:
    """The largest finite absolute value of one output over the input sets."""
    wide = [_wide(output) for output in outputs if output.numel()]
    return max((float(torch.where(torch.isfinite(w), w.abs(), 0.0).max()) for w in wide), default=0.0)


def _wide(tensor: torch.Tensor) -> torch.Tensor:
    """float32/float64 and complex as they are, anything else (half precision, integers, bool) as float64
    (``double()`` would drop a complex output's imaginary part)."""
    return tensor if tensor.dtype in (torch.float32, torch.float64) or tensor.is_complex() else tensor.double()
