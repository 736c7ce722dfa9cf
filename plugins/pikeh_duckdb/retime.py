"""Finalist re-timing: each task's best solution timed side by side with its eager reference.

The best of hundreds of noisy measurements is biased upward (the winner is partly the luckiest timing),
and a search may span hours of drifting clocks. So before a headline number is printed, each finalist
and its reference are evaluated again, alternately (B, C, B, C, ... one evaluation at a time, on the
same evaluator and device; a pair whose two sides ran on different devices is dropped), and the speedup is the geometric mean of the paired ratios with a Student-t interval
(``retime_ci`` in metrics.py). Pairing adjacent measurements cancels slow drift.

Why K separate evaluations and not a bootstrap over the calls of one long timing: the evaluator
returns each timing's summary (``RuntimeStats``: median, mean, cv, n), not its calls; and calls within
one timing share a process, a compiled kernel, an allocator state and a clock state, so they are
correlated and their spread understates what moves a number from one evaluation to the next, which is
the noise that makes the best of many evaluations look better than it is. Each pair's ratio is one
independent observation; the interval is over those K. Each timing's own cv is kept
(``baseline_cv``, ``candidate_cv``) so the report can show both spreads side by side.

Results are written to ``retime.jsonl`` in the report folder (never into run directories) and reused by
later reports as long as the finalist's code hash still matches.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pike_harness.api import read_journal, sha256

RETIME_FILE = "retime.jsonl"
COLUMNS = ("run", "task", "key", "code_sha256", "rep", "baseline_ms", "candidate_ms", "baseline_category",
           "candidate_category", "device", "protocol", "time", "baseline_cv", "candidate_cv")


@dataclass
class Finalist:
    run: str
    task: str
    key: str
    code: str
    code_sha256: str


def finalists(best_rows: Iterable[dict[str, Any]], warn: Callable[[str], None]) -> list[Finalist]:
    """The best correct attempt of every task with a baseline, read from its run directory."""
    out = []
    for row in best_rows:
        path = Path(row["path"]) / row["best_dir"] / "code.py"
        try:
            code = path.read_text(encoding="utf-8")
        except OSError:
            warn(f"{row['run']} {row['task']}: best attempt's code is missing ({path}); not re-timed")
            continue
        sha = sha256(code)  # as the run journal hashes it
        if row.get("best_sha256") and row["best_sha256"] != sha:
            warn(f"{row['run']} {row['task']}: {path} does not match the journal's code hash; not re-timed")
            continue
        out.append(Finalist(row["run"], row["task"], row["best_key"], code, sha))
    return out


def retime(items: list[Finalist], *, resolve_task: Callable[[str], Any], evaluator: Any, repeats: int,
           protocol: str, protocol_params: dict[str, Any] | None = None, device: str = "auto",
           progress: Callable[[str], None] = lambda _: None) -> list[dict[str, Any]]:
    """Evaluate reference and candidate alternately ``repeats`` times each; one row per pair."""
    rows = []
    overrides: dict[str, Any] = {"protocol": protocol, "protocol_params": dict(protocol_params or {})}
    for number, item in enumerate(items, 1):
        task = resolve_task(item.task)
        progress(f"re-timing {item.run} {item.task} ({number}/{len(items)}), {repeats} pairs")
        pinned: dict[str, Any] = {}
        for rep in range(repeats):
            base = evaluator.evaluate(task.eval_request(task.source, **overrides, **pinned))
            # Every later request of this finalist names the device the first reference ran on: an
            # evaluator with several GPUs would otherwise time the two sides of a pair on different ones.
            pinned = pinned or ({"device": _place(base)[1]} if _place(base)[1] else {})
            cand = evaluator.evaluate(task.eval_request(item.code, **overrides, **pinned))
            if _place(base) != _place(cand):
                progress(f"{item.run} {item.task}: pair {rep} ran on {_place(base)} and {_place(cand)}; dropped")
                continue
            rows.append({
                "run": item.run, "task": item.task, "key": item.key, "code_sha256": item.code_sha256, "rep": rep,
                "baseline_ms": base.runtime_ms, "candidate_ms": cand.runtime_ms,
                "baseline_category": base.category, "candidate_category": cand.category,
                "device": _place(cand)[1] or device, "protocol": protocol,
                "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                # The spread of the calls within one timing, kept beside the spread between timings.
                "baseline_cv": _cv(base), "candidate_cv": _cv(cand),
            })
    return rows


def _cv(result: Any) -> float | None:
    stats = getattr(result, "runtime", None)
    return getattr(stats, "cv", None)


def _place(result: Any) -> tuple[str | None, str | None]:
    """Where an evaluation ran: (host, device), from the environment the worker reports."""
    environment = result.environment or {}
    return environment.get("host"), environment.get("device")


def save(path: Path, rows: list[dict[str, Any]]) -> None:
    """Append to ``retime.jsonl``: earlier re-timings of other runs stay usable."""
    with path.open("a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps({c: row.get(c) for c in COLUMNS}) + "\n")


def load(path: Path) -> list[dict[str, Any]]:
    return read_journal(path)


def insert(con: Any, rows: list[dict[str, Any]], current: dict[tuple[str, str], str]) -> int:
    """Load rows whose code hash is still each task's best (``current``: (run, task) -> sha); the latest
    sitting of a finalist replaces earlier ones."""
    kept = [row for row in rows if current.get((row["run"], row["task"])) == row.get("code_sha256")]
    # A sitting starts at rep 0; only the newest sitting of each finalist counts.
    sittings: dict[tuple[str, str], list[list[dict[str, Any]]]] = {}
    for row in kept:
        groups = sittings.setdefault((row["run"], row["task"]), [])
        if not groups or row["rep"] == 0:
            groups.append([])
        groups[-1].append(row)
    final = [row for groups in sittings.values() for row in groups[-1]]
    con.execute("DELETE FROM retimes")
    if final:
        con.executemany(f"INSERT INTO retimes VALUES ({', '.join('?' * len(COLUMNS))})",
                        [[row.get(c) for c in COLUMNS] for row in final])
    return len(final)
