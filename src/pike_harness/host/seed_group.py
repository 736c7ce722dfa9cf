"""Several seeds of one configuration: ``pikeh run --seeds 0,1,2`` (or ``--repeats N``).

LLM search is noisy, so one run per configuration cannot tell two strategies apart; the report's
confidence intervals need the same configuration run with several seeds. Each seed is an ordinary run
directory (so each resumes on its own, and a crash in one loses nothing of the others), kept together in
a *seed group* folder:

    <output-dir>/<group>/seeds.json          the group: its configuration without the seed, its seeds
    <output-dir>/<group>/<group>_s<seed>/    one run directory per seed (the run's name, unique in reports)

``<group>`` is ``--run-name`` when given, else the default run name without the seed and with the hash
of the configuration *without* its seed (the ``config_key`` reports group by), so re-running the same
command finds the same group and resumes its unfinished seeds. Seeds run one after another; a Ctrl-C
stops the seed being run as any run stops, and the seeds after it are not started.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pike_harness.contracts.journal import safe_name
from pike_harness.errors import UserError
from pike_harness.host import terminal
from pike_harness.host.output_paths import check_output_dir
from pike_harness.host.run_config import RunConfig
from pike_harness.host.run_signals import StopSignals
from pike_harness.host.store import SEED_GROUP_FILE as GROUP_FILE
from pike_harness.host.store import _atomic_write, config_differences

# A run's seed within its group's run name: `<group>_s<seed>`.
SEED_SUFFIX = re.compile(r"_s(\d+)$")
# Worst first: the status a group reports is the worst of its seeds'.
STATUS_ORDER = ("interrupted", "failed", "llm_errors", "complete")


def parse_seeds(text: str) -> list[int]:
    """``0,1,2`` or ``0-4`` or a mix (``0-2,7``) -> distinct seeds in the order given."""
    seeds: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            raise UserError(f"--seeds {text!r}: write seeds as 0,1,2 or a range 0-4")
        low, high = int(match[1]), int(match[2] if match[2] is not None else match[1])
        if high < low:
            raise UserError(f"--seeds {text!r}: the range {part} is empty")
        seeds += [s for s in range(low, high + 1) if s not in seeds]
    return seeds


def chosen_seeds(seeds: str | None, repeats: int | None, first_seed: int) -> list[int] | None:
    """The seeds of a seed group, or None for a single run (neither option given)."""
    if seeds and repeats:
        raise UserError("give --seeds or --repeats, not both")
    if seeds:
        return parse_seeds(seeds)
    if repeats:
        return list(range(first_seed, first_seed + repeats))
    return None


def group_name(config: RunConfig) -> str:
    """The default group folder: the default run name's parts, without the seed, and the hash of the
    configuration without its seed (store_db.config_key, what reports group seeds by)."""
    from pike_harness.host.store_db import config_key

    parts = [config.strategy, config.suite]
    if config.tasks:
        parts.append(f"t{config.tasks}")
    parts += [config.llm, f"q{config.query_budget}", config_key(config.identity())[:8]]
    return safe_name("_".join(parts).replace(":", "-").replace("/", "-"), limit=120)


def seed_run_name(group: str, seed: int) -> str:
    return f"{group}_s{seed}"


def _record_group(folder: Path, config: RunConfig, seeds: list[int]) -> None:
    """Write (or extend) seeds.json; a group holds one configuration, so another one is refused."""
    identity = {k: v for k, v in config.identity().items() if k != "seed"}
    path = folder / GROUP_FILE
    known: list[int] = []
    if path.exists():
        try:
            stored = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise UserError(f"{path} cannot be read ({exc}); move it away to start the group again") from None
        if stored.get("config") != identity:
            changed = "; ".join(config_differences(stored.get("config") or {}, identity))
            raise UserError(f"seed group {folder} holds another configuration ({changed}); "
                            "choose another --run-name or --output-dir")
        known = [int(s) for s in stored.get("seeds") or []]
    folder.mkdir(parents=True, exist_ok=True)
    _atomic_write(path, json.dumps({"config": identity, "seeds": known + [s for s in seeds if s not in known],
                                    "runs": {str(s): seed_run_name(folder.name, s)
                                             for s in known + [s for s in seeds if s not in known]}},
                                   indent=2, sort_keys=True))


def launch_seeds(app: Any, core: dict[str, Any], strategy_values: dict[str, Any],
                 evaluator_values: dict[str, Any], seeds: list[int], *, console: Any = None,
                 live: bool | None = None) -> str:
    """Run (or resume) one run per seed, in order; returns the worst status ("interrupted" stops early)."""

    from pike_harness.host.launch import launch_run

    console = console or terminal.console(stderr=True)
    strategy_cls = app.host().get("strategies", core["strategy"])
    config = RunConfig.build({**core, "seed": seeds[0]}, strategy_values, evaluator_values, strategy_cls)
    group = core.get("run_name") or group_name(config)
    output_dir = Path(core.get("output_dir") or "runs")
    check_output_dir(output_dir, "--output-dir")
    folder = output_dir / group
    _record_group(folder, config, seeds)
    console.print(f"seed group: {folder} (seeds {', '.join(map(str, seeds))})")
    statuses: list[str] = []
    # Counts every Ctrl-C/SIGTERM, between runs and (forwarded by the run's own handler) during one, so a
    # stop that lands as a seed finishes still stops the group.
    with StopSignals() as stops:
        for number, seed in enumerate(seeds, 1):
            console.print(f"[bold]seed {seed}[/bold] ({number}/{len(seeds)})")
            status = launch_run(app, {**core, "seed": seed, "run_name": seed_run_name(group, seed),
                                      "output_dir": folder}, strategy_values, evaluator_values,
                                console=console, live=live)
            statuses.append(status)
            if status == "interrupted" or stops.requested:
                left = seeds[number - 1 if status == "interrupted" else number:]
                statuses.append("interrupted")
                if left:
                    console.print(f"[yellow]stopped[/yellow]: seed(s) {', '.join(map(str, left))} unfinished; "
                                  "rerun the same command to resume them")
                break
    return min(statuses, key=STATUS_ORDER.index)
