"""What the final re-timing adds to a run's wall time, read from a finished run's journal.

A run re-times each task's final best paired against its eager reference when the task's search ends
(docs/run.md, "The final re-timing"). This reads one run directory and prints, per task, how long its
search took (its first journaled event to its ``task_end``), how long its re-timing took (its
``eval_start`` to its ``final_timing``: the candidate's load and checks, the reference's, then the
blocks), the blocks' own seconds and why they stopped; and for the run:

* ``tail``: the run's wall time after its last search ended (``run_end`` minus the last ``task_end``),
  which only re-timings fill: what re-timing certainly added to the wall time;
* ``retime_sum``: the re-timings' durations added up, an upper bound on what they added (those that
  ran while other tasks still searched shared the device with them rather than adding their length).

Both are given as a share of the run's wall time (first ``run_start`` to last ``run_end``). Writes
``retime_share.{json,md}`` to ``--out``.

  python3 benchmarks/retime_share.py RUN_DIR --out OUT
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from pike_harness.host.journal_reading import epoch_of, read_journal  # noqa: E402

FINAL = "final/"


def share_of(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The per-task and whole-run figures of one journal's events (module docstring)."""
    first: dict[str, float] = {}
    ends: dict[str, float] = {}
    retime_start: dict[str, float] = {}
    tasks: dict[str, dict[str, Any]] = {}
    starts = [epoch_of(e.get("time")) for e in events if e.get("type") == "run_start"]
    stops = [epoch_of(e.get("time")) for e in events if e.get("type") == "run_end"]
    for event in events:
        kind, task, when = event.get("type"), event.get("task"), epoch_of(event.get("time"))
        if not task or when is None:
            continue
        first.setdefault(task, when)
        if kind == "task_end":
            ends[task] = when
        elif kind == "eval_start" and str(event.get("key", "")).startswith(FINAL):
            retime_start[task] = when
        elif kind == "final_timing":
            paired = (event.get("result") or {}).get("paired") or {}
            tasks[task] = {"retime_s": when - retime_start.get(task, when), "blocks_s": paired.get("seconds"),
                           "pairs": len(paired.get("pairs") or []), "stop": paired.get("stop"),
                           "speedup": paired.get("speedup"), "why": event.get("why")}
    for task, end in ends.items():
        tasks.setdefault(task, {"retime_s": None})["search_s"] = end - first[task]
    wall = (max(s for s in stops if s) - min(s for s in starts if s)) if any(starts) and any(stops) else None
    tail = (max(s for s in stops if s) - max(ends.values())) if ends and any(stops) else None
    retime_sum = sum(t["retime_s"] or 0.0 for t in tasks.values())
    return {"tasks": dict(sorted(tasks.items())), "wall_s": wall, "tail_s": tail, "retime_sum_s": retime_sum,
            "tail_share": tail / wall if wall and tail is not None else None,
            "retime_sum_share": retime_sum / wall if wall else None,
            "retimed": sum(1 for t in tasks.values() if t.get("retime_s") is not None)}


def markdown(figures: dict[str, Any], run: Path) -> str:
    def num(value: Any, digits: int = 1) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    lines = [f"## The final re-timing's share of a run's wall time ({run.name})", "",
             f"Run wall time {num(figures['wall_s'])} s; {figures['retimed']} task(s) re-timed.", "",
             "| measure | seconds | share of the wall time |", "|---|---|---|",
             f"| after the last search ended (what re-timing certainly added) | {num(figures['tail_s'])} | "
             f"{num((figures['tail_share'] or 0) * 100)} % |",
             f"| re-timings added up (an upper bound) | {num(figures['retime_sum_s'])} | "
             f"{num((figures['retime_sum_share'] or 0) * 100)} % |", "",
             "| task | search s | re-timing s | blocks s | pairs | stop | speedup |", "|---|---|---|---|---|---|---|"]
    for task, row in figures["tasks"].items():
        lines.append(f"| {task} | {num(row.get('search_s'))} | {num(row.get('retime_s'))} | {num(row.get('blocks_s'))} | "
                     f"{row.get('pairs', '-')} | {row.get('stop') or row.get('why') or '-'} | {num(row.get('speedup'), 3)} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="A run directory (the folder holding journal.jsonl).")
    parser.add_argument("--out", type=Path, default=None, help="Folder for retime_share.{json,md}.")
    args = parser.parse_args()
    journal = args.run / "journal.jsonl"
    if not journal.is_file():
        parser.error(f"{args.run} holds no journal.jsonl: give a run directory")
    figures = share_of(read_journal(journal))
    text = markdown(figures, args.run)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "retime_share.json").write_text(json.dumps(figures, indent=1) + "\n")
        (args.out / "retime_share.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
