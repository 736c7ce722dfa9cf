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
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pike_harness.contracts import journal
from pike_harness.contracts.journal import Event, safe_name
from pike_harness.errors import UserError
from pike_harness.host.journal_reading import TIME_FORMAT, Replay, read_journal, scan_journal
from pike_harness.worker import text_safety

__all__ = ["JOURNAL", "RUN_FILE", "RunStore", "Replay", "read_journal", "safe_name", "find_runs", "now", "sha256"]

RUN_SCHEMA = 1
JOURNAL = "journal.jsonl"
RUN_FILE = "run.json"
SEED_GROUP_FILE = "seeds.json"  # a folder of runs of one configuration, one per seed (host/seed_group.py)
LOCK_FILE = "run.lock"
LOG_FILE = "log.txt"
DB_FILE = "run.duckdb"
BAD_LINES_FILE = "journal.bad.jsonl"  # where --repair-journal moves lines that are not events


def now() -> str:
    return time.strftime(TIME_FORMAT)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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


def repair_journal(path: Path) -> int:
    """Move every line that is not an event to journal.bad.jsonl (with its line number); returns how many.

    The journal is rewritten atomically, so a crash during the repair leaves the old one in place.
    """
    scan = scan_journal(path)
    if not scan.bad:
        return 0
    bad_numbers = {bad.number for bad in scan.bad}
    with (path.parent / BAD_LINES_FILE).open("a", encoding="utf-8") as side:
        for bad in scan.bad:
            side.write(json.dumps({"line": bad.number, "why": bad.why, "repaired": now(),
                                   "raw": bad.raw.decode("utf-8", errors="backslashreplace")}) + "\n")
    tmp = path.with_name(f".{path.name}.repair{os.getpid()}")
    with path.open("rb") as source, tmp.open("wb") as target:
        for number, raw in enumerate(source, start=1):
            if number not in bad_numbers:
                target.write(raw)
        target.flush()
        os.fsync(target.fileno())
    os.replace(tmp, path)
    return len(scan.bad)


class RunStore:
    """One run directory, opened for writing by exactly one process (an exclusive lock)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.journal_path = self.path / JOURNAL
        self._lock_handle: Any = None
        self._journal: Any = None
        self._write_lock = threading.Lock()
        self.last_write = time.monotonic()  # when the journal last grew (host/stall_watch.py reads it)

    # -- opening -------------------------------------------------------------------------------
    @property
    def exists(self) -> bool:
        return (self.path / RUN_FILE).exists()

    def metadata(self) -> dict[str, Any]:
        try:
            return json.loads((self.path / RUN_FILE).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise UserError(f"{self.path / RUN_FILE} cannot be read: {exc}") from None

    def open(self, metadata: dict[str, Any], *, repair: bool = False) -> Replay:
        """Create the run, or resume it when its configuration matches; returns what to replay.

        A journal with corrupt lines is refused (resuming past a lost event could redo or misjudge
        work) unless ``repair``, which moves those lines to journal.bad.jsonl first.
        """
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
            if repair:
                moved = repair_journal(self.journal_path)
                if moved:
                    self.log(f"--repair-journal moved {moved} corrupt line(s) to {BAD_LINES_FILE}")
            scan = scan_journal(self.journal_path)
            if scan.bad:
                lines = ", ".join(str(b.number) for b in scan.bad[:10]) + (" ..." if len(scan.bad) > 10 else "")
                raise UserError(f"{self.journal_path} has {len(scan.bad)} corrupt line(s) (line {lines}: "
                                f"{scan.bad[0].why}); rerun with --repair-journal to move them to "
                                f"{BAD_LINES_FILE} and resume")
            replay = Replay.from_events(scan.events)
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

    def close(self, final: Event | None = None) -> None:
        """Release the run; ``final`` (the run_end) is the journal's last line: nothing can follow it."""
        with self._write_lock:
            if self._journal is not None:
                if final is not None:
                    self._write(final.to_dict())
                self._journal.close()
                self._journal = None
        if self._lock_handle is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_handle, fcntl.LOCK_UN)
            self._lock_handle.close()
            self._lock_handle = None

    # -- writing -------------------------------------------------------------------------------
    def append(self, event: Event | dict[str, Any]) -> None:
        """Journal one completed event durably before anyone acts on it."""
        with self._write_lock:
            if self._journal is None:
                raise RuntimeError("run store is not open")
            self._write(event.to_dict() if isinstance(event, Event) else event)

    def _write(self, fields: dict[str, Any]) -> None:
        line = json.dumps({"time": now(), **fields}, sort_keys=True, default=str)
        self._journal.write(line + "\n")
        self._journal.flush()
        os.fsync(self._journal.fileno())
        self.last_write = time.monotonic()

    def log(self, message: str) -> None:
        """A line of ``log.txt``, written as visible characters: a user reads the file in a terminal."""
        with self._write_lock, (self.path / LOG_FILE).open("a", encoding="utf-8") as handle:
            handle.write(f"{now()} {text_safety.printable(message)}\n")

    def task_dir(self, task_ref: str) -> Path:
        return self.path / journal.task_dir(task_ref)

    def attempt_dir(self, task_ref: str, key: str, index: int | None) -> Path:
        return self.path / journal.attempt_dir(task_ref, key, index)

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
                elif (child / SEED_GROUP_FILE).is_file():  # a seed group (host/seed_group.py): its seeds' runs
                    yield from (c for c in sorted(child.iterdir()) if (c / RUN_FILE).exists())
