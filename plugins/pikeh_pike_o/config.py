"""PIKE-O's options: ``--preset`` plus every parameter of the search, each defaulting to the preset's value.

Every field but ``preset`` defaults to None, meaning "take it from the preset"; ``__post_init__``
fills those in. The host records the Config after ``__post_init__`` (``dataclasses.asdict``), so a
run's run.json holds the resolved values, and a resumed run rebuilds exactly that Config from them.
A value given on the command line or in run.toml's [strategy] table reaches the Config as an
explicit argument and therefore wins over the preset.

No ``from __future__ import annotations``: the host reads these field types to build CLI options.
"""

import math
from dataclasses import dataclass, field, fields
from typing import Any

from pike_harness.api import UserError, prompt_pack, require_at_least

from . import presets, prompts

TEMPLATES = ("crossover", "mutation")
MIGRATION_RULES = ("pike", "next")
EMPTY_ISLAND_RULES = ("seed", "whole")


@dataclass(frozen=True)
class SearchParams:
    """The preset-filled fields of ``PikeOConfig`` once resolved, typed as the search reads them: on the
    Config they are Optional (None: "take the preset's"), which ``__post_init__`` never leaves."""

    template: str
    num_top_programs: int
    num_inspirations: int
    num_diverse_programs: int
    population_size: int
    archive_size: int
    exclude_reference: bool
    num_islands: int
    elite_selection_ratio: float
    exploration_ratio: float
    exploitation_ratio: float
    parallel_evaluations: int
    migration_interval: int
    migration_rate: float
    feature_bins: int
    max_fix_attempts: int
    log_tail_chars: int


def _option(help_text: str, name: str) -> Any:
    return field(default=None, metadata={"help": f"{help_text} [default from --preset; {presets.describe(name)}]"})


@dataclass
class PikeOConfig:
    """PIKE-O's parameters; the defaults come from the preset (the paper's PIKE-O unless --preset says)."""

    preset: str = field(default=presets.DEFAULT_PRESET, metadata={
        "help": "named configuration of the paper's ablation chain: " + ", ".join(presets.preset_names())
                + "; it supplies every option below that is not given explicitly"})
    template: str | None = _option(
        "prompt template: crossover (fitness, feature coordinates, evaluation artifacts, top and inspiration "
        "programs, current program) or mutation (PIKE-B's improve prompt: reference + current program)",
        "template")
    num_top_programs: int | None = _option("top programs of the island shown in a crossover prompt",
                                           "num_top_programs")
    num_inspirations: int | None = _option("inspiration programs shown in a crossover prompt",
                                           "num_inspirations")
    num_diverse_programs: int | None = _option(
        "diverse programs of the island (beyond its top programs) shown in a crossover prompt",
        "num_diverse_programs")
    population_size: int | None = _option("programs kept in the database (all islands); the least fit "
                                          "go first, never the best", "population_size")
    archive_size: int | None = _option("elite archive size: where exploitation parents come from",
                                       "archive_size")
    exclude_reference: bool | None = _option(
        "keep the task's reference out of the archive, so it is never an exploitation parent (PIKE's later "
        "change; the paper's first two PIKE-O rows may have run without it)", "exclude_reference")
    num_islands: int | None = _option("islands; the 2W iterations in flight are spread evenly over them",
                                      "num_islands")
    elite_selection_ratio: float | None = _option(
        "share of the inspirations taken from the island's fittest programs", "elite_selection_ratio")
    exploration_ratio: float | None = _option("chance a parent is drawn uniformly from its island",
                                              "exploration_ratio")
    exploitation_ratio: float | None = _option(
        "chance a parent is drawn from the archive; the rest (1 - exploration - exploitation) draws "
        "uniformly from the whole database", "exploitation_ratio")
    parallel_evaluations: int | None = _option(
        "OpenEvolve's parallel evaluations W: about 2W iterations are kept in flight, max(1, 2W // islands) "
        "per island", "parallel_evaluations")
    migration_interval: int | None = _option(
        "migrate after this many iterations have added a program since the last migration",
        "migration_interval")
    migration_rate: float | None = _option(
        "share of each island's fittest programs copied to the next island at a migration",
        "migration_rate")
    feature_bins: int | None = _option("bins per MAP-Elites feature (code complexity, code diversity)",
                                       "feature_bins")
    max_fix_attempts: int | None = _option(
        "error-fixing queries per iteration (each counts toward the budget); 0 disables error fixing",
        "max_fix_attempts")
    log_tail_chars: int | None = _option(
        "characters kept (from the end) of each raw evaluation artifact (stdout, stderr, reason, ...) "
        "shown in crossover and error-fixing prompts", "log_tail_chars")

    # Our variants of PIKE's rules; each default is PIKE's (docs/strategies.md, "PIKE vs pike-harness").
    empty_island: str = field(default="seed", metadata={
        "help": "parent of a draw on an empty island: seed (PIKE's: a fresh copy of the best program, "
                "placed on that island, so every island starts its own line in the first batch) or whole "
                "(ours: a program drawn from the whole database; its child joins that program's island)"})
    migration_rule: str = field(default="pike", metadata={
        "help": "pike (PIKE's: a round-robin island pointer bumps per-island generation counters, "
                "migration when the largest has moved --migration-interval; copies to both neighbours, "
                "migrants skipped) or next (ours: every --migration-interval added children, to the next "
                "island only, duplicate code skipped, population limit applied at once)"})
    protect_new: bool = field(default=True, metadata={
        "help": "the population limit never removes the program just added (PIKE's; off, ours: only the "
                "best is protected, so a failed newcomer that is the unique lowest removes itself)"})
    crossover_content: str = field(default="pike", metadata={
        "help": "what a crossover prompt shows: pike (the fork's: previous attempts are the island's top "
                "programs as metrics and outcome without code, diverse programs its next fittest, "
                "inspirations exclude only the parent, no per-program feature coordinates, artifacts cut "
                "to their first --log-tail-chars) or ours (the island's latest attempts, diverse programs "
                "drawn from all past the top, inspirations distinct from every program shown, coordinates "
                "per program, artifacts cut to their last --log-tail-chars)"})
    top_p: float = field(default=0.95, metadata={
        "help": "nucleus sampling sent with every PIKE-O query (PIKE-O's 0.95; the provider preset's, such "
                "as Gemini's 1.0, is PIKE-B's)"})
    top_k: int = field(default=0, metadata={
        "help": "top-k sent with every PIKE-O query; 0 sends none (PIKE-O's), -1 keeps the provider "
                "preset's (Gemini: 50, as PIKE-B sent)"})
    efa_tail_chars: int = field(default=0, metadata={
        "help": "characters kept (from the end) of each artifact in the error-fixing prompt; 0 shows the "
                "whole artifacts (PIKE's)"})
    # The hash field first: once ``prompt_pack`` is a field name, the class body no longer sees the module.
    prompt_pack_sha256: str = prompt_pack.hash_option()
    prompt_pack: str = prompt_pack.pack_option()
    keep_after_llm_failure: bool = field(default=False, metadata={
        "help": "when a fix query fails for good (LLM error), add the iteration's last program anyway "
                "(ours); PIKE drops the whole iteration"})

    def __post_init__(self) -> None:
        canonical = presets.canonical_name(str(self.preset))
        if canonical is None:
            raise UserError(f"--preset {self.preset!r} is not a PIKE-O preset; choose one of: "
                            + ", ".join(presets.preset_names()))
        self.preset = canonical
        for name, value in presets.preset_values(canonical).items():
            if getattr(self, name) is None:
                setattr(self, name, value)
        self._validate()
        prompt_pack.attach(self, prompts.load)

    def _validate(self) -> None:
        if self.template not in TEMPLATES:
            raise UserError(f"--template must be crossover or mutation (got {self.template!r})")
        if self.empty_island not in EMPTY_ISLAND_RULES:
            raise UserError(f"--empty-island must be seed or whole (got {self.empty_island!r})")
        if self.crossover_content not in ("pike", "ours"):
            raise UserError(f"--crossover-content must be pike or ours (got {self.crossover_content!r})")
        if self.migration_rule not in MIGRATION_RULES:
            raise UserError(f"--migration-rule must be pike or next (got {self.migration_rule!r})")
        if not 0.0 < float(self.top_p) <= 1.0:
            raise UserError(f"--top-p must be above 0 and at most 1 (got {self.top_p!r})")
        if self.top_k < -1:
            raise UserError(f"--top-k must be -1 (the preset's), 0 (none) or a positive count (got {self.top_k!r})")
        if not isinstance(self.exclude_reference, bool):
            raise UserError(f"--exclude-reference must be true or false (got {self.exclude_reference!r})")
        require_at_least(self, num_top_programs=0, num_inspirations=0, num_diverse_programs=0,
                         population_size=1, archive_size=1,
                         num_islands=1, parallel_evaluations=1, migration_interval=1, feature_bins=1,
                         max_fix_attempts=0, log_tail_chars=0, efa_tail_chars=0)
        for name in ("elite_selection_ratio", "exploration_ratio", "exploitation_ratio", "migration_rate"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
                raise UserError(f"{_flag(name)} must be between 0 and 1 (got {value!r})")
            setattr(self, name, float(value))
        if self.params.exploration_ratio + self.params.exploitation_ratio > 1.0 + 1e-9:
            raise UserError(f"--exploration-ratio ({self.exploration_ratio:g}) plus --exploitation-ratio "
                            f"({self.exploitation_ratio:g}) must not exceed 1")

    @property
    def params(self) -> SearchParams:
        """The preset-filled fields, resolved and typed (read after ``__post_init__``)."""
        return SearchParams(**{f.name: getattr(self, f.name) for f in fields(SearchParams)})

    @property
    def in_flight_per_island(self) -> int:
        """OpenEvolve's batch: 2W iterations spread evenly over the islands, at least one each."""
        params = self.params
        return max(1, 2 * params.parallel_evaluations // params.num_islands)

    @property
    def random_ratio(self) -> float:
        """The share of parents drawn uniformly from the whole database."""
        return max(0.0, 1.0 - self.params.exploration_ratio - self.params.exploitation_ratio)

    def overrides(self) -> dict[str, Any]:
        """The fields whose value differs from the preset's (for the run log)."""
        base = presets.preset_values(self.preset)
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name in base and not _same(getattr(self, f.name), base[f.name])}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b))
    return a == b


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")
