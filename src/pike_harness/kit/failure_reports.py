"""How a failed evaluation is described to the error-fixing agent: failure facts and log tails, never a runtime."""

from __future__ import annotations

from pike_harness.contracts.model import INCORRECT, REJECTED, TIMEOUT, EvalResult
from pike_harness.kit.code_fences import fence

# PIKE shows the error-fixing agent the last 10,000 characters of each log stream.
LOG_TAIL_CHARS = 10_000


def failure_report(result: EvalResult, *, tail_chars: int = LOG_TAIL_CHARS) -> str:
    """How a failed evaluation is described to the error-fixing agent.

    Only failure facts: the category, the evaluator's reason, whether it timed out, per-output
    differences for wrong outputs, and the tails of the logs. Never a runtime.
    """
    lines = [f"Evaluation result: {_CATEGORY_WORDS.get(result.category, result.category)}."]
    if result.reason:
        lines.append(f"Reason: {result.reason}")
    if result.category == REJECTED and result.check:
        lines.append(f"Failed check: {result.check}")
    lines.append(f"Timed out: {'yes' if result.category == TIMEOUT else 'no'}")
    if result.category == INCORRECT or any(o.max_abs_diff is not None or o.problem for o in result.outputs):
        lines.extend(_output_differences(result))
    lines += log_tails(result, tail_chars)
    return "\n".join(lines)


def log_tails(result: EvalResult, tail_chars: int) -> list[str]:
    """The last ``tail_chars`` characters of stdout and of stderr, each in a fenced block."""
    lines = []
    for name, text in (("stdout", result.stdout_tail), ("stderr", result.stderr_tail)):
        tail = text[-tail_chars:] if tail_chars > 0 else ""
        if not tail.strip():
            lines.append(f"{name}: (empty)" if not text.strip() else f"{name}: (not shown)")
        elif len(tail) < len(text):
            lines.append(f"{name} (the last {len(tail)} of {len(text)} characters):\n{fence(tail, 'text')}")
        else:
            lines.append(f"{name}:\n{fence(tail, 'text')}")
    return lines


_CATEGORY_WORDS = {
    "compile_error": "compile error (the program failed to import or its kernels failed to build)",
    "runtime_error": "runtime error (the program raised an exception or crashed while running)",
    "timeout": "timeout (the program did not finish within the time limit)",
    "incorrect": "incorrect output (the program ran but its outputs differ from the reference)",
    "rejected": "rejected (the program broke an evaluation rule)",
}


def _output_differences(result: EvalResult) -> list[str]:
    """Per output: the largest absolute difference over all input sets, or the problem found."""
    worst: dict[int, float] = {}
    problems: dict[int, str] = {}
    for check in result.outputs:
        if check.max_abs_diff is not None:
            worst[check.index] = max(worst.get(check.index, check.max_abs_diff), check.max_abs_diff)
        if check.problem and check.index not in problems:
            problems[check.index] = check.problem
    if not worst and not problems:
        return ["Per-output differences: not available."]
    lines = ["Maximum absolute difference from the reference, per output:"]
    for index in sorted(set(worst) | set(problems)):
        parts = []
        if index in worst:
            parts.append(f"max abs diff {worst[index]:.6g}")
        if index in problems:
            parts.append(problems[index])
        lines.append(f"- output {index}: {'; '.join(parts)}")
    return lines


def first_set_differences(result: EvalResult) -> str:
    """PIKE's per-output list of maximum differences (``[0.0123, 0.5]``), on the first input set (the
    public one, as PIKE's one-input check saw it) when it was compared: the hidden sets are drawn anew
    per evaluation, so their differences would make the same failure give a different prompt each time
    (a replay or the response cache would then miss) and would tell the model about inputs it must not
    see. An output that could not be compared (wrong shape, say) is shown as ``None``."""
    compared = [o for o in result.outputs if o.input_set is not None]
    first = min((o.input_set for o in compared), default=None)
    row = sorted((o.index, o.max_abs_diff) for o in compared if o.input_set == first)
    if not row:
        return "not available"
    return "[" + ", ".join("None" if diff is None else f"{diff:.6g}" for _, diff in row) + "]"


def log_tail(text: str, tail_chars: int) -> str:
    """The last ``tail_chars`` characters of a log stream (PIKE keeps the ending of each)."""
    return text[-tail_chars:] if tail_chars > 0 else ""
