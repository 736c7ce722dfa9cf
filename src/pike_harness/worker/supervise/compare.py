"""Candidate outputs against reference outputs, in the reference process: a process the candidate never ran in.

The reference process (``reference.serve``) compares on its device (the GPU when there is one) the
outputs it keeps against the candidate's, which it reads with ``output_file.read_outputs`` from the
per-evaluation exchange file in shared memory: raw bytes and a checked index, streamed onto the device
(nothing is unpickled, no tensor subclass can arrive). Only the ``Comparison`` goes back to the supervisor. Per output: same count, shape and dtype; the same non-finite pattern as
the reference (NaN where it has NaN, the same infinity where it has one, finite elsewhere); then
``allclose(atol, rtol)`` on the finite part. Across input sets: a candidate whose outputs do not
change while the reference's do is returning a constant, whatever the tolerance says, unless the
reference's change is within rounding of its size (then it is flagged ``reference_constant``). torch only.
"""

from __future__ import annotations

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
    ``allclose`` as PIKE calls it, and the reference's largest magnitude.

    Outputs are usually finite everywhere: then a NaN or infinity on either side would show in the
    difference, so one test of the difference replaces the masks (no boolean indexing, no copies)."""
    got64, want64 = got.double(), want.double()
    diff = (got64 - want64).abs()
    ref = want64.abs()
    close = bool(torch.allclose(got, want, atol=atol, rtol=rtol, equal_nan=True))
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
    if result.category is None:
        _constant_check(result, candidate, reference, atol)
    return result


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
        check.problem = (f"max abs diff {check.max_abs_diff:.3g}, max rel diff {check.max_rel_diff:.3g} "
                         f"(atol {atol:g}, rtol {rtol:g})")
        result.fail(INCORRECT, "allclose", f"{label}: {check.problem}")
        return check
    check.ok = True
    if want.numel() and found.ref_absmax <= atol and "tolerance_vacuous" not in result.flags:
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


def _constant_check(result: Comparison, candidate: Sequence[Sequence[torch.Tensor]],
                    reference: Sequence[Sequence[torch.Tensor]], atol: float) -> None:
    """Reject an output that is the same for every input set while the reference's varies with its inputs;
    flag it (``reference_constant``) where the reference's varies only by rounding, so that outputs alone
    cannot say whether the candidate computed."""
    if len(candidate) < 2:
        return
    for index in range(len(candidate[0])):
        got = [outputs[index] for outputs in candidate]
        want = [outputs[index] for outputs in reference]
        if not all(torch.equal(got[0], other) for other in got[1:]):
            continue
        spread = _spread(want)
        if spread == 0.0:
            continue  # the reference is constant too
        if spread <= REFERENCE_VARIES * _magnitude(want):
            if "reference_constant" not in result.flags:
                result.flags.append("reference_constant")
            continue
        result.fail(REJECTED, "constant_output",
                    f"the same output for every input set (output {index}, {len(got)} sets) while the "
                    f"reference's changes by up to {spread:.3g} between them: a constant answer that "
                    f"only passes because of the tolerance (atol {atol:g})")
        return


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
    """float32/float64 as they are, anything else (half precision, integers, bool) as float64."""
    return tensor if tensor.dtype in (torch.float32, torch.float64) else tensor.double()
