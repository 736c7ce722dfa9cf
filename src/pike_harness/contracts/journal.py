"""The run journal's events, in one place: what every writer appends and every reader expects.

``journal.jsonl`` is the single source of truth of a run (see docs/run-layout.md). Each event type is a
dataclass here; the run loop, ``pikeh baselines`` and the PIKE importer append these objects through
``RunStore.append``, and the resume (``Replay``), the database loader (``store_db``) and the replay
backend read the lines back with ``scan_journal``/``read_journal`` (host/journal_reading.py).
``attempt_dir`` is the one rule for where an attempt's human-readable mirror lives, used both to write
it and to point at it from reports.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any, ClassVar


def safe_name(text: str, limit: int = 80) -> str:
    """A file-system-safe rendering of a key or run name: one path component, never ``.`` or ``..``.

    Task refs and keys can come from a foreign journal or `pikeh import pike --suite`, so "../.." must not
    name a folder outside the run. A name of dots alone gets a leading ``_`` ("_.", "_.."): no other text
    maps to a name that starts with ``_`` (the ``strip``), so every folder an earlier run made keeps its name.
    Distinct texts can still share a name ("a/b", "a b" and "a_b"; keys cut at ``limit``): changing that
    would rename existing runs' folders, which a resume finds by this mapping.
    """
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:limit] or "_"
    return name if name.strip(".") else ("_" + name)[:max(1, limit)]


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
    """A query that got no answer after the client's retries (charged: it was asked).

    ``refused``: the provider refused this prompt (too long for the context window, content it will not
    process; ``PromptRefusedError``): asking it again gets the same refusal, so ``--retry-llm-errors``
    leaves it failed. ``cost_usd``: 0.0 for a refused prompt (providers bill no tokens for a request they
    refuse); None where it is not known (a timed-out request may have been billed).
    """

    type: ClassVar[str] = "llm_error"
    task: str
    key: str
    role: str
    index: int | None
    counted: bool
    error: str
    status: int | None
    retries: list[dict[str, Any]] = field(default_factory=list)
    refused: bool = False
    cost_usd: float | None = None


@dataclass
class LLMAbandoned(Event):
    """A query still being answered when the run closed its journal without it (a second Ctrl-C ended the
    wait for answers, or the wait's grace period ran out): the provider may bill it, but its answer never
    reached the journal. For accounting only: a resume asks the query again (the replay ignores this
    event), so its later ``llm`` event is a second, separately billed request.

    Nothing about its cost is known for certain: ``estimated_cost_usd`` prices ``estimated_prompt_tokens``
    (the prompt's characters / 4) at the model's input price, output tokens left out (so it is a floor),
    and is None where the model has no price.
    """

    type: ClassVar[str] = "llm_abandoned"
    task: str
    key: str
    role: str
    request_sha256: str | None
    estimated_prompt_tokens: int | None
    estimated_cost_usd: float | None
    why: str


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


@dataclass
class FinalTiming(Event):
    """A task's final best re-timed paired against its eager reference, after its search ended.

    ``key`` is the evaluation's key (``final/`` and the best attempt's key), so ``eval_start`` and this
    event bracket it as any evaluation; ``best_key`` and ``code_sha256`` name what was timed, and a
    resume that finds the same best does not time it again. ``result`` is the evaluation's result (its
    ``paired`` holds the timing); ``why`` says why there is no paired timing when there is none (the
    evaluator could not pair, the code failed its checks, the harness died twice while it ran).
    """

    type: ClassVar[str] = "final_timing"
    task: str
    key: str
    best_key: str
    code_sha256: str
    result: dict[str, Any] | None
    why: str | None = None


FINAL_TIMING_PREFIX = "final/"  # the key of a final re-timing's evaluation: this, then the best attempt's key
