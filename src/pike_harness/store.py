"""The run store: a self-describing run directory whose journal is the single source of truth.

Every LLM response, evaluation result and attempt is appended to ``journal.jsonl`` (one JSON object per
line, flushed and fsync'ed) the moment it completes, and mirrored as human-readable files per attempt.
Resuming a run is replaying that journal; reporting on a run is loading it into DuckDB
(``materialize``), which works while the run is still going because nothing else is ever rewritten.
The layout is documented in docs/run-layout.md.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pike_harness.errors import UserError

RUN_SCHEMA = 1
JOURNAL = "journal.jsonl"
RUN_FILE = "run.json"
LOCK_FILE = "run.lock"
LOG_FILE = "log.txt"
DB_FILE = "run.duckdb"


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_journal(path: Path) -> list[dict[str, Any]]:
    """All complete events; a torn last line (the process died mid-write) is ignored."""
    events: list[dict[str, Any]] = []
    if not path.exists():
        return events
    with path.open("rb") as handle:
        for raw in handle:
            if not raw.endswith(b"\n"):
                break  # torn write at the end: the event never completed
            try:
                event = json.loads(raw)
            except json.JSONDecodeError:
                continue
            if isinstance(event, dict):
                events.append(event)
    return events


def _trim_torn_tail(path: Path) -> None:
    """Drop a partial last line so the next append starts on a fresh line."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb+") as handle:
        handle.seek(-1, os.SEEK_END)
        if handle.read(1) == b"\n":
            return
        handle.seek(0)
        data = handle.read()
        cut = data.rfind(b"\n") + 1
        handle.truncate(cut)


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
            if kind == "llm":
                replay.llm[key] = event
            elif kind == "llm_error":
                replay.llm_errors[key] = event
            elif kind == "eval_start":
                replay.eval_starts[key] += 1
            elif kind == "eval_abort":  # stopped by the evaluator or the user: not the candidate's doing
                replay.eval_starts[key] -= 1
            elif kind == "eval":
                replay.evals[key] = event
            elif kind == "attempt":
                replay.attempts[key] = event
            elif kind == "baseline":
                replay.baselines[(event["task"], event["mode"])] = event
            elif kind == "task_end":
                replay.task_ends[event["task"]] = event
            elif kind == "run_start":
                replay.starts += 1
        return replay


def safe_name(text: str, limit: int = 80) -> str:
    """A file-system-safe rendering of a key or run name."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("_")[:limit] or "_"


class RunStore:
    """One run directory, opened for writing by exactly one process (an exclusive lock)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.journal_path = self.path / JOURNAL
        self._lock_handle: Any = None
        self._journal: Any = None
        self._write_lock = threading.Lock()

    # -- opening -------------------------------------------------------------------------------
    @property
    def exists(self) -> bool:
        return (self.path / RUN_FILE).exists()

    def metadata(self) -> dict[str, Any]:
        try:
            return json.loads((self.path / RUN_FILE).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise UserError(f"{self.path / RUN_FILE} cannot be read: {exc}") from None

    def open(self, metadata: dict[str, Any]) -> Replay:
        """Create the run, or resume it when its configuration matches; returns what to replay."""
        self.path.mkdir(parents=True, exist_ok=True)
        self._acquire_lock()
        try:
            if self.exists:
                stored = self.metadata()
                differences = config_differences(stored.get("config", {}), metadata["config"])
                if differences:
                    raise UserError(
                        f"run {self.path.name!r} exists with a different configuration ({'; '.join(differences)}); "
                        "rerun with the original options to resume it, or choose another --run-name")
            else:
                _atomic_write(self.path / RUN_FILE, json.dumps({"schema": RUN_SCHEMA, **metadata}, indent=2))
            _trim_torn_tail(self.journal_path)
            replay = Replay.from_events(read_journal(self.journal_path))
            self._journal = self.journal_path.open("a", encoding="utf-8")
            return replay
        except BaseException:
            self.close()
            raise

    def _acquire_lock(self) -> None:
        handle = (self.path / LOCK_FILE).open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            raise UserError(f"run {self.path.name!r} is already active ({holder}); "
                            "wait for it to finish or stop it first") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {os.uname().nodename} since {now()}\n")
        handle.flush()
        self._lock_handle = handle

    def close(self) -> None:
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        if self._lock_handle is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_handle, fcntl.LOCK_UN)
            self._lock_handle.close()
            self._lock_handle = None

    # -- writing -------------------------------------------------------------------------------
    def append(self, event: dict[str, Any]) -> None:
        """Journal one completed event durably before anyone acts on it."""
        line = json.dumps({"time": now(), **event}, sort_keys=True, default=str)
        with self._write_lock:
            if self._journal is None:
                raise RuntimeError("run store is not open")
            self._journal.write(line + "\n")
            self._journal.flush()
            os.fsync(self._journal.fileno())

    def log(self, message: str) -> None:
        with self._write_lock, (self.path / LOG_FILE).open("a", encoding="utf-8") as handle:
            handle.write(f"{now()} {message}\n")

    def task_dir(self, task_ref: str) -> Path:
        suite, _, task_id = task_ref.rpartition("/")
        return self.path / "tasks" / safe_name(suite) / safe_name(task_id)

    def attempt_dir(self, task_ref: str, key: str, index: int | None) -> Path:
        if key.startswith("baseline/"):  # the run's own reference timings sit beside the attempts
            return self.task_dir(task_ref) / safe_name(key)
        prefix = f"{index:04d}" if index is not None else "free"
        return self.task_dir(task_ref) / "attempts" / f"{prefix}_{safe_name(key)}"

    def write_files(self, folder: Path, files: dict[str, str]) -> None:
        """The human-readable mirror of an attempt; the journal, not these files, is authoritative."""
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in files.items():
            _atomic_write(folder / name, text)


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def config_differences(stored: dict[str, Any], current: dict[str, Any], prefix: str = "") -> list[str]:
    """Human-readable differences between two configurations, naming each option that differs."""
    out = []
    for key in sorted(set(stored) | set(current)):
        a, b = stored.get(key), current.get(key)
        name = f"{prefix}{key}"
        if isinstance(a, dict) and isinstance(b, dict):
            out.extend(config_differences(a, b, prefix=f"{name}."))
        elif a != b:
            out.append(f"{name}: was {a!r}, now {b!r}")
    return out


def find_runs(paths: list[Path]) -> Iterator[Path]:
    """Run directories at or below the given paths (a run directory holds run.json)."""
    for path in paths:
        path = Path(path)
        if (path / RUN_FILE).exists():
            yield path
        elif path.is_dir():
            for child in sorted(path.iterdir()):
                if (child / RUN_FILE).exists():
                    yield child
