"""PIKE-O's prompts, as PIKE's OpenEvolve fork laid them out, worded by a prompt pack: this plugin's
``prompt_pack/`` folder (system message, mutation, crossover and error-fixing templates) over the shared
PIKE pack's problem statement and worked example (``pike_harness.kit.prompt_templates``).

- **mutation**: PIKE-B's improve prompt as the fork wrote it: problem statement, worked example, the
  task's reference and the current program, nothing else.
- **crossover**: OpenEvolve's full-rewrite prompt in PIKE's words, under a performance-engineering
  system message: the problem statement, example and reference, then the current program's metrics
  (fitness, feature coordinates) and raw evaluation results (every artifact, up to ``tail_chars`` per
  key, also when it was correct), the island's top programs (they may include the current program and
  failed ones), diverse programs, the previous attempts with their raw runtimes, inspiration programs,
  and last the current program itself.
- **error fixing** (``efa_messages``): PIKE-O's own generic prompt, not PIKE-B's two EFA prompts: the
  program failed to compile, failed the correctness check or timed out; here are its raw evaluation
  artifacts, whole (within caps no real evaluation reaches, ``artifact_values``); fix it.

Unlike every prompt in ``pike_harness.kit.prompt_templates``, the crossover prompt shows runtimes and fitness
(1 / runtime), as OpenEvolve's does; the mutation template shows none, so the ``mut`` ablation also
removes every timing from the prompts.

Each section starts with a fixed header line, and the current program always comes last, so a test
double (or ``offline:mutate``, which takes the last ``ModelNew`` block after the reference) can find
every program a prompt quotes: ``crossover_sections`` does that.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pike_harness.api import EvalResult, Task, code_fences, failure_reports, prompt_pack, prompt_templates

from .features import FEATURES

PACK = Path(__file__).parent / "prompt_pack"
# PIKE-O's own files, then the PIKE pieces its templates share with PIKE-B (problem statement, example).
_SHARED = frozenset({"problem", "example", "reference"})
SCHEMA: dict[str, frozenset[str] | None] = {
    "system.txt": frozenset(),
    "mutation.txt": _SHARED | {"current"},
    "crossover.txt": _SHARED | {"fitness", "coords", "artifacts", "history", "current"},
    "efa.txt": _SHARED | {"code", "artifacts"},
    **{name: prompt_templates.SCHEMA[name] for name in
       ("problem.txt", "example.txt", "example_reference.py", "example_solution.py")},
}
CROSSOVER_MARKER = "Evolve the current program (shown last) into a faster program."
INFO_HEADER = "## Current program: metrics and evaluation results"
TOP_HEADER = "## Top programs"
DIVERSE_HEADER = "## Diverse programs"
PREVIOUS_HEADER = "## Previous attempts"
INSPIRATION_HEADER = "## Inspiration programs"
CURRENT_HEADER = "## Current program"
NONE_YET = "(none yet)"

Messages = list[dict[str, str]]


def load(folder: str | Path | None = None) -> prompt_pack.PromptPack:
    """PIKE-O's pack: ``folder`` (``--prompt-pack``) alone when given, else this plugin's templates
    over the shared PIKE pack."""
    return prompt_pack.load_pack(prompt_pack.pack_folders(folder, (PACK, prompt_templates.PIKE_PACK)), SCHEMA)


@cache
def default_pack() -> prompt_pack.PromptPack:
    return load()


@dataclass(frozen=True)
class Shown:
    """A program as a crossover prompt shows it."""

    code: str
    fitness: float
    coords: tuple[int, ...]
    result: EvalResult | None
    parent_fitness: float | None = None


def format_fitness(fitness: float) -> str:
    return f"{fitness:.4f}"


def _render(pack: prompt_pack.PromptPack | None, template: str, task: Task, **values: str) -> Messages:
    pack = pack or default_pack()
    shared = {"problem": prompt_templates.problem_statement(task, pack), "reference": code_fences.fence(task.source),
              "example": prompt_templates.worked_example(pack)}
    return prompt_templates.messages(pack, pack.render(template, **shared, **values))


def mutation_messages(task: Task, current_code: str, pack: prompt_pack.PromptPack | None = None) -> Messages:
    """PIKE-O's mutation template: PIKE-B's improve prompt as the fork wrote it (the reference and the
    current program only)."""
    return _render(pack, "mutation", task, current=code_fences.fence(current_code))


def crossover_messages(task: Task, current: Shown, tops: Sequence[Shown], inspirations: Sequence[Shown], *,
                       bins: int, tail_chars: int, diverse: Sequence[Shown] = (),
                       previous: Sequence[Shown] = (), pack: prompt_pack.PromptPack | None = None,
                       content: str = "pike") -> Messages:
    """``content="pike"``: the fork's sections (previous attempts as metrics and outcome, programs with
    their fitness only, artifacts cut to their first ``tail_chars``); ``"ours"``: the latest attempts
    with their verdicts, feature coordinates per program, artifacts cut to their last ``tail_chars``."""
    per_program = None if content == "pike" else bins
    history = "\n\n".join([
        _programs(TOP_HEADER, "The fittest programs of this island so far.", "Top program", tops, per_program),
        _programs(DIVERSE_HEADER, "Other programs of this island.", "Diverse program", diverse, per_program),
        _previous(previous, numbered_from_last=content == "pike"),
        _programs(INSPIRATION_HEADER, "Other programs of this island, with different approaches, for ideas.",
                  "Inspiration", inspirations, per_program),
    ])
    artifacts = raw_artifacts(current.result, tail_chars, head=content == "pike")
    return _render(pack, "crossover", task, fitness=format_fitness(current.fitness),
                   coords=_coords(current.coords, bins), artifacts="- Evaluation results:\n" + artifacts,
                   history=history, current=code_fences.fence(current.code))


def efa_messages(task: Task, code: str, result: EvalResult, *, tail_chars: int,
                 pack: prompt_pack.PromptPack | None = None) -> Messages:
    """PIKE-O's error-fixing prompt: the failing program and its raw evaluation artifacts, whole (PIKE's
    fork prints the artifacts dictionary uncut; ``tail_chars`` > 0 keeps the end of each, ours). "Whole"
    within ``artifact_values``' caps, which no real evaluation reaches."""
    return _render(pack, "efa", task, code=code_fences.fence(code),
                   artifacts=code_fences.fence(json.dumps(artifact_values(result), indent=2, default=str)
                                               if tail_chars <= 0 else raw_artifacts(result, tail_chars), "text"))


def artifact_values(result: EvalResult | None) -> dict[str, object]:
    """The evaluation's artifacts as PIKE's evaluator reported them: verdict fields and both logs.

    Each text is capped (``failure_reports.PROMPT_*_CHARS``: a reason to its first 24,000 characters, an
    output's problem to 2,000, a check to 200, a log to its last 40,000, each marked where cut). PIKE's fork shows
    its artifacts uncut, but no real evaluation comes near a cap: they only bound what a forged result
    (a hostile candidate's) can put into a prompt."""
    if result is None:
        return {}
    caps = failure_reports
    values: dict[str, object] = {"category": result.category,
                                 "check": caps.head_capped(result.check, caps.PROMPT_CHECK_CHARS),
                                 "reason": caps.head_capped(result.reason, caps.PROMPT_REASON_CHARS),
                                 "runtime_ms": result.runtime_ms, "timed_out": result.category == "timeout"}
    for check in result.outputs:
        if check.max_abs_diff is not None or check.problem:
            name = f"output{check.index}_input_set{check.input_set}"
            values[name] = (caps.head_capped(check.problem, caps.PROMPT_PROBLEM_CHARS) if check.problem
                            else f"max_abs_diff={check.max_abs_diff:.6g}")
    values["stdout"] = caps.tail_capped(result.stdout_tail, caps.PROMPT_LOG_CHARS)
    values["stderr"] = caps.tail_capped(result.stderr_tail, caps.PROMPT_LOG_CHARS)
    return {k: v for k, v in values.items() if v is not None and v != ""}


def raw_artifacts(result: EvalResult | None, tail_chars: int, *, head: bool = False) -> str:
    """Every evaluation artifact as ``key: value``, each value cut to ``tail_chars`` characters: its
    first ones and a truncation note with ``head`` (OpenEvolve's 20 KB per key), else its last ones."""
    if result is None:
        return "No evaluation."
    lines = []
    for key, value in artifact_values(result).items():
        text = str(value)
        if head:
            text = text[:tail_chars] + "\n... (truncated)" if len(text) > tail_chars else text
        else:
            text = text[-tail_chars:] if tail_chars > 0 else ""
        lines.append(f"{key}:\n{code_fences.fence(text, 'text')}" if "\n" in text else f"{key}: {text}")
    return "\n".join(lines)


def _coords(coords: tuple[int, ...], bins: int) -> str:
    shown = ", ".join(f"{name} {value}" for name, value in zip(FEATURES, coords, strict=False))
    return f"{shown} (bins 0 to {bins - 1})" if shown else "not computed"


def _verdict(program: Shown) -> str:
    if program.result is None:
        return "not evaluated"
    if program.result.is_correct:
        return f"correct, runtime_ms={program.result.runtime_ms:g}"
    return program.result.category


def _programs(header: str, blurb: str, title: str, programs: Sequence[Shown], bins: int | None) -> str:
    """Programs with their code; ``bins`` None shows the fitness alone (the fork), else the verdict and
    feature coordinates too (ours)."""
    if not programs:
        return f"{header}\n{NONE_YET}"
    lines = [header, blurb]
    for number, program in enumerate(programs, start=1):
        about = "" if bins is None else f", {_verdict(program)}, {_coords(program.coords, bins)}"
        lines.append(f"### {title} {number} (fitness {format_fitness(program.fitness)}{about})")
        lines.append(code_fences.fence(program.code))
    return "\n".join(lines)


def _previous(programs: Sequence[Shown], *, numbered_from_last: bool) -> str:
    """Earlier attempts as metrics and an outcome, without code. The fork lists its programs last one
    first, numbered down to 1; ours lists the island's latest programs oldest first."""
    if not programs:
        return f"{PREVIOUS_HEADER}\n{NONE_YET}"
    lines = [PREVIOUS_HEADER]
    order = list(reversed(programs)) if numbered_from_last else list(programs)
    for i, program in enumerate(order):
        number = len(programs) - i if numbered_from_last else i + 1
        lines.append(f"- Attempt {number}: full rewrite; fitness {format_fitness(program.fitness)}, "
                     f"{_verdict(program)}; {_outcome(program)}")
    return "\n".join(lines)


def _outcome(program: Shown) -> str:
    """Against its parent's fitness, in the fork's words' sense (an iteration's child against its parent)."""
    if program.parent_fitness is None:
        return "no parent"
    if program.fitness > program.parent_fitness:
        return "improvement over its parent"
    if program.fitness < program.parent_fitness:
        return "regression from its parent"
    return "mixed results against its parent"


# -- reading a crossover prompt back (tests, offline backends) ------------------------------------

@dataclass
class CrossoverSections:
    """The programs a crossover prompt quotes, in order, and the current program's fitness line."""

    fitness: str
    tops: list[str]
    top_fitness: list[str]
    inspirations: list[str]
    inspiration_fitness: list[str]
    current: str
    diverse: list[str]
    previous: list[str]  # one line per previous attempt, with its raw runtime
    info: str  # the current program's metrics and raw evaluation results


def is_crossover(messages: Sequence[dict[str, str]] | str) -> bool:
    return CROSSOVER_MARKER in _text(messages)


def crossover_sections(messages: Sequence[dict[str, str]] | str) -> CrossoverSections | None:
    text = _text(messages)
    if CROSSOVER_MARKER not in text:
        return None
    after = text.split(CROSSOVER_MARKER, 1)[1]
    info, _, rest = after.partition(f"\n\n{TOP_HEADER}\n")
    tops_text, _, rest = rest.partition(f"\n\n{DIVERSE_HEADER}\n")
    diverse_text, _, rest = rest.partition(f"\n\n{PREVIOUS_HEADER}\n")
    previous_text, _, rest = rest.partition(f"\n\n{INSPIRATION_HEADER}\n")
    insp_text, _, rest = rest.partition(f"\n\n{CURRENT_HEADER}\n")
    current = code_fences.code_blocks(rest)
    fitness = info.split("- Fitness: ", 1)[1].split("\n", 1)[0] if "- Fitness: " in info else ""
    return CrossoverSections(fitness=fitness, tops=_quoted(tops_text), top_fitness=_fitnesses(tops_text),
                             inspirations=_quoted(insp_text), inspiration_fitness=_fitnesses(insp_text),
                             current=current[0] if current else "", diverse=_quoted(diverse_text),
                             previous=[line for line in previous_text.splitlines() if line.startswith("- Attempt")],
                             info=info)


def _quoted(section: str) -> list[str]:
    return [] if section.strip() == NONE_YET else code_fences.code_blocks(section)


def _fitnesses(section: str) -> list[str]:
    return [re.split(r"[,)]", line.split("(fitness ", 1)[1], maxsplit=1)[0] for line in section.splitlines()
            if line.startswith("### ") and "(fitness " in line]


def _text(messages: Sequence[dict[str, str]] | str) -> str:
    if isinstance(messages, str):
        return messages
    users = [m.get("content", "") for m in messages if m.get("role") == "user"]
    return users[-1] if users else ""
