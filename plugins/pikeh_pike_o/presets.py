"""PIKE-O's named presets: the paper's default configuration and its ablation chain.

The PIKE paper ablates PIKE-O one change at a time, each step keeping the previous ones:
``mut`` (mutation template), ``npar`` (one evaluation at a time), ``1isl`` (one island), ``EO``
(exploitation only), ``SL`` (small archive). A preset is a chain prefix such as ``mut,npar,1isl``;
every preset also exists without error fixing (``,noEFA`` appended; ``pike-o,noEFA`` for the
default). Presets only supply defaults: any field given on the command line or in run.toml wins.
"""

from __future__ import annotations

from typing import Any

DEFAULT_PRESET = "pike-o"
NO_EFA = "noEFA"

# The PIKE paper's "PIKE-O" configuration. max_iterations, temperature, max_tokens
# and the seed are run options of the host (--query-budget, --temperature, --max-tokens, --seed).
PAPER_DEFAULTS: dict[str, Any] = {
    "template": "crossover",
    "num_top_programs": 3,
    "num_inspirations": 3,
    "num_diverse_programs": 2,
    "population_size": 25,
    "archive_size": 12,
    "exclude_reference": True,
    "num_islands": 3,
    "elite_selection_ratio": 0.2,
    "exploration_ratio": 0.2,
    "exploitation_ratio": 0.7,
    "parallel_evaluations": 20,
    "migration_interval": 50,
    "migration_rate": 0.1,
    "feature_bins": 10,
    "max_fix_attempts": 5,
    "log_tail_chars": 20_000,  # OpenEvolve's artifact limit: 20 KB per key
}

# The ablation chain, in the paper's order: (flag, the fields it changes, what it means).
ABLATIONS: tuple[tuple[str, dict[str, Any], str], ...] = (
    ("mut", {"template": "mutation"}, "mutation template (reference + current program only)"),
    ("npar", {"parallel_evaluations": 1}, "one evaluation at a time"),
    ("1isl", {"num_islands": 1}, "one island"),
    ("EO", {"exploitation_ratio": 1.0, "exploration_ratio": 0.0}, "exploitation only"),
    ("SL", {"archive_size": 4}, "small archive (4)"),
)
NO_EFA_CHANGES: dict[str, Any] = {"max_fix_attempts": 0}


def _build() -> dict[str, dict[str, Any]]:
    presets: dict[str, dict[str, Any]] = {DEFAULT_PRESET: dict(PAPER_DEFAULTS)}
    values = dict(PAPER_DEFAULTS)
    flags: list[str] = []
    for flag, changes, _ in ABLATIONS:
        flags.append(flag)
        values = {**values, **changes}
        presets[",".join(flags)] = dict(values)
    for name, preset in list(presets.items()):
        presets[f"{name},{NO_EFA}"] = {**preset, **NO_EFA_CHANGES}
    return presets


PRESETS: dict[str, dict[str, Any]] = _build()
_BY_FOLDED = {name.lower(): name for name in PRESETS}


def preset_names() -> list[str]:
    return list(PRESETS)


def canonical_name(name: str) -> str | None:
    """The preset's canonical spelling (``mut,npar,1isl,EO``), ignoring case and spaces; None if unknown.

    ``noEFA`` alone means ``pike-o,noEFA``."""
    folded = ",".join(part.strip() for part in name.split(",")).lower()
    if folded == NO_EFA.lower():
        folded = f"{DEFAULT_PRESET},{NO_EFA}".lower()
    return _BY_FOLDED.get(folded)


def preset_values(name: str) -> dict[str, Any]:
    canonical = canonical_name(name)
    if canonical is None:
        raise KeyError(name)
    return dict(PRESETS[canonical])


def describe(field: str) -> str:
    """Which presets change ``field``, for option help: ``pike-o: 20; npar and later: 1``."""
    parts = [f"{DEFAULT_PRESET}: {_show(PAPER_DEFAULTS[field])}"]
    for flag, changes, _ in ABLATIONS:
        if field in changes:
            parts.append(f"{flag} and later: {_show(changes[field])}")
    if field in NO_EFA_CHANGES:
        parts.append(f"{NO_EFA}: {_show(NO_EFA_CHANGES[field])}")
    return "; ".join(parts)


def _show(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
