"""Reading the run journal back: scanning its lines (corrupt and torn ones found, never raised on),
the resume's ``Replay`` of what was already answered and evaluated, and each attempt's latest record.

The event types the lines hold are the contract in ``pike_harness.contracts.journal``.
"""

from __future__ import annotations

import datetime
import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pike_harness.contracts.journal import (
    AttemptDone,
    Baseline,
    EvalAbort,
    EvalDone,
    EvalStart,
    FinalTiming,
    LLMAnswer,
    LLMFailure,
    RunStart,
    TaskEnd,
)

TIME_FORMAT = "%Y-%m-%dT%H:%M:%S%z"  # every journal event's ``time`` (whole seconds; store.now writes it)


def epoch_of(stamp: Any) -> float | None:
    """A journal ``time`` as seconds since the epoch, or None if it is missing or not in TIME_FORMAT."""
    try:
        return datetime.datetime.strptime(str(stamp), TIME_FORMAT).timestamp()
    except ValueError:
        return None


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
    final_timings: dict[str, dict[str, Any]] = field(default_factory=dict)  # task -> its latest final_timing
    first_seen: dict[str, float] = field(default_factory=dict)  # task -> epoch of its first event (its search began)
    starts: int = 0

    @classmethod
    def from_events(cls, events: list[dict[str, Any]]) -> Replay:
        replay = cls()
        for event in events:
            kind = event.get("type")
            key = (event.get("task", ""), event.get("key", ""))
            if key[0] and key[0] not in replay.first_seen and (seen := epoch_of(event.get("time"))) is not None:
                replay.first_seen[key[0]] = seen
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
            elif kind == FinalTiming.type:
                replay.final_timings[event["task"]] = event
            elif kind == RunStart.type:
                replay.starts += 1
        return replay

    def forget_llm_errors(self) -> list[str]:
        """For ``--retry-llm-errors``: queries that failed are asked again, their attempts redone, and
        the tasks that held them run again (replaying everything else). Returns those tasks.

        A refused prompt stays failed: the same prompt to the same model (a resume's options match the
        run's) gets the same refusal, so asking it again would only reopen a finished task to be refused."""
        again = [key for key, event in self.llm_errors.items() if not event.get("refused")]
        tasks = sorted({task for task, _ in again})
        for key in again:
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
