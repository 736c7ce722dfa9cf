"""The baseline-set folder format (``pikeh baselines --output-dir``), read and written in one place.

A baseline set is a folder holding ``baselines.jsonl`` (one line per measured reference, shaped like
a journal's ``baseline`` event; appended and fsync'ed line by line, so a crash loses at most one) and
``meta.json`` (the suite, protocol, modes, evaluator and host it was measured with). The command
writes it (cli/baselines_cmd.py) and the report's tables read it (host/store_db.py); neither knows the
other, only this module.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pike_harness.contracts.journal import Baseline
from pike_harness.host.journal_reading import read_journal
from pike_harness.host.store import RUN_FILE

BASELINES_FILE = "baselines.jsonl"
META_FILE = "meta.json"


def read_meta(folder: Path) -> dict[str, Any]:
    """The set's ``meta.json`` ({} when missing or unreadable)."""
    try:
        return json.loads((Path(folder) / META_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def save_meta(folder: Path, meta: dict[str, Any]) -> None:
    """Replace ``meta.json`` atomically (a reader never sees half of it)."""
    tmp = Path(folder) / f".{META_FILE}.tmp{os.getpid()}"
    tmp.write_text(json.dumps(meta, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, Path(folder) / META_FILE)


def append_entry(folder: Path, event: dict[str, Any]) -> None:
    """One line per entry, written in one call, flushed and fsync'ed: a crash loses at most that line."""
    line = (json.dumps(event, sort_keys=True, default=str) + "\n").encode("utf-8")
    fd = os.open(Path(folder) / BASELINES_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def entries(folder: Path) -> list[dict[str, Any]]:
    """The set's baseline entries, in the order measured (a torn last line is ignored, as for journals)."""
    return [e for e in read_journal(Path(folder) / BASELINES_FILE) if e.get("type", Baseline.type) == Baseline.type]


def find_baseline_sets(paths: Iterable[Path]) -> list[Path]:
    """Baseline-set folders (holding baselines.jsonl and no run.json) at or one level below the paths."""
    found = []
    for path in paths:
        path = Path(path)
        candidates = [path] + (sorted(c for c in path.iterdir() if c.is_dir()) if path.is_dir() else [])
        for folder in candidates:
            if (folder / BASELINES_FILE).exists() and not (folder / RUN_FILE).exists():
                found.append(folder)
    return found
