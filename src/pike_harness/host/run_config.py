"""A run's configuration, built once, with its defaults in one place.

``RunConfig`` holds every option that defines a run; its field defaults are the defaults everywhere
(``pikeh run``'s options show them, ``pikeh demo`` and config files fall back on them). ``RunConfig.build``
is the one constructor from parsed option values: the command line and ``--config run.toml`` are both
checked by the same click option types (one set of bounds) before they get here, see cli/run_cmd.py.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pike_harness.contracts.journal import safe_name
from pike_harness.contracts.llm import GenerationParams
from pike_harness.errors import UserError
from pike_harness.host.store import sha256

if TYPE_CHECKING:
    from pike_harness.contracts.strategy import Strategy

# Options that may change between a run and its resume without changing its results.
# The final re-timing and the final-best rule are among them: they change what is measured after a
# task's search and which attempt is reported, never the search itself.
OPERATIONAL_OPTIONS = ("llm_base_url", "llm_concurrency", "evaluator_options", "llm_cache", "replay_dir",
                       "final_retime", "retime_halfwidth", "retime_max_seconds", "retime_share", "include_jit_trace")
# Per-invocation settings of `pikeh run` (not part of a run's configuration).
LLM_FAILURE_LIMIT = 10  # consecutive failed queries (retries spent) before the run stops
EXIT_LLM_ERRORS = 3  # exit status of a run that completed while some queries ended as llm_error


@dataclass
class RunConfig:
    """Everything that defines a run. All but OPERATIONAL_OPTIONS must match when a run is resumed."""

    strategy: str
    suite: str
    llm: str
    tasks: str | None = None
    fix_llm: str | None = None
    query_budget: int = 300
    money_budget: float | None = None
    evaluator: str = "local"
    device: str = "auto"
    protocol: str = "robust"
    protocol_params: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    temperature: float | None = 0.8
    max_tokens: int = 32_000
    reasoning_effort: str | None = None
    timeout_s: float | None = None
    strategy_options: dict[str, Any] = field(default_factory=dict)
    llm_base_url: str | None = None
    llm_concurrency: int = 10
    llm_cache: str | None = None
    replay_dir: str | None = None
    evaluator_options: dict[str, Any] = field(default_factory=dict)
    precision_rule: str | None = None  # --precision-rule: overrides every task's suite rule when set
    # Each task's final best timed paired against its eager reference when its search ends
    # (host/final_timing.py): until the 95% interval is within +-retime_halfwidth, or retime_max_seconds,
    # or retime_share of the task's search time (so that re-timing never dominates a short run).
    final_retime: bool = True
    retime_halfwidth: float = 0.02
    retime_max_seconds: float = 60.0
    retime_share: float = 0.10
    include_jit_trace: bool = False  # PIKE's rule by default: torch.jit.trace code never wins (final_best.py)

    @classmethod
    def build(cls, core: dict[str, Any], strategy_values: dict[str, Any], evaluator_values: dict[str, Any],
              strategy_cls: type[Strategy]) -> RunConfig:
        """From parsed values: ``core`` holds the run's own options (None = the default), and
        ``evaluator_values`` is what ``pop_evaluator_values`` returns (evaluator, device, protocol,
        timeout, workdir and the plugin's own options under ``own``)."""
        strategy_config = strategy_cls.make_config(strategy_values)
        extra = {k: (str(v) if isinstance(v, Path) else v)
                 for k, v in (evaluator_values.get("own") or {}).items() if v is not None}
        if evaluator_values.get("workdir"):
            extra["workdir"] = str(evaluator_values["workdir"])
        given: dict[str, Any] = {
            **{name: core.get(name) for name in (
                "strategy", "suite", "llm", "tasks", "fix_llm", "query_budget", "money_budget", "seed",
                "temperature", "max_tokens", "reasoning_effort", "llm_base_url", "llm_concurrency",
                "precision_rule", "final_retime", "retime_halfwidth", "retime_max_seconds", "retime_share",
                "include_jit_trace")},
            "evaluator": evaluator_values.get("evaluator"), "device": evaluator_values.get("device"),
            "protocol": evaluator_values.get("protocol"), "timeout_s": evaluator_values.get("timeout"),
            "llm_cache": str(core["llm_cache"]) if core.get("llm_cache") else None,
            "replay_dir": str(core["replay_dir"]) if core.get("replay_dir") else None,
        }
        config = cls(**{k: v for k, v in given.items() if v is not None},
                     strategy_options=dataclasses.asdict(strategy_config), evaluator_options=extra)
        config.check_finite()
        return config

    def check_finite(self) -> None:
        """Refuse ``nan`` and ``inf`` anywhere in the configuration (the CLI's option types refuse them
        first; this catches a library caller). NaN passes every range check and disables a budget
        (``spent >= nan`` is never true), and run.json cannot hold it as JSON."""
        def walk(value: Any, name: str) -> None:
            if isinstance(value, float) and not math.isfinite(value):
                raise UserError(f"{name}: {value!r} is not a finite number")
            if isinstance(value, dict):
                for key, inner in value.items():
                    walk(inner, f"{name}.{key}")
            elif isinstance(value, (list, tuple)):
                for inner in value:
                    walk(inner, name)

        for spec in dataclasses.fields(self):
            walk(getattr(self, spec.name), spec.name)

    def identity(self) -> dict[str, Any]:
        """The configuration that must match on resume."""
        data = dataclasses.asdict(self)
        for name in OPERATIONAL_OPTIONS:
            data.pop(name, None)
        if data.get("precision_rule") is None:
            data.pop("precision_rule", None)  # unset: runs named before the option existed keep their names
        return data

    def default_run_name(self) -> str:
        """Deterministic, so re-running the same command resumes the same run; the hash of the whole
        configuration makes runs that differ in any option (a preset, a fix model) distinct runs."""
        digest = sha256(json.dumps(self.identity(), sort_keys=True, default=str))[:8]
        parts = [self.strategy, self.suite]
        if self.tasks:
            parts.append(f"t{self.tasks}")
        parts += [self.llm, f"q{self.query_budget}", f"s{self.seed}", digest]
        return safe_name("_".join(parts).replace(":", "-").replace("/", "-"), limit=140)

    def generation_params(self) -> GenerationParams:
        return GenerationParams(temperature=self.temperature, max_tokens=self.max_tokens,
                                reasoning_effort=self.reasoning_effort)


def default(name: str) -> Any:
    """A RunConfig field's default: what a command shows and uses when the option is not given."""
    spec = RunConfig.__dataclass_fields__[name]
    if spec.default is not dataclasses.MISSING:
        return spec.default
    raise KeyError(f"RunConfig.{name} has no plain default")
