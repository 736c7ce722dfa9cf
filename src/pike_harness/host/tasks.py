"""Task suites: folders of KernelBench-format files, their metadata, and task references.

Any folder of ``<id>_<Name>.py`` files is a suite. Files are checked with ``ast`` (never executed)
when a suite is opened, so a broken file is reported by name before any work starts, and listing
a suite costs no torch import.
"""

from __future__ import annotations

import ast
import os
import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pike_harness.contracts.model import PRECISION_RULES, PRECISIONS, Task, TaskMeta
from pike_harness.errors import UserError
from pike_harness.worker.python_ast import parse_python

TASK_FILE = re.compile(r"^(\d+)_([A-Za-z0-9_]+)\.py$")
REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
METADATA_FILE = "suite.toml"
TASKS_PATH_ENV = "PIKEH_TASKS_PATH"


@dataclass
class Suite:
    """A named folder of tasks plus what ``suite.toml`` says about them."""

    name: str
    path: Path
    origin: str  # who provides it: a plugin's name, "--tasks-dir" or PIKEH_TASKS_PATH
    title: str = ""
    source: str = ""
    notes: str = ""
    defaults: TaskMeta = field(default_factory=TaskMeta)
    task_meta: dict[int, TaskMeta] = field(default_factory=dict)
    _tasks: dict[int, Task] | None = field(default=None, repr=False)

    @classmethod
    def from_dir(cls, path: Path, *, name: str | None = None, origin: str) -> Suite:
        """Open a folder as a suite, reading ``suite.toml`` when it is there."""
        path = Path(path)
        if not path.is_dir():
            raise UserError(f"tasks folder {path} does not exist or is not a folder")
        if not os.access(path, os.R_OK | os.X_OK):
            raise UserError(f"tasks folder {path} is not readable")
        suite = cls(name=name or path.name, path=path, origin=origin)
        meta_file = path / METADATA_FILE
        if meta_file.is_file():
            suite._read_metadata(meta_file)
        return suite

    def _read_metadata(self, meta_file: Path) -> None:
        try:
            data = tomllib.loads(meta_file.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise UserError(f"{meta_file}: cannot read suite metadata: {exc}") from None
        self.title = str(data.get("title", ""))
        self.source = str(data.get("source", ""))
        self.notes = str(data.get("notes", ""))
        self.defaults = _task_meta(data.get("defaults", {}), TaskMeta(), meta_file, "defaults")
        for key, entry in data.get("tasks", {}).items():
            if not str(key).isdigit():
                raise UserError(f"{meta_file}: [tasks.{key}] must be named by a task id (a number)")
            self.task_meta[int(key)] = _task_meta(entry, self.defaults, meta_file, f"tasks.{key}")

    def tasks(self) -> list[Task]:
        """All tasks, sorted by id; every file is checked, so a bad file fails here by name."""
        if self._tasks is None:
            self._tasks = self._scan()
        return sorted(self._tasks.values(), key=lambda t: t.id)

    def task(self, task_id: int) -> Task:
        self.tasks()
        assert self._tasks is not None
        if task_id not in self._tasks:
            known = ", ".join(str(i) for i in sorted(self._tasks)) or "none"
            raise UserError(f"suite {self.name!r} has no task {task_id} (ids: {known})")
        return self._tasks[task_id]

    def select(self, spec: str | None) -> list[Task]:
        """The tasks named by an id list such as ``1-5,9,12`` (all tasks when ``spec`` is empty).

        A range takes the ids that exist inside it (level3-pike's ids have gaps); a single id must exist.
        """
        if not spec:
            return self.tasks()
        existing = {t.id for t in self.tasks()}
        chosen: list[int] = []
        for part in spec.replace(" ", "").split(","):
            ids = parse_id_list(part)
            if len(ids) > 1:
                ids = [i for i in ids if i in existing]
                if not ids:
                    raise UserError(f"suite {self.name!r} has no task in {part}")
            chosen.extend(i for i in ids if i not in chosen)
        return [self.task(i) for i in chosen]

    def _scan(self) -> dict[int, Task]:
        try:
            entries = sorted(self.path.iterdir())
        except OSError as exc:
            raise UserError(f"tasks folder {self.path} cannot be read: {exc.strerror}") from None
        found: dict[int, Task] = {}
        for entry in entries:
            match = TASK_FILE.match(entry.name)
            if not match or not entry.is_file():
                continue
            task_id = int(match.group(1))
            if task_id in found:
                raise UserError(f"suite {self.name!r}: task id {task_id} is used by both "
                                f"{found[task_id].path.name} and {entry.name}")
            check_task_file(entry)
            meta = self.task_meta.get(task_id, self.defaults)
            found[task_id] = Task(suite=self.name, id=task_id, name=entry.stem, path=entry, meta=meta)
        return found


def check_task_file(path: Path) -> None:
    """Reject a task file that cannot be a KernelBench task, naming the problem; never executes it."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read task file: {exc}") from None
    try:
        tree = parse_python(text, filename=str(path))
    except SyntaxError as exc:
        raise UserError(f"{path}: syntax error on line {exc.lineno}: {exc.msg}") from None
    missing = [name for name in REQUIRED_NAMES if name not in top_level_names(tree)]
    if missing:
        raise UserError(f"{path}: not a KernelBench task: missing {', '.join(missing)} "
                        f"(a task file defines Model, get_inputs and get_init_inputs)")


def top_level_names(tree: ast.Module) -> set[str]:
    """Names a module binds at top level (classes, functions, assignments, imports)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


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


def _task_meta(entry: dict[str, Any], base: TaskMeta, where: Path, section: str) -> TaskMeta:
    known = {"atol", "rtol", "precision", "precision_rule", "quirks", "notes"}
    values: dict[str, Any] = {
        "atol": base.atol, "rtol": base.rtol, "precision": base.precision, "precision_rule": base.precision_rule,
        "quirks": base.quirks if section == "defaults" else (), "notes": "",
    }
    extra = {}
    for key, value in entry.items():
        if key in known:
            values[key] = value
        else:
            extra[key] = value
    try:
        values["atol"] = float(values["atol"])
        values["rtol"] = float(values["rtol"])
    except (TypeError, ValueError):
        raise UserError(f"{where}: [{section}] atol and rtol must be numbers") from None
    if values["precision"] not in PRECISIONS:
        raise UserError(f"{where}: [{section}] precision must be one of {', '.join(PRECISIONS)}")
    if values["precision_rule"] not in PRECISION_RULES:
        raise UserError(f"{where}: [{section}] precision_rule must be one of {', '.join(PRECISION_RULES)}")
    quirks = values["quirks"]
    values["quirks"] = (quirks,) if isinstance(quirks, str) else tuple(str(q) for q in quirks)
    return TaskMeta(extra=extra, **values)


class TaskCatalog:
    """Every suite this invocation can see: plugin suites, then user folders, which win on a name clash.

    The rule is deliberate: a user who points ``--tasks-dir`` at a folder called ``smoke`` means that
    folder. ``pikeh tasks list`` shows the path and origin of each suite, so the choice is visible.
    """

    def __init__(self, plugin_suites: Iterable[Suite], user_dirs: Iterable[Path] = (), *,
                 env_dirs: Iterable[Path] = ()):
        """``env_dirs`` (from PIKEH_TASKS_PATH) load before ``user_dirs`` (``--tasks-dir``), which win."""
        self._suites: dict[str, Suite] = {}
        for suite in plugin_suites:
            self._suites[suite.name] = suite
        for origin, paths in ((TASKS_PATH_ENV, env_dirs), ("--tasks-dir", user_dirs)):
            for path in paths:
                suite = Suite.from_dir(Path(path), origin=origin)
                self._suites[suite.name] = suite

    @staticmethod
    def env_dirs() -> list[Path]:
        """Folders listed in ``PIKEH_TASKS_PATH`` (os.pathsep separated)."""
        raw = os.environ.get(TASKS_PATH_ENV, "")
        return [Path(p) for p in raw.split(os.pathsep) if p]

    @property
    def suites(self) -> list[Suite]:
        return [self._suites[name] for name in sorted(self._suites)]

    def suite(self, name: str) -> Suite:
        if name not in self._suites:
            known = ", ".join(sorted(self._suites)) or "none"
            raise UserError(f"unknown suite {name!r} (known suites: {known}; add a folder with --tasks-dir)")
        return self._suites[name]

    def resolve(self, ref: str) -> Task:
        """``SUITE/ID`` -> Task, with a message that says how to write it when it is malformed."""
        suite_name, sep, task_id = ref.rpartition("/")
        if not sep or not suite_name or not task_id.isdigit():
            raise UserError(f"bad task reference {ref!r}: write SUITE/ID, e.g. level3-pike/9")
        return self.suite(suite_name).task(int(task_id))

    def select(self, suite: str, tasks: str | None) -> list[Task]:
        return self.suite(suite).select(tasks)
