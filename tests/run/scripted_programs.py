"""A fake model whose answers are real programs of known speed for smoke/1 (matmul + ReLU).

Every program is tagged (``# variant: TAG``) so a test can tell from later prompts which programs the
strategy chose as parents, and every reply carries the server's serial number so a test can tell
which sends of a prompt made it into the run's journal. Speed is controlled by extra work per call
(``work`` milliseconds of sleep per call: wall time that CPU contention from other processes cannot
reorder); correctness by emitting a syntax error.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

from pike_harness.api import EvalRequest, EvalResult
from pike_harness.kit import prompt_kinds, prompt_templates
from pike_harness.testing import default_verdict, fake_evaluator_plugin
from pike_harness.testing.llm_server import FakeReply, ReceivedRequest

TAG = re.compile(r"# variant: (\S+) work=(\d+)")

PROGRAM = '''import time

import torch
import torch.nn as nn

# variant: {tag} work={work}


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        if {work}:
            time.sleep({work} / 1000)
        return torch.relu(self.linear(x))
'''

BROKEN = '''import torch
# variant: {tag} work={work}
class ModelNew(torch.nn.Module)
    pass
'''


def program(tag: str, work: int, *, broken: bool = False) -> str:
    return (BROKEN if broken else PROGRAM).format(tag=tag, work=work)


def quoted_tag(request: ReceivedRequest) -> tuple[str, int] | None:
    """The tag and work of the program a fix or improve prompt quotes."""
    quoted = prompt_kinds.quoted_program(request.prompt_text)
    match = TAG.search(quoted or "")
    return (match.group(1), int(match.group(2))) if match else None


class ScriptedModel:
    """A reply function: ideas for brainstorm; tagged programs otherwise.

    Phase-0 idea ``k`` gets ``work = works[k]`` (None = a broken program); a fix answers with a correct
    program of ``fix_work``; an improve query copies its parent's speed. ``on_request(serial)`` runs
    before each reply (tests use it to kill the harness at a chosen request).
    """

    def __init__(self, works: list[int | None], fix_work: int = 10,
                 on_request: Callable[[int], None] | None = None):
        self.works = works
        self.fix_work = fix_work
        self.on_request = on_request
        self._serial = 0
        self._lock = threading.Lock()

    def __call__(self, request: ReceivedRequest) -> FakeReply:
        with self._lock:
            self._serial += 1
            serial = self._serial
        if self.on_request is not None:
            self.on_request(serial)
        text = request.prompt_text
        kind = prompt_kinds.prompt_kind(text)
        if kind == "brainstorm":
            body = "\n".join(f"- idea-{k}" for k in range(len(self.works)))
        elif kind == "fix":
            tag, _ = quoted_tag(request) or ("unknown", 0)
            body = _fenced(program(f"{tag}+fix", self.fix_work))
        elif kind == "improve":
            tag, work = quoted_tag(request) or ("unknown", 0)
            body = _fenced(program(f"{tag}>c{serial}", work))
        else:
            match = re.search(rf"{re.escape(prompt_templates.FOCUS_PREFIX)}\s*idea-(\d+)", text)
            k = int(match.group(1)) if match else 0
            work = self.works[k]
            body = _fenced(program(f"i{k}", work or 0, broken=work is None))
        return FakeReply(text=f"<!-- serial {serial} -->\n{body}")


def _fenced(code: str) -> str:
    return f"Here is the program.\n\n```python\n{code}```\n"


SERIAL = re.compile(r"<!-- serial (\d+) -->")


def serial_of(text: str) -> int | None:
    match = SERIAL.search(text)
    return int(match.group(1)) if match else None


# -- judging them without running them ------------------------------------------------------------
# Run-loop tests (budgets, phases, resume, signals) need verdicts, not the sandbox: the evaluator's own
# tests cover real evaluation. A scripted program's runtime is its declared work, so the ranking the
# strategy sees is exactly the one the script intended (no CPU contention can reorder it).
REFERENCE_MS = 1000.0
EVAL_SECONDS = 0.2  # each evaluation is "in flight" this long (scripted_pikeh.py: $SCRIPTED_EVAL_SECONDS)


def scripted_verdict(request: EvalRequest) -> EvalResult:
    """The reference at ``REFERENCE_MS``; a tagged program at 1 + its work in ms, or a compile error
    when it does not parse; any other program through the fake evaluator's default verdict."""
    if request.baseline_mode is not None or request.candidate_source == request.reference_source:
        return EvalResult(request_id=request.request_id, task=request.task, category="correct",
                          runtime_ms=REFERENCE_MS)
    match = TAG.search(request.candidate_source)
    if match is None:
        return default_verdict(request)
    try:
        compile(request.candidate_source, "candidate.py", "exec")
    except SyntaxError as exc:
        return EvalResult(request_id=request.request_id, task=request.task, category="compile_error",
                          reason=f"syntax error: {exc.msg}")
    return EvalResult(request_id=request.request_id, task=request.task, category="correct",
                      runtime_ms=1.0 + int(match.group(2)))


def scripted_evaluator_plugin(seconds: float = EVAL_SECONDS) -> object:
    """``--evaluator scripted``: the fake evaluator judging with ``scripted_verdict``, each evaluation
    in flight for ``seconds`` (so a test can interrupt one)."""
    return fake_evaluator_plugin(scripted_verdict, name="scripted", seconds=lambda _request: seconds)
