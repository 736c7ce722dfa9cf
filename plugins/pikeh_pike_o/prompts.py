"""PIKE-O's two prompt templates, built from PIKE-B's pieces (``pike_harness.prompting``).

- **mutation**: PIKE-B's improve prompt, unchanged: problem statement, worked example, the task's
  reference and the current program, nothing else.
- **crossover**: OpenEvolve's full-rewrite prompt in PIKE's words: the same problem statement, example
  and reference, then the current program's fitness, feature coordinates and evaluation artifacts, the
  island's top programs, inspiration programs, and last the current program itself.

Unlike every prompt in ``pike_harness.prompting``, the crossover prompt shows fitness, which is
1 / runtime: the spec's crossover template carries it, as OpenEvolve's does. The mutation template
shows none, so the ``mut`` ablation also removes every timing from the prompts.

Each section starts with a fixed header line, and the current program always comes last, so a test
double (or ``offline:mutate``, which takes the last ``ModelNew`` block after the reference) can find
every program a prompt quotes: ``crossover_sections`` does that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pike_harness.api import EvalResult, Task, prompting

from .features import FEATURES

CROSSOVER_MARKER = "Evolve the current program (shown last) into a faster program."
FITNESS_RULE = ("Fitness is 1 / runtime in milliseconds (higher is faster); a program that failed to build, "
                "crashed, timed out or gave wrong outputs has fitness 0.")
INFO_HEADER = "## Current program: fitness, features and evaluation"
TOP_HEADER = "## Top programs"
INSPIRATION_HEADER = "## Inspiration programs"
CURRENT_HEADER = "## Current program"
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
    return prompting.improve_messages(task, current_code)


def crossover_messages(task: Task, current: Shown, tops: Sequence[Shown], inspirations: Sequence[Shown], *,
                       bins: int, tail_chars: int) -> Messages:
    info = "\n".join([
        INFO_HEADER,
        f"- Fitness: {format_fitness(current.fitness)}",
        f"- Feature coordinates: {_coords(current.coords, bins)}",
        "- Evaluation artifacts:",
        _artifacts(current.result, tail_chars),
    ])
    parts = [
        prompting.problem_statement(task),
        prompting.worked_example(),
        prompting.reference_section(task),
        f"{CROSSOVER_MARKER}\n{FITNESS_RULE}",
        info,
        _programs(TOP_HEADER, "The fittest programs of this island so far.", "Top program", tops, bins),
        _programs(INSPIRATION_HEADER, "Other programs of this island, with different approaches, for ideas.",
                  "Inspiration", inspirations, bins),
        f"{CURRENT_HEADER}\n{prompting.fence(current.code)}",
        "Write a new version of the current program that runs faster while keeping its outputs correct. "
        "You may combine ideas from the top and inspiration programs. Rewrite the whole program; do not "
        "answer with a diff.",
        prompting.output_instruction("the complete new program"),
    ]
    return [{"role": "system", "content": prompting.SYSTEM_PROMPT},
            {"role": "user", "content": "\n\n".join(parts)}]


def _coords(coords: tuple[int, ...], bins: int) -> str:
    shown = ", ".join(f"{name} {value}" for name, value in zip(FEATURES, coords, strict=False))
    return f"{shown} (bins 0 to {bins - 1})" if shown else "not computed"


def _artifacts(result: EvalResult | None, tail_chars: int) -> str:
    if result is None:
        return "No evaluation."
    if result.is_correct:
        return "Evaluation result: correct."
    return prompting.failure_report(result, tail_chars=tail_chars)


def _programs(header: str, blurb: str, title: str, programs: Sequence[Shown], bins: int) -> str:
    if not programs:
        return f"{header}\n{NONE_YET}"
    lines = [header, blurb]
    for number, program in enumerate(programs, start=1):
        verdict = "correct" if program.result is not None and program.result.is_correct else (
            program.result.category if program.result is not None else "not evaluated")
        lines.append(f"### {title} {number} (fitness {format_fitness(program.fitness)}, {verdict}, "
                     f"{_coords(program.coords, bins)})")
        lines.append(prompting.fence(program.code))
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


def is_crossover(messages: Sequence[dict[str, str]] | str) -> bool:
    return CROSSOVER_MARKER in _text(messages)


def crossover_sections(messages: Sequence[dict[str, str]] | str) -> CrossoverSections | None:
    text = _text(messages)
    if CROSSOVER_MARKER not in text:
        return None
    after = text.split(CROSSOVER_MARKER, 1)[1]
    info, _, rest = after.partition(f"\n\n{TOP_HEADER}\n")
    tops_text, _, rest = rest.partition(f"\n\n{INSPIRATION_HEADER}\n")
    insp_text, _, rest = rest.partition(f"\n\n{CURRENT_HEADER}\n")
    current = prompting.code_blocks(rest)
    fitness = info.split("- Fitness: ", 1)[1].split("\n", 1)[0] if "- Fitness: " in info else ""
    return CrossoverSections(fitness=fitness, tops=_quoted(tops_text), top_fitness=_fitnesses(tops_text),
                             inspirations=_quoted(insp_text), inspiration_fitness=_fitnesses(insp_text),
                             current=current[0] if current else "")


def _quoted(section: str) -> list[str]:
    return [] if section.strip() == NONE_YET else prompting.code_blocks(section)


def _fitnesses(section: str) -> list[str]:
    return [line.split("(fitness ", 1)[1].split(",", 1)[0] for line in section.splitlines()
            if line.startswith("### ") and "(fitness " in line]


def _text(messages: Sequence[dict[str, str]] | str) -> str:
    if isinstance(messages, str):
        return messages
    users = [m.get("content", "") for m in messages if m.get("role") == "user"]
    return users[-1] if users else ""
