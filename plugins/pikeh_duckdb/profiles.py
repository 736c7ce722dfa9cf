"""``pikeh report --profile-best N``: each task's N fastest correct candidates run under torch.profiler.

Each is evaluated again with ``EvalRequest.profile`` (the same sandbox, checks and timing as in the
search, then a few profiled calls: worker/inside/profiling.py) by the evaluator the report's
``--evaluator``/``--device`` options describe. Profiles go to ``profiles.jsonl`` in the report folder
(never into run directories) and are reused by later reports while the code hash matches. The HTML report
shows, per task, each profiled candidate's launches per call, time by origin (custom, PyTorch, library,
memory), host-side gaps and its top kernels.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pike_harness.api import ReportServices, read_journal, sha256

from .metrics import rows

PROFILE_FILE = "profiles.jsonl"
TOP_SHOWN = 5


def candidates(con: Any, n: int) -> list[dict[str, Any]]:
    """The ``n`` fastest correct attempts of every (run, task), with the path of their code."""
    return rows(con, """
        SELECT run, task, key, idx, runtime_ms, code_sha256, dir, path FROM (
            SELECT a.*, r.path, row_number() OVER (PARTITION BY a.run, a.task ORDER BY a.runtime_ms, a.idx) AS rank
            FROM attempts a JOIN runs r USING (run)
            WHERE a.category = 'correct' AND a.runtime_ms > 0)
        WHERE rank <= ? ORDER BY run, task, rank""", [n])


def profile_all(items: list[dict[str, Any]], *, resolve_task: Callable[[str], Any], evaluator: Any,
                done: set[tuple[str, str, str]], progress: Callable[[str], None]) -> list[dict[str, Any]]:
    """Profile every item not yet in ``done`` ((run, task, code hash)); one record each."""
    out = []
    for number, item in enumerate(items, 1):
        try:
            code = (Path(item["path"]) / item["dir"] / "code.py").read_text(encoding="utf-8")
        except OSError:
            progress(f"{item['run']} {item['task']} {item['key']}: code missing; not profiled")
            continue
        sha = sha256(code)
        if (item["run"], item["task"], sha) in done:
            continue
        progress(f"profiling {item['run']} {item['task']} {item['key']} ({number}/{len(items)})")
        task = resolve_task(item["task"])
        result = evaluator.evaluate(task.eval_request(code, profile=True))
        profile = result.profile if result.is_correct else {"error": f"{result.category}: {result.reason}"}
        out.append({"run": item["run"], "task": item["task"], "key": item["key"], "code_sha256": sha,
                    "runtime_ms": result.runtime_ms, "device": (result.environment or {}).get("device"),
                    "profile": profile or {"error": "no profile came back"},
                    "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    return out


def save(path: Path, records: list[dict[str, Any]]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, default=str) + "\n")


def load(path: Path) -> list[dict[str, Any]]:
    return read_journal(path) if path.exists() else []


def run_profiles(con: Any, output: Path, profile_best: int, services: ReportServices,
                 say: Callable[[str], None]) -> list[dict[str, Any]]:
    """Profile the best candidates when ``--profile-best N`` asks; the latest profile of every current
    candidate (earlier reports' profiles included)."""
    path = output / PROFILE_FILE
    n = int(profile_best or 0)
    items = candidates(con, n) if n else []
    known = load(path)
    if items:
        make_evaluator, resolve_task = services.make_evaluator, services.resolve_task
        if make_evaluator is None or resolve_task is None:
            from pike_harness.api import UserError

            raise UserError("--profile-best needs an evaluator and the task suites: run it through `pikeh report`")
        evaluator = make_evaluator()
        try:
            new = profile_all(items, resolve_task=resolve_task, evaluator=evaluator,
                              done={(r["run"], r["task"], r["code_sha256"]) for r in known}, progress=say)
        finally:
            evaluator.close()
        save(path, new)
        known += new
    current = {(r["run"], r["task"], r["code_sha256"]) for r in rows(
        con, "SELECT run, task, code_sha256 FROM attempts WHERE category = 'correct'")}
    latest: dict[tuple[str, str, str], dict[str, Any]] = {}
    for record in known:
        key = (record["run"], record["task"], record["code_sha256"])
        if key in current:
            latest[key] = record
    return sorted(latest.values(), key=lambda r: (r["task"], r["run"], r.get("runtime_ms") or 0))


def section(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Per task: each profiled candidate's summary and its top kernels (operators on a CPU)."""
    if not records:
        return None
    table = []
    for record in records:
        p = record["profile"]
        if p.get("error"):
            table.append([record["task"], record["run"], record["key"], "–", "–", "–", "–", f"failed: {p['error']}"])
            continue
        share = ", ".join(f"{k} {v * 100:.0f}%" for k, v in (p.get("share") or {}).items())
        top = "; ".join(f"{k['name'][:60]} [{k['origin']}] {k['ms_per_call']:.3g} ms x{k['per_call']:g}"
                        for k in (p.get("kernels") or [])[:TOP_SHOWN])
        runtime = f"{record['runtime_ms']:.4g}" if record.get("runtime_ms") is not None else "–"
        table.append([record["task"], record["run"], record["key"], runtime, f"{p['launches_per_call']:g}",
                      share, f"{p['gap_ms_per_call']:.3g}", top])
    return {"id": "profiles", "title": "Profiles of the best candidates",
            "note": "Each candidate evaluated again with a few calls under torch.profiler (pikeh report "
                    "--profile-best N). Launches: kernels (operators on a CPU) per forward call. Time by origin: "
                    "custom (load_inline/Triton), pytorch (ATen), library (cuBLAS/cuDNN/CUTLASS), memory "
                    "(copies); read from kernel names. Gaps: per-call wall time with the device (on a CPU, every "
                    "operator) idle: launch and Python overhead.",
            "columns": ["task", "run", "attempt", "runtime ms", "launches/call", "time by origin", "gaps ms/call",
                        f"top {TOP_SHOWN} (ms per call x launches per call)"],
            "rows": table}
