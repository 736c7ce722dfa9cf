"""Tables of the report: long CSV files for analysis and PIKE's per-task table (CSV and LaTeX).

The per-task table has one row per task and one column per run (clamped speedup at the full budget:
the paired re-timed speedup where there is one, else the search-time one), then one column per
reference baseline, and a final geomean row that equals each run's suite score. The HTML page adds,
under each run's number, its 95% interval or "search-time" (``matrix_notes``).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def write_csv(path: Path, rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> Path:
    """One CSV file; ``columns`` fixes the order (default: the first row's keys)."""
    columns = list(columns or (rows[0].keys() if rows else []))
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([_cell(c) for c in columns])
        for row in rows:
            writer.writerow([_cell(row.get(c)) for c in columns])
    return path


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet reads as the start of a formula


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list | tuple):
        value = ";".join(str(v) for v in value)
    if isinstance(value, str):
        return _as_text(value)
    return "" if value is None else value


def _as_text(text: str) -> str:
    """A string cell a spreadsheet shows rather than runs: one that starts like a formula (a run name,
    or a remote worker's stop reason, ``=HYPERLINK(...)``) gets a leading apostrophe. A number written
    as text ("-1.5") stays as it is."""
    if not text.startswith(FORMULA_STARTS):
        return text
    try:
        float(text)
    except ValueError:
        return "'" + text
    return text


def per_task_matrix(final: Sequence[dict[str, Any]], reference_tasks: Sequence[dict[str, Any]],
                    runs: Sequence[str], references: Sequence[dict[str, Any]],
                    summary: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[Any]]]:
    """Header and rows of the per-task table, with the geomean row last.

    Values are clamped speedups (None where the run has no baseline for the task). The geomean row
    repeats the suite score computed in SQL, so the table and the figures can never disagree.
    """
    ref_labels = [r["label"] for r in references]
    tasks: dict[str, dict[str, Any]] = {}
    for row in final:
        tasks.setdefault(row["task"], {"task": row["task"], "name": row["name"], "task_id": row["task_id"]})
        tasks[row["task"]][row["run"]] = row["speedup"]
    for row in reference_tasks:
        label = f"{row['source']} {row['mode']}"
        if row["task"] in tasks and label in ref_labels:
            raw = row["speedup_raw"]
            tasks[row["task"]][label] = max(1.0, raw) if raw is not None else 1.0
    header = ["task", "name", *runs, *ref_labels]
    body = []
    for entry in sorted(tasks.values(), key=lambda t: (t["task"].rpartition("/")[0], t["task_id"] or 0)):
        body.append([entry["task"], entry["name"], *(entry.get(c) for c in [*runs, *ref_labels])])
    scores = {r["run"]: r.get("score") for r in summary}
    ref_scores = {r["label"]: r["score"] for r in references}
    body.append(["geomean", "", *(scores.get(r) for r in runs), *(ref_scores.get(r) for r in ref_labels)])
    return header, body


def matrix_notes(final: Sequence[dict[str, Any]], header: Sequence[str],
                 body: Sequence[Sequence[Any]]) -> list[list[str | None]]:
    """For each cell of the per-task table, how its number was measured: the 95% interval of a paired
    re-timed speedup ("95% CI 2.41-2.55", "flagged" when it is), "search-time" otherwise, None where
    there is no run value. Shaped like ``body`` (the geomean row has none)."""
    by_cell = {(row["task"], row["run"]): row for row in final}
    notes: list[list[str | None]] = []
    for line in body[:-1]:
        cells: list[str | None] = [None, None]
        for column in header[2:]:
            row = by_cell.get((line[0], column))
            if row is None or row.get("speedup") is None:
                cells.append(None)
            elif row.get("timing") == "re-timed":
                flag = ", flagged" if row.get("paired_flagged") else ""
                cells.append(f"95% CI {row['ci_low']:.2f}-{row['ci_high']:.2f}{flag}")
            else:
                cells.append("search-time" + (", flagged" if row.get("best_noisy") else ""))
        notes.append(cells)
    notes.append([None] * len(header))
    return notes


def write_matrix_csv(path: Path, header: Sequence[str], body: Sequence[Sequence[Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([_cell(c) for c in header])  # run names head the columns
        for row in body:
            writer.writerow([_cell(v) for v in row])
    return path


def latex_escape(text: str) -> str:
    replacements = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_",
                    "{": r"\{", "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
    return "".join(replacements.get(ch, ch) for ch in str(text))


def write_matrix_latex(path: Path, header: Sequence[str], body: Sequence[Sequence[Any]],
                       caption: str = "Speedup over PyTorch eager per task (clamped at 1).") -> Path:
    """A booktabs table; the best value of each row is bold, the geomean row is set off by a rule."""
    value_columns = len(header) - 2
    lines = [r"\begin{table}[t]", r"\centering", r"\small",
             r"\begin{tabular}{l" + "r" * value_columns + "}", r"\toprule",
             " & ".join(["Task", *(latex_escape(h) for h in header[2:])]) + r" \\", r"\midrule"]
    for i, row in enumerate(body):
        values = list(row[2:])
        finite = [v for v in values if isinstance(v, int | float) and math.isfinite(v)]
        best = max(finite) if finite else None
        cells = []
        for v in values:
            if not isinstance(v, int | float):
                cells.append("--")
                continue
            text = f"{v:.2f}"
            cells.append(rf"\textbf{{{text}}}" if best is not None and v == best and len(finite) > 1 else text)
        label = row[1] or row[0]
        if i == len(body) - 1:
            lines.append(r"\midrule")
            label = "Geomean"
        lines.append(" & ".join([latex_escape(label), *cells]) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{latex_escape(caption)}}}", r"\end{table}", ""]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
