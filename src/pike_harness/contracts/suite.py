"""The task suite type plugins register: a named folder of tasks and what its ``suite.toml`` says.

The type lives with the other contracts because plugins build and register suites; reading a folder
into one (``suite.toml``, checking each task file) is the host's loader, ``load_suite`` in
host/tasks.py, which a suite calls back when its tasks are first needed: registering a suite costs
no file parsing, and a broken task file is reported by name only by a command that uses the suite.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pike_harness.contracts.model import Task, TaskMeta
from pike_harness.errors import UserError


@dataclass
class Suite:
    """A named folder of tasks plus what ``suite.toml`` says about them (``load_suite`` builds one)."""

    name: str
    path: Path
    origin: str  # who provides it: a plugin's name, "--tasks-dir" or PIKEH_TASKS_PATH
    title: str = ""
    source: str = ""
    notes: str = ""
    defaults: TaskMeta = field(default_factory=TaskMeta)
    task_meta: dict[int, TaskMeta] = field(default_factory=dict)
    # Reads the folder's tasks by id, checking every file (the loader sets it); None: no task files.
    scan: Callable[[Suite], dict[int, Task]] | None = field(default=None, repr=False, compare=False)
    _tasks: dict[int, Task] | None = field(default=None, repr=False, compare=False)

    def _by_id(self) -> dict[int, Task]:
        if self._tasks is None:
            self._tasks = self.scan(self) if self.scan is not None else {}
        return self._tasks

    def tasks(self) -> list[Task]:
        """All tasks, sorted by id; every file is checked, so a bad file fails here by name."""
        return sorted(self._by_id().values(), key=lambda t: t.id)

    def task(self, task_id: int) -> Task:
        tasks = self._by_id()
        if task_id not in tasks:
            known = ", ".join(str(i) for i in sorted(tasks)) or "none"
            raise UserError(f"suite {self.name!r} has no task {task_id} (ids: {known})")
        return tasks[task_id]

    def select(self, spec: str | None) -> list[Task]:
        """The tasks named by an id list such as ``1-5,9,12`` (all tasks when ``spec`` is empty).

        A range takes the ids that exist inside it (level3-pike's ids have gaps); a single id must exist.
        """
        if not spec:
            return self.tasks()
        existing = set(self._by_id())
        chosen: list[int] = []
        for part in spec.replace(" ", "").split(","):
            ids = parse_id_list(part)
            if len(ids) > 1:
                ids = [i for i in ids if i in existing]
                if not ids:
                    raise UserError(f"suite {self.name!r} has no task in {part}")
            chosen.extend(i for i in ids if i not in chosen)
        return [self.task(i) for i in chosen]


def parse_id_list(spec: str) -> list[int]:
    """``"1-5,9,12"`` -> ``[1, 2, 3, 4, 5, 9, 12]``, in the order given, without repeats."""
    ids: list[int] = []
    for part in spec.replace(" ", "").split(","):
        if not part:
            continue
        match = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not match:
            raise UserError(f"bad task list {spec!r}: use ids and ranges such as 1-5,9,12")
        low = int(match.group(1))
        high = int(match.group(2) or low)
        if high < low:
            raise UserError(f"bad task range {part!r}: the end is before the start")
        ids.extend(i for i in range(low, high + 1) if i not in ids)
    if not ids:
        raise UserError(f"bad task list {spec!r}: it names no task")
    return ids
