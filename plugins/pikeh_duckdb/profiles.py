"""``pikeh report --profile-best N``: each task's N fastest correct candidates run under torch.profiler.

Each is evaluated again with ``EvalRequest.profile`` (the same sandbox, checks and timing as in the
search, then a few profiled calls: worker/inside/profiling.py) by the evaluator the report's
``--evaluator``/``--device`` options describe. Profiles go to ``profiles.jsonl`` in the report folder
(never into run directories) and are reused by later reports while the code hash matches. The HTML report
shows, per task, each profiled candidate's launches per call, time by origin (custom, PyTorch, library,
memory), host-side gaps and its top kernels.

A profile comes from the candidate's process, which may be hostile, and its record stays in
``profiles.jsonl`` for every later report in that folder: a record whose fields are not what the
profiler writes is shown as a "malformed profile" row (its texts escaped), and one without a run, task
and code hash of text is left out with a warning. Neither stops the report.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pike_harness.api import ReportServices, printable, read_journal, sha256

from .metrics import rows

PROFILE_FILE = "profiles.jsonl"
TOP_SHOWN = 5
MALFORMED = "malformed profile"
SHOWN_CHARS = 300  # the longest text of a record shown in a cell (an error, a name)
MAX_ORIGINS = 8  # the profiler's share has at most 4 origins (custom, pytorch, library, memory)


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
    unusable = [r for r in known if identity(r) is None]
    if unusable:
        say(f"warning: {path}: {len(unusable)} profile record(s) without a run, task and code hash; left out")
        known = [r for r in known if identity(r) is not None]
    if items:
        make_evaluator, resolve_task = services.make_evaluator, services.resolve_task
        if make_evaluator is None or resolve_task is None:
            from pike_harness.api import UserError

            raise UserError("--profile-best needs an evaluator and the task suites: run it through `pikeh report`")
        evaluator = make_evaluator()
        try:
            new = profile_all(items, resolve_task=resolve_task, evaluator=evaluator,
                              done={key for r in known if (key := identity(r)) is not None}, progress=say)
        finally:
            evaluator.close()
        save(path, new)
        known += new
    current = {(r["run"], r["task"], r["code_sha256"]) for r in rows(
        con, "SELECT run, task, code_sha256 FROM attempts WHERE category = 'correct'")}
    latest: dict[tuple[str, str, str], dict[str, Any]] = {}
    for record in known:
        key = identity(record)
        if key is not None and key in current:
            latest[key] = record
    return sorted(latest.values(), key=lambda r: (r["task"], r["run"], _number(r.get("runtime_ms")) or 0))


def identity(record: dict[str, Any]) -> tuple[str, str, str] | None:
    """The (run, task, code hash) a record profiles, or None when one of them is not text (a record
    written by hand or damaged: it matches no candidate)."""
    run, task, sha = record.get("run"), record.get("task"), record.get("code_sha256")
    return (run, task, sha) if isinstance(run, str) and isinstance(task, str) and isinstance(sha, str) else None


def section(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Per task: each profiled candidate's summary and its top kernels (operators on a CPU)."""
    if not records:
        return None
    table = [_row(record) for record in records]
    return {"id": "profiles", "title": "Profiles of the best candidates",
            "note": "Each candidate evaluated again with a few calls under torch.profiler (pikeh report "
                    "--profile-best N). Launches: kernels (operators on a CPU) per forward call. Time by origin: "
                    "custom (load_inline/Triton), pytorch (ATen), library (cuBLAS/cuDNN/CUTLASS), memory "
                    "(copies); read from kernel names. Gaps: per-call wall time with the device (on a CPU, every "
                    "operator) idle: launch and Python overhead.",
            "columns": ["task", "run", "attempt", "runtime ms", "launches/call", "time by origin", "gaps ms/call",
                        f"top {TOP_SHOWN} (ms per call x launches per call)"],
            "rows": table}


def _row(record: dict[str, Any]) -> list[str]:
    """A record's table row; a profile that is not what the profiler writes is ``MALFORMED``."""
    head = [_shown(record.get(field)) for field in ("task", "run", "key")]
    p = record.get("profile")
    if isinstance(p, dict) and p.get("error"):
        return [*head, "–", "–", "–", "–", f"failed: {_shown(p['error'])}"]
    runtime = _number(record.get("runtime_ms"))
    summary = _summary(p)
    if summary is None:
        return [*head, "–", "–", "–", "–", MALFORMED]
    return [*head, f"{runtime:.4g}" if runtime is not None else "–", *summary]


def _summary(p: Any) -> list[str] | None:
    """Launches per call, time by origin, gaps per call and the top kernels, formatted; None when a field
    is missing or of another kind than the profiler writes (worker/inside/profiling.py)."""
    if not isinstance(p, dict):
        return None
    launches, gaps = _number(p.get("launches_per_call")), _number(p.get("gap_ms_per_call"))
    share, kernels = p.get("share") or {}, p.get("kernels") or []
    if launches is None or gaps is None or not isinstance(share, dict) or not isinstance(kernels, list):
        return None
    if len(share) > MAX_ORIGINS or not all(isinstance(origin, str) and _number(value) is not None
                                           for origin, value in share.items()):
        return None
    top = kernels[:TOP_SHOWN]
    if not all(isinstance(k, dict) and isinstance(k.get("name"), str) and isinstance(k.get("origin"), str)
               and _number(k.get("ms_per_call")) is not None and _number(k.get("per_call")) is not None for k in top):
        return None
    shares = ", ".join(f"{_shown(origin)} {value * 100:.0f}%" for origin, value in share.items())
    kernel_text = "; ".join(f"{_shown(k['name'][:60])} [{_shown(k['origin'])}] {k['ms_per_call']:.3g} ms "
                            f"x{k['per_call']:g}" for k in top)
    return [f"{launches:g}", shares, f"{gaps:.3g}", kernel_text]


def _number(value: Any) -> float | None:
    """``value`` when it is a number (not a bool) a float holds, else None."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        return float(value)
    except OverflowError:  # an integer of hundreds of digits
        return None


def _shown(value: Any) -> str:
    """A record's text for a cell: control characters escaped (the page escapes HTML), cut."""
    try:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
    except (ValueError, RecursionError):
        text = "(not shown)"
    text = printable(text)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + " ..."
