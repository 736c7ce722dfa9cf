"""`pikeh report --retime`: each task's final best timed again now, paired against its eager reference.

The best of hundreds of noisy measurements is biased upward (the winner is partly the luckiest timing),
and a search may span hours of a drifting host. ``pikeh run`` therefore re-times each task's final best
when its search ends (host/final_timing.py); ``--retime`` does the same from the report, for runs made
with ``--no-final-retime``, runs whose best changed under another final-best rule, or a second opinion
on another machine. Each finalist is one request with ``EvalRequest.paired``: the evaluator times it and
the reference in alternating blocks until the speedup's 95% interval is narrow enough, and returns the
``PairedTiming`` (speedup, interval, pairs, stop reason, noise). The report uses the PairedTiming's own
numbers, for these rows and the run's own ``final_timing`` events alike (one table, ``final_timings``).

Rows are appended to ``retime.jsonl`` in the report folder (never into run directories) and reused by
later reports as long as the finalist's code hash is still the task's best.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pike_harness.api import PairedSpec, final_timing_row, read_journal, sha256, unpaired_reason

RETIME_FILE = "retime.jsonl"
SOURCE = "report"  # the rows' ``source`` in final_timings (the run's own are "run")


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


def retime(items: list[Finalist], *, resolve_task: Callable[[str], Any], evaluator: Any, spec: PairedSpec,
           protocol: str, protocol_params: dict[str, Any] | None = None,
           progress: Callable[[str], None] = lambda _: None) -> list[dict[str, Any]]:
    """One paired request per finalist; one ``final_timings`` row each (with ``why`` when it has no pairing)."""
    rows = []
    for number, item in enumerate(items, 1):
        task = resolve_task(item.task)
        progress(f"re-timing {item.run} {item.task} ({number}/{len(items)}), paired against its eager reference")
        result = evaluator.evaluate(task.eval_request(item.code, protocol=protocol,
                                                      protocol_params=dict(protocol_params or {}), paired=spec))
        why = None if result.paired is not None else unpaired_reason(result)
        if why:
            progress(f"{item.run} {item.task}: no paired timing ({why}); the report keeps its search-time number")
        rows.append(final_timing_row(run=item.run, task=item.task, best_key=item.key, code_sha256=item.code_sha256,
                                     result=result.to_dict(), why=why, time=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                     source=SOURCE))
    return rows


def save(path: Path, rows: list[dict[str, Any]]) -> None:
    """Append to ``retime.jsonl``: earlier re-timings of other runs stay usable."""
    with path.open("a", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")


def load(path: Path) -> list[dict[str, Any]]:
    """The rows of ``retime.jsonl`` (lines of older reports, which held unpaired repeats, are skipped)."""
    return [row for row in read_journal(path) if row.get("source") == SOURCE]


def insert(con: Any, rows: list[dict[str, Any]]) -> int:
    """Add the rows to ``final_timings``; the ``final_paired`` view keeps those whose code hash is still
    each task's best, preferring the newest."""
    columns = [name for name, _ in con.execute("SELECT column_name, data_type FROM information_schema.columns "
                                               "WHERE table_name = 'final_timings' ORDER BY ordinal_position"
                                               ).fetchall()]
    if rows:
        con.executemany(f"INSERT INTO final_timings ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                        [[_cell(row.get(c)) for c in columns] for row in rows])
    return len(rows)


def _cell(value: Any) -> Any:
    """JSON columns take their text."""
    return json.dumps(value) if isinstance(value, dict | list) else value
