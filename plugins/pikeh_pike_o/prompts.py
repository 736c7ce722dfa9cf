"""PIKE-O's prompts, built from PIKE-B's pieces (``pike_harness.kit.prompt_templates``) as PIKE's OpenEvolve fork
laid them out (shared/specs/pike-o.md, "Corrections").

- **mutation**: PIKE-B's improve prompt, unchanged: problem statement, worked example, the task's
  reference and the current program, nothing else.
- **crossover**: OpenEvolve's full-rewrite prompt in PIKE's words, under a performance-engineering
  system message: the problem statement, example and reference, then the current program's metrics
  (fitness, feature coordinates) and raw evaluation results (every artifact, up to ``tail_chars`` per
  key, also when it was correct), the island's top programs (they may include the current program and
  failed ones), diverse programs, the previous attempts with their raw runtimes, inspiration programs,
  and last the current program itself.
- **error fixing** (``efa_messages``): PIKE-O's own generic prompt, not PIKE-B's two EFA prompts: the
  program failed to compile, failed the correctness check or timed out; here are its raw evaluation
  artifacts; fix it.

Unlike every prompt in ``pike_harness.kit.prompt_templates``, the crossover prompt shows runtimes and fitness
(1 / runtime), as OpenEvolve's does; the mutation template shows none, so the ``mut`` ablation also
removes every timing from the prompts.

Each section starts with a fixed header line, and the current program always comes last, so a test
double (or ``offline:mutate``, which takes the last ``ModelNew`` block after the reference) can find
every program a prompt quotes: ``crossover_sections`` does that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pike_harness.api import EvalResult, Task, code_fences, prompt_templates

from .features import FEATURES

SYSTEM_MESSAGE = (
    "You are an expert software developer and performance engineer. You make PyTorch programs faster on "
    "NVIDIA GPUs with custom CUDA and Triton kernels, and you answer with complete, runnable programs."
)
CROSSOVER_MARKER = "Evolve the current program (shown last) into a faster program."
FITNESS_RULE = ("Fitness is 1 / runtime in milliseconds (higher is faster); a program that failed to build, "
                "crashed, timed out or gave wrong outputs has fitness 0.")
INFO_HEADER = "## Current program: metrics and evaluation results"
TOP_HEADER = "## Top programs"
DIVERSE_HEADER = "## Diverse programs"
PREVIOUS_HEADER = "## Previous attempts"
INSPIRATION_HEADER = "## Inspiration programs"
CURRENT_HEADER = "## Current program"
EFA_HEADER = ("The program failed to compile, failed the correctness check, or timed out. Its raw "
              "evaluation artifacts:")
NONE_YET = "(none yet)"

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class Shown:
    """A program as a crossover prompt shows it."""

    code: str
    fitness: float
    coords: tuple[int, ...]
    result: EvalResult | None


def format_fitness(fitness: float) -> str:
    return f"{fitness:.4f}"


def mutation_messages(task: Task, current_code: str) -> Messages:
    """PIKE-B's improve prompt: the reference and the current program only."""
    return prompt_templates.improve_messages(task, current_code)


def crossover_messages(task: Task, current: Shown, tops: Sequence[Shown], inspirations: Sequence[Shown], *,
                       bins: int, tail_chars: int, diverse: Sequence[Shown] = (),
                       previous: Sequence[Shown] = ()) -> Messages:
    info = "\n".join([
        INFO_HEADER,
        f"- Fitness: {format_fitness(current.fitness)}",
        f"- Feature coordinates: {_coords(current.coords, bins)}",
        "- Evaluation results:",
        raw_artifacts(current.result, tail_chars),
    ])
    parts = [
        prompt_templates.problem_statement(task),
        prompt_templates.worked_example(),
        prompt_templates.reference_section(task),
        f"{CROSSOVER_MARKER}\n{FITNESS_RULE}",
        info,
        _programs(TOP_HEADER, "The fittest programs of this island so far.", "Top program", tops, bins),
        _programs(DIVERSE_HEADER, "Other programs of this island.", "Diverse program", diverse, bins),
        _previous(previous),
        _programs(INSPIRATION_HEADER, "Other programs of this island, with different approaches, for ideas.",
                  "Inspiration", inspirations, bins),
        f"{CURRENT_HEADER}\n{code_fences.fence(current.code)}",
        "Write a new version of the current program that runs faster while keeping its outputs correct. "
        "You may combine ideas from the other programs. Rewrite the whole program; do not answer with a diff.",
        prompt_templates.output_instruction("the complete new program"),
    ]
    return [{"role": "system", "content": SYSTEM_MESSAGE}, {"role": "user", "content": "\n\n".join(parts)}]


def efa_messages(task: Task, code: str, result: EvalResult, *, tail_chars: int) -> Messages:
    """PIKE-O's error-fixing prompt: the failing program and its raw evaluation artifacts."""
    parts = [
        prompt_templates.problem_statement(task),
        prompt_templates.reference_section(task),
        f"{prompt_templates.FIX_MARKER}\n{code_fences.fence(code)}",
        f"{EFA_HEADER}\n{raw_artifacts(result, tail_chars)}",
        "Fix the program.",
        prompt_templates.output_instruction("the complete fixed program"),
    ]
    return [{"role": "system", "content": SYSTEM_MESSAGE}, {"role": "user", "content": "\n\n".join(parts)}]


def raw_artifacts(result: EvalResult | None, tail_chars: int) -> str:
    """Every evaluation artifact as ``key: value``, each value cut to its last ``tail_chars`` characters
    (OpenEvolve passes artifacts through raw, up to 20 KB per key)."""
    if result is None:
        return "No evaluation."
    values: dict[str, object] = {"category": result.category, "check": result.check, "reason": result.reason,
                                 "runtime_ms": result.runtime_ms, "timed_out": result.category == "timeout"}
    for check in result.outputs:
        if check.max_abs_diff is not None or check.problem:
            name = f"output{check.index}_input_set{check.input_set}"
            values[name] = check.problem or f"max_abs_diff={check.max_abs_diff:.6g}"
    values["stdout"] = result.stdout_tail
    values["stderr"] = result.stderr_tail
    lines = []
    for key, value in values.items():
        if value is None or value == "":
            continue
        text = str(value)
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


def _programs(header: str, blurb: str, title: str, programs: Sequence[Shown], bins: int) -> str:
    if not programs:
        return f"{header}\n{NONE_YET}"
    lines = [header, blurb]
    for number, program in enumerate(programs, start=1):
        lines.append(f"### {title} {number} (fitness {format_fitness(program.fitness)}, {_verdict(program)}, "
                     f"{_coords(program.coords, bins)})")
        lines.append(code_fences.fence(program.code))
    return "\n".join(lines)


def _previous(programs: Sequence[Shown]) -> str:
    """The island's latest programs, oldest first, with their raw metrics (no code)."""
    if not programs:
        return f"{PREVIOUS_HEADER}\n{NONE_YET}"
    lines = [PREVIOUS_HEADER]
    for number, program in enumerate(programs, start=1):
        lines.append(f"- Attempt {number}: fitness {format_fitness(program.fitness)}, {_verdict(program)}")
    return "\n".join(lines)


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
    return [line.split("(fitness ", 1)[1].split(",", 1)[0] for line in section.splitlines()
            if line.startswith("### ") and "(fitness " in line]


def _text(messages: Sequence[dict[str, str]] | str) -> str:
    if isinstance(messages, str):
        return messages
    users = [m.get("content", "") for m in messages if m.get("role") == "user"]
    return users[-1] if users else ""
