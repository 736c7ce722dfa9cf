"""The run store: a self-describing run directory whose journal is the single source of truth.

Every LLM response, evaluation result and attempt is appended to ``journal.jsonl`` (one JSON object per
line, flushed and fsync'ed) the moment it completes, and mirrored as human-readable files per attempt.
Resuming a run is replaying that journal; reporting on a run is loading it into DuckDB
(``materialize``), which works while the run is still going because nothing else is ever rewritten.
The layout is documented in docs/run-layout.md.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import json
import math
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pike_harness.contracts import journal
from pike_harness.contracts.journal import Event, LLMAbandoned, LLMAnswer, LLMFailure, safe_name
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
        # The first failed write (a full disk, say): nothing more is written after it, so the journal
        # keeps every complete line and no line follows a torn one.
        self.write_error: UserError | None = None
        # What a writer that fails raises: the error itself, unless the run loop turns it into its stop.
        self.on_write_error: Callable[[UserError], BaseException] | None = None
        # Queries sent and not yet journaled (task, key) -> an LLMAbandoned's fields: those still here
        # when the journal closes were paid for, perhaps, and are journaled as abandoned.
        self._queries: dict[tuple[str, str], dict[str, Any]] = {}

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
        try:
            return self._open(metadata, repair=repair)
        except OSError as exc:  # a full disk or a read-only folder before the run began: one line, no traceback
            self.close()
            raise UserError(f"cannot open run {self.path}: {describe_os_error(exc)}"
                            + (f" ({exc.filename})" if exc.filename else "")) from None

    def _open(self, metadata: dict[str, Any], *, repair: bool) -> Replay:
        self.path.mkdir(parents=True, exist_ok=True)
        self._acquire_lock()
        try:
            if self.exists:
                stored = self.metadata()
                differences = config_differences(comparable_config(stored.get("config", {})), metadata["config"])
                if differences:
                    raise UserError(
                        f"run {self.path.name!r} exists with a different configuration ({'; '.join(differences)}); "
                        "rerun with the original options to resume it, or choose another --run-name")
            else:
                if scan_journal(self.journal_path).events:
                    # Replaying it under today's options would relabel another configuration's results.
                    raise UserError(
                        f"{self.path} has a journal but no {RUN_FILE}, so the configuration it was run under "
                        f"is unknown; restore {RUN_FILE} (from a backup or a copy of this run) to resume it, "
                        f"or move {JOURNAL} away (or choose another --run-name) to start afresh")
                self._write_file(self.path / RUN_FILE,
                                 json.dumps({"schema": RUN_SCHEMA, **metadata}, indent=2))
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
            # Unbuffered: a failed write leaves nothing queued for a later flush to write after it.
            self._journal = self.journal_path.open("ab", buffering=0)
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
        self._lock_handle = handle
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()} on {os.uname().nodename} since {now()}\n")
        handle.flush()

    def close(self, final: Event | None = None, *, why_abandoned: str = "the run stopped before its answer came") -> None:
        """Release the run; ``final`` (the run_end) is the journal's last line: nothing can follow it.

        Queries still unanswered (``query_sent`` with no ``llm``/``llm_error`` since) are journaled first,
        each as an ``llm_abandoned``. After a failed write nothing more is written, and closing never
        raises over it: the first failure is the one the run reports."""
        with self._write_lock:
            if self._journal is not None:
                failed_before = self.write_error is not None
                try:
                    for fields in list(self._queries.values()):
                        self._write(LLMAbandoned(**fields, why=why_abandoned).to_dict())
                    self._queries.clear()
                    if final is not None:
                        self._write(final.to_dict())
                except BaseException:
                    if not failed_before:
                        raise  # this close's own write failed: that is the failure to report
                finally:
                    with contextlib.suppress(OSError):
                        self._journal.close()
                    self._journal = None
        if self._lock_handle is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._lock_handle, fcntl.LOCK_UN)
            self._lock_handle.close()
            self._lock_handle = None

    # -- writing -------------------------------------------------------------------------------
    def append(self, event: Event | dict[str, Any]) -> None:
        """Journal one completed event durably before anyone acts on it.

        A write that fails (a full disk, an I/O error) stops there: the partial line is cut off, nothing
        is written after it, and the error is one line naming the journal and the errno (a ``UserError``,
        or what ``on_write_error`` makes of it)."""
        with self._write_lock:
            if self._journal is None:
                raise RuntimeError("run store is not open")
            fields = event.to_dict() if isinstance(event, Event) else event
            self._write(fields)
            if fields.get("type") in (LLMAnswer.type, LLMFailure.type):
                self._queries.pop((str(fields.get("task")), str(fields.get("key"))), None)

    def query_sent(self, task: str, key: str, *, role: str, request_sha256: str | None,
                   estimated_prompt_tokens: int | None, estimated_cost_usd: float | None) -> None:
        """A query went to the provider: if the journal closes before its ``llm`` or ``llm_error``, it
        is journaled as ``llm_abandoned`` (contracts/journal.py), so money spent on it is on record."""
        with self._write_lock:
            self._queries[(task, key)] = {
                "task": task, "key": key, "role": role, "request_sha256": request_sha256,
                "estimated_prompt_tokens": estimated_prompt_tokens, "estimated_cost_usd": estimated_cost_usd}

    def query_dropped(self, task: str, key: str) -> None:
        """A sent query that will not be journaled and was not billed (the setup refused, say)."""
        with self._write_lock:
            self._queries.pop((task, key), None)

    def _write(self, fields: dict[str, Any]) -> None:
        if self.write_error is not None:
            raise self._stop_for(self.write_error)
        data = (json.dumps({"time": now(), **fields}, sort_keys=True, default=str) + "\n").encode("utf-8")
        fd = self._journal.fileno()
        start = None
        try:
            start = os.fstat(fd).st_size
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        except OSError as exc:
            if start is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, start)  # no torn line: the journal ends on its last complete event
            self.write_error = UserError(f"cannot write {self.journal_path}: {describe_os_error(exc)}; the run "
                                         "stopped, and the journal keeps every event written before this; "
                                         "fix that, then rerun the same command to resume")
            raise self._stop_for(self.write_error) from None
        self.last_write = time.monotonic()

    def _stop_for(self, error: UserError) -> BaseException:
        return self.on_write_error(error) if self.on_write_error is not None else error

    def log(self, message: str) -> None:
        """A line of ``log.txt``, written as visible characters: a user reads the file in a terminal.

        Best effort: log.txt is a readable copy, and a full disk is reported by the journal's next write."""
        with self._write_lock, contextlib.suppress(OSError), \
                (self.path / LOG_FILE).open("a", encoding="utf-8") as handle:
            handle.write(f"{now()} {text_safety.printable(message)}\n")

    def task_dir(self, task_ref: str) -> Path:
        return self.path / journal.task_dir(task_ref)

    def attempt_dir(self, task_ref: str, key: str, index: int | None) -> Path:
        return self.path / journal.attempt_dir(task_ref, key, index)

    def write_files(self, folder: Path, files: dict[str, str]) -> None:
        """The human-readable mirror of an attempt; the journal, not these files, is authoritative."""
        for name, text in files.items():
            self._write_file(folder / name, text)

    def _write_file(self, path: Path, text: str) -> None:
        """A file of the run folder, atomically; a failure (a full disk) stops the run as a journal write's
        does, before any query whose prompt could not be recorded is sent."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(path, text)
        except OSError as exc:
            # The journal itself may still have room: answers already paid for are journaled as the run stops.
            raise self._stop_for(UserError(f"cannot write {path}: {describe_os_error(exc)}; the run stopped; "
                                           "fix that, then rerun the same command to resume")) from None

    def free_bytes(self) -> int | None:
        """Space left for the run folder (None where the file system cannot say)."""
        try:
            stat = os.statvfs(self.path)
        except OSError:
            return None
        return stat.f_bavail * stat.f_frsize


def describe_os_error(exc: OSError) -> str:
    """``[Errno 28] ENOSPC: No space left on device``: the number, its name and the system's words."""
    name = errno.errorcode.get(exc.errno, "") if exc.errno is not None else ""
    words = exc.strerror or str(exc)
    return f"[Errno {exc.errno}] {name}: {words}" if name else words


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def config_differences(stored: dict[str, Any], current: dict[str, Any], prefix: str = "") -> list[str]:
    """Human-readable differences between two configurations, naming each option that differs."""
    out = []
    for key in sorted(set(stored) | set(current)):
        a, b = stored.get(key), current.get(key)
        name = f"{prefix}{key}"
        if isinstance(a, dict) and isinstance(b, dict):
            out.extend(config_differences(a, b, prefix=f"{name}."))
        elif not _same(a, b):
            out.append(f"{name}: was {a!r}, now {b!r}")
    return out


def _same(a: Any, b: Any) -> bool:
    """Equal, with NaN equal to itself (NaN is never ``==`` NaN)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return bool(a == b)


def comparable_config(stored: dict[str, Any]) -> dict[str, Any]:
    """A run.json configuration as a resume compares it. Before non-finite values were refused, a
    ``money_budget`` of nan or inf was accepted and set no limit (``spent >= nan`` is never true), so such
    a run is what a run without --money-budget is, and resumes as one."""
    budget = stored.get("money_budget")
    if isinstance(budget, float) and not math.isfinite(budget):
        return {**stored, "money_budget": None}
    return stored


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
