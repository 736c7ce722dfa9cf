"""The run journal's events, in one place: what every writer appends and every reader expects.

``journal.jsonl`` is the single source of truth of a run (see docs/run-layout.md). Each event type is a
dataclass here; the run loop, ``pikeh baselines`` and the PIKE importer append these objects through
``RunStore.append``, and the resume (``Replay``), the database loader (``store_db``) and the replay
backend read the lines back with ``scan_journal``/``read_journal``. ``attempt_dir`` is the one rule for
where an attempt's human-readable mirror lives, used both to write it and to point at it from reports.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar


def safe_name(text: str, limit: int = 80) -> str:
    """A file-system-safe rendering of a key or run name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:limit] or "_"


def task_dir(task_ref: str) -> PurePosixPath:
    """A task's folder relative to its run directory."""
    suite, _, task_id = task_ref.rpartition("/")
    return PurePosixPath("tasks", safe_name(suite), safe_name(task_id))


def attempt_dir(task_ref: str, key: str, index: int | None) -> PurePosixPath:
    """An attempt's mirror folder (prompt.md, response.md, code.py, result.json) relative to the run."""
    if key.startswith("baseline/"):  # the run's own reference timings sit beside the attempts
        return task_dir(task_ref) / safe_name(key)
    prefix = f"{index:04d}" if index is not None else "free"
    return task_dir(task_ref) / "attempts" / f"{prefix}_{safe_name(key)}"


def within_budget(index: int | None, query_budget: int) -> bool:
    """The one rule for which attempts compete for "best": counted queries numbered 1..budget, as the
    report's metrics count them (docs/report.md). Uncounted queries never compete, and attempts past the
    budget (a strategy's permitted overshoot) are shown as such but never chosen as the best."""
    return index is not None and 1 <= index <= query_budget


# -- events -------------------------------------------------------------------------------------------
@dataclass
class Event:
    """One journal line. ``type`` names the line; the fields are the rest of it."""

    type: ClassVar[str] = ""

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, **dataclasses.asdict(self)}


@dataclass
class RunStart(Event):
    type: ClassVar[str] = "run_start"
    pid: int
    resume: int
    environment: dict[str, Any]


@dataclass
class RunEnd(Event):
    """``status``: complete, interrupted or failed; ``why`` says what stopped a run that did not complete."""

    type: ClassVar[str] = "run_end"
    status: str
    why: str | None = None


@dataclass
class LLMAnswer(Event):
    type: ClassVar[str] = "llm"
    task: str
    key: str
    role: str
    index: int | None
    counted: bool
    request_sha256: str | None
    response: dict[str, Any]


@dataclass
class LLMFailure(Event):
    """A query that got no answer after the client's retries (charged: it was asked)."""

    type: ClassVar[str] = "llm_error"
    task: str
    key: str
    role: str
    index: int | None
    counted: bool
    error: str
    status: int | None
    retries: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class EvalStart(Event):
    type: ClassVar[str] = "eval_start"
    task: str
    key: str


@dataclass
class EvalAbort(Event):
    """An evaluation the run stopped (Ctrl-C, SIGTERM, an evaluator failure): not the candidate's doing."""

    type: ClassVar[str] = "eval_abort"
    task: str
    key: str
    why: str


@dataclass
class EvalDone(Event):
    type: ClassVar[str] = "eval"
    task: str
    key: str
    code_sha256: str
    result: dict[str, Any]


@dataclass
class AttemptDone(Event):
    type: ClassVar[str] = "attempt"
    task: str
    key: str
    role: str
    index: int | None
    parent: str | None
    meta: dict[str, Any]
    category: str
    runtime_ms: float | None
    reason: str | None
    check: str | None
    code_sha256: str | None
    cost_usd: float | None


@dataclass
class Baseline(Event):
    type: ClassVar[str] = "baseline"
    task: str
    mode: str
    device: str | None
    protocol: str | None
    result: dict[str, Any]


@dataclass
class TaskEnd(Event):
    type: ClassVar[str] = "task_end"
    task: str
    reason: str
    queries_used: int
    spend_usd: float
    spend_known: bool
    best_runtime_ms: float | None
    baseline_ms: float | None


# -- reading ------------------------------------------------------------------------------------------
@dataclass
class BadLine:
    """A line that is not a JSON object: where it is, why, and its bytes (kept by --repair-journal)."""

    number: int
    why: str
    raw: bytes

    def describe(self, path: Path) -> str:
        return f"{path.name} line {self.number} is corrupt ({self.why})"


@dataclass
class JournalScan:
    events: list[dict[str, Any]] = field(default_factory=list)
    bad: list[BadLine] = field(default_factory=list)
    torn_tail: bool = False  # a last line with no newline: a write the process never finished


def scan_journal(path: Path) -> JournalScan:
    """Every event, and every line that is not one (with its line number). Never raises on content."""
    scan = JournalScan()
    if not path.exists():
        return scan
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.endswith(b"\n"):
                scan.torn_tail = True  # the event never completed
                break
            if not raw.strip():
                continue
            try:
                event = json.loads(raw)
            except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError alike
                scan.bad.append(BadLine(number, _short_reason(exc), raw))
                continue
            if not isinstance(event, dict):
                scan.bad.append(BadLine(number, "not a journal event", raw))
                continue
            scan.events.append(event)
    return scan


def _short_reason(exc: ValueError) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 at byte {exc.start}"
    return str(exc).split(":")[0] if isinstance(exc, json.JSONDecodeError) else str(exc)


def read_journal(path: Path) -> list[dict[str, Any]]:
    """All complete events; a torn last line and corrupt lines are left out (``scan_journal`` names them)."""
    return scan_journal(path).events


@dataclass
class Replay:
    """What a previous process of this run completed, indexed for resume."""

    llm: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    llm_errors: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    evals: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    eval_starts: dict[tuple[str, str], int] = field(default_factory=lambda: defaultdict(int))
    attempts: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    baselines: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    task_ends: dict[str, dict[str, Any]] = field(default_factory=dict)
    starts: int = 0

    @classmethod
    def from_events(cls, events: list[dict[str, Any]]) -> Replay:
        replay = cls()
        for event in events:
            kind = event.get("type")
            key = (event.get("task", ""), event.get("key", ""))
            if kind == LLMAnswer.type:
                replay.llm[key] = event
                replay.llm_errors.pop(key, None)  # re-asked with --retry-llm-errors: the answer wins
            elif kind == LLMFailure.type:
                replay.llm_errors[key] = event
            elif kind == EvalStart.type:
                replay.eval_starts[key] += 1
            elif kind == EvalAbort.type:  # stopped by the evaluator or the user: not the candidate's doing
                replay.eval_starts[key] -= 1
            elif kind == EvalDone.type:
                replay.evals[key] = event
            elif kind == AttemptDone.type:
                replay.attempts[key] = event
            elif kind == Baseline.type:
                replay.baselines[(event["task"], event["mode"])] = event
            elif kind == TaskEnd.type:
                replay.task_ends[event["task"]] = event
            elif kind == RunStart.type:
                replay.starts += 1
        return replay

    def forget_llm_errors(self) -> list[str]:
        """For ``--retry-llm-errors``: queries that failed are asked again, their attempts redone, and
        the tasks that held them run again (replaying everything else). Returns those tasks."""
        tasks = sorted({task for task, _ in self.llm_errors})
        for key in list(self.llm_errors):
            del self.llm_errors[key]
            attempt = self.attempts.get(key)
            if attempt is not None and attempt.get("category") == "llm_error":
                del self.attempts[key]
        for task in tasks:
            self.task_ends.pop(task, None)
        return tasks


def latest_attempts(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One ``attempt`` event per (task, key): the last (a retried LLM error is redone under its key)."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for event in events:
        if event.get("type") == AttemptDone.type:
            latest.pop((event["task"], event["key"]), None)
            latest[(event["task"], event["key"])] = event
    return list(latest.values())
