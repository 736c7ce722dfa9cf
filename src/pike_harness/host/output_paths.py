"""Output folders checked before any work starts: one line naming the path and what is wrong with it.

A run, a demo or a report that fails on its output folder after minutes of work, with a
``NotADirectoryError`` traceback, wastes the user's time and hides the fix; every command that writes
a folder (``--output-dir``, ``--output``, ``--llm-cache``) calls ``check_output_dir`` first.
"""

from __future__ import annotations

import os
from pathlib import Path

from pike_harness.errors import UsageError


def check_output_dir(path: Path | str, option: str) -> None:
    """Raise a one-line ``UsageError`` (exit 2) unless ``path`` is, or can be made, a writable folder.

    Walks up to the nearest part of the path that exists: it must be a folder (an output path inside
    an existing file can never be made) that this user may write into.
    """
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise UsageError(f"{option} {path}: is a file, not a folder")
    existing = path
    while not existing.exists() and existing.parent != existing:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise UsageError(f"{option} {path}: {existing} is a file, so no folder can be made inside it")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: {existing} is not writable")
