"""How a failed evaluation is described to the error-fixing agent: failure facts and log tails, never a runtime.

What one result contributes to any prompt is capped per field (``PROMPT_*_CHARS``), whatever the
strategy's options say: a result's text comes from a candidate's process, which may be hostile, and a
multi-megabyte reason would push the prompt past the model's context window (the provider's HTTP 400
stops the task for good, and its resume sends the same prompt again). The caps lie far above anything
a real evaluation writes, so an ordinary result's prompt is PIKE's, unchanged.
"""

from __future__ import annotations

from typing import Any

from pike_harness.contracts.model import INCORRECT, REJECTED, TIMEOUT, EvalResult
from pike_harness.kit.code_fences import fence
from pike_harness.worker import text_safety

# PIKE shows the error-fixing agent the last 10,000 characters of each log stream.
LOG_TAIL_CHARS = 10_000

# The caps on what one result contributes to a prompt, per field (a text cut to one is marked as cut).
# Every string of a result is escaped (worker/text_safety.py: a control character becomes "\x1b", 4
# characters; a bidi mark "\u202e", 6), so a real text may grow that much past what the evaluator cut,
# and then cut to 20,000 characters and a note of its length (worker/records.py, MAX_TEXT_CHARS). The
# reason and log caps lie above that cut, so a result cut there keeps its own note; they bind only on a
# result that escaped it (built by other code) and are the prompt's own bound whatever the result says.
# A reason: the evaluator's are an exception summary of at most 2,000 characters behind a short prefix
# (worker/inside/child.py) or the supervisor's own sentences (its infrastructure errors cut at 2,000):
# about 2,100 characters, 12,600 if every one were escaped as a bidi mark. PIKE's evaluator wrote none.
PROMPT_REASON_CHARS = 24_000
# A check: a machine name ("load", "calls_reference_model"), never longer than a few dozen characters.
PROMPT_CHECK_CHARS = 200
# An output's problem: the supervisor's comparison writes it (worker/supervise/compare.py: "shape [..],
# expected [..]", a dtype, the differences), a few hundred characters even for a tensor of 64 dimensions.
PROMPT_PROBLEM_CHARS = 2_000
# A log tail: the supervisor keeps the last 10,000 characters of each stream (its ``tail_chars``), 40,000
# once escaped if every one were a control character (colour codes are the ones real logs carry). PIKE-B
# shows the last 10,000 (``LOG_TAIL_CHARS``), unchanged; PIKE-O's fork shows its artifacts whole.
PROMPT_LOG_CHARS = 40_000


def failure_report(result: EvalResult, *, tail_chars: int = LOG_TAIL_CHARS) -> str:
    """How a failed evaluation is described to the error-fixing agent.

    Only failure facts: the category, the evaluator's reason, whether it timed out, per-output
    differences for wrong outputs, and the tails of the logs. Never a runtime.
    """
    lines = [f"Evaluation result: {_CATEGORY_WORDS.get(result.category, result.category)}."]
    if result.reason:
        lines.append(f"Reason: {head_capped(result.reason, PROMPT_REASON_CHARS)}")
    if result.category == REJECTED and result.check:
        lines.append(f"Failed check: {head_capped(result.check, PROMPT_CHECK_CHARS)}")
    lines.append(f"Timed out: {'yes' if result.category == TIMEOUT else 'no'}")
    if result.category == INCORRECT or any(o.max_abs_diff is not None or o.problem for o in result.outputs):
        lines.extend(_output_differences(result))
    lines += log_tails(result, tail_chars)
    return "\n".join(lines)


def log_tails(result: EvalResult, tail_chars: int) -> list[str]:
    """The last ``tail_chars`` characters of stdout and of stderr (at most ``PROMPT_LOG_CHARS``), each in a
    fenced block."""
    lines = []
    for name, value in (("stdout", result.stdout_tail), ("stderr", result.stderr_tail)):
        text = as_text(value)
        tail = log_tail(text, tail_chars)
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
            problems[check.index] = head_capped(check.problem, PROMPT_PROBLEM_CHARS)
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
    """The last ``tail_chars`` characters of a log stream (PIKE keeps the ending of each), at most
    ``PROMPT_LOG_CHARS``. Unmarked, as PIKE's: the fix prompt's words say it is the end of the stream."""
    keep = min(tail_chars, PROMPT_LOG_CHARS)
    return as_text(text)[-keep:] if keep > 0 else ""


def as_text(value: Any) -> str:
    """A result's text field as a string: a wrongly typed value (a forged result) is shown as its
    ``str``, None as nothing."""
    return "" if value is None else value if isinstance(value, str) else str(value)


def head_capped(value: Any, limit: int) -> str:
    """``value`` as text, whole when at most ``limit`` characters, else its first ``limit`` and a note
    of the cut (``text_safety.head_capped``)."""
    return text_safety.head_capped(as_text(value), limit)


def tail_capped(value: Any, limit: int) -> str:
    """``value`` as text, whole when at most ``limit`` characters, else a note of the cut and its last
    ``limit`` (``text_safety.tail_capped``)."""
    return text_safety.tail_capped(as_text(value), limit)
