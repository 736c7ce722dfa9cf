"""Candidate outputs against reference outputs, in the reference process: a process the candidate never ran in.

The reference process (``reference.serve``) compares on its device (the GPU when there is one) the
outputs it keeps against the candidate's, which it reads with ``read_outputs`` from the per-evaluation
exchange file in shared memory: ``weights_only=True`` (no code runs on load, no tensor subclass
survives), then moved to the device. Only the ``Comparison`` goes back to the supervisor. Per output: same count, shape and dtype; the same non-finite pattern as
the reference (NaN where it has NaN, the same infinity where it has one, finite elsewhere); then
``allclose(atol, rtol)`` on the finite part. Across input sets: a candidate whose outputs do not
change while the reference's do is returning a constant, whatever the tolerance says. torch only.
"""

from __future__ import annotations

import os
import stat
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


class MalformedOutputs(Exception):
    """The candidate's outputs file is missing, a link, unreadable or not one list of tensors per set."""


def read_outputs(path: str | os.PathLike, expected_sets: int, device: torch.device | str = "cpu") -> list[list[torch.Tensor]]:
    """The candidate's outputs from the file its process wrote, on ``device``; never follows a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        raise MalformedOutputs("the outputs file is missing or a link") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise MalformedOutputs("the outputs file is not a plain file")
        with os.fdopen(fd, "rb") as handle:
            fd = -1
            outputs = torch.load(handle, weights_only=True, map_location="cpu")
    except MalformedOutputs:
        raise
    except Exception as exc:
        raise MalformedOutputs(f"unreadable outputs: {exc}"[:500]) from None
    finally:
        if fd >= 0:
            os.close(fd)
    well_formed = (type(outputs) is list and len(outputs) == expected_sets
                   and all(type(s) is list and all(type(t) is torch.Tensor for t in s) for s in outputs))
    if not well_formed:
        raise MalformedOutputs("the outputs file does not hold one list of tensors per input set")
    return [[tensor.to(device) for tensor in values] for values in outputs]


def _diffs(got: torch.Tensor, want: torch.Tensor) -> tuple[float, float]:
    """Max absolute and max relative difference over elements finite on both sides.

    The relative difference divides by |reference| and skips elements where the reference is 0.
    """
    got64, want64 = got.double(), want.double()
    finite = torch.isfinite(got64) & torch.isfinite(want64)
    if not bool(finite.any()):
        return 0.0, 0.0
    diff = (got64 - want64).abs()[finite]
    ref = want64.abs()[finite]
    nonzero = ref > 0
    rel = float((diff[nonzero] / ref[nonzero]).max()) if bool(nonzero.any()) else 0.0
    return float(diff.max()), rel


def compare_outputs(candidate: Sequence[Sequence[torch.Tensor]], reference: Sequence[Sequence[torch.Tensor]],
                    *, atol: float, rtol: float, set_labels: Sequence[str],
                    set_indexes: Sequence[int] | None = None) -> Comparison:
    """``set_indexes``: the input-set numbers to report for each entry (default: their positions)."""
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
            result.checks.append(_check_one(result, where, set_index, index, got, want, atol, rtol))
    if result.category is None:
        _constant_check(result, candidate, reference, atol)
    return result


def _check_one(result: Comparison, where: str, set_index: int, index: int, got: torch.Tensor,
               want: torch.Tensor, atol: float, rtol: float) -> OutputCheck:
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
    check.max_abs_diff, check.max_rel_diff = _diffs(got, want)
    if (want.is_floating_point() or want.is_complex()) and not _same_nonfinite(got, want):
        bad = int((torch.isfinite(want) & ~torch.isfinite(got)).sum())
        check.problem = (f"non-finite values where the reference is finite ({bad} elements)" if bad
                         else "NaN/infinity pattern differs from the reference")
        result.fail(INCORRECT, "nonfinite", f"{label}: {check.problem}")
        return check
    if not torch.allclose(got, want, atol=atol, rtol=rtol, equal_nan=True):
        check.problem = (f"max abs diff {check.max_abs_diff:.3g}, max rel diff {check.max_rel_diff:.3g} "
                         f"(atol {atol:g}, rtol {rtol:g})")
        result.fail(INCORRECT, "allclose", f"{label}: {check.problem}")
        return check
    check.ok = True
    if want.numel() and float(want.double().abs().max()) <= atol and "tolerance_vacuous" not in result.flags:
        # allclose accepts anything this small: only the relative error says whether it computes the model
        result.flags.append("tolerance_vacuous")
    return check


def _same_nonfinite(got: torch.Tensor, want: torch.Tensor) -> bool:
    """NaN exactly where the reference has NaN, the same infinities where it has them, finite elsewhere."""
    want_inf = torch.isinf(want)
    return (torch.equal(torch.isnan(got), torch.isnan(want)) and torch.equal(torch.isinf(got), want_inf)
            and torch.equal(got[want_inf], want[want_inf]))


def _constant_check(result: Comparison, candidate: Sequence[Sequence[torch.Tensor]],
                    reference: Sequence[Sequence[torch.Tensor]], atol: float) -> None:
    if len(candidate) < 2:
        return
    for index in range(len(candidate[0])):
        got = [outputs[index] for outputs in candidate]
        want = [outputs[index] for outputs in reference]
        got_constant = all(torch.equal(got[0], other) for other in got[1:])
        want_constant = all(torch.equal(want[0], other) for other in want[1:])
        if got_constant and not want_constant:
            spread = max((float((other.double() - want[0].double()).abs().max()) for other in want[1:]
                          if other.shape == want[0].shape and other.numel()), default=float("nan"))
            result.fail(REJECTED, "constant_output",
                        f"the same output for every input set (output {index}, {len(got)} sets) while the "
                        f"reference's changes by up to {spread:.3g} between them: a constant answer that "
                        f"only passes because of the tolerance (atol {atol:g})")
            return
