"""The suite loader and the catalogue: folders of KernelBench-format files, their metadata, and task
references (the ``Suite`` type itself is a contract, contracts/suite.py).

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
from pathlib import Path
from typing import Any

from pike_harness.contracts.model import PRECISION_RULES, PRECISIONS, Task, TaskMeta
from pike_harness.contracts.suite import Suite
from pike_harness.errors import UserError
from pike_harness.worker.python_ast import parse_python

TASK_FILE = re.compile(r"^(\d+)_([A-Za-z0-9_]+)\.py$")
REQUIRED_NAMES = ("Model", "get_inputs", "get_init_inputs")
METADATA_FILE = "suite.toml"
TASKS_PATH_ENV = "PIKEH_TASKS_PATH"


def load_suite(path: Path, *, name: str | None = None, origin: str) -> Suite:
    """Open a folder as a suite, reading ``suite.toml`` when it is there; the task files are read and
    checked when the suite's tasks are first needed (``Suite.scan``)."""
    path = Path(path)
    if not path.is_dir():
        raise UserError(f"tasks folder {path} does not exist or is not a folder")
    if not os.access(path, os.R_OK | os.X_OK):
        raise UserError(f"tasks folder {path} is not readable")
    suite = Suite(name=name or path.name, path=path, origin=origin, scan=scan_tasks)
    meta_file = path / METADATA_FILE
    if meta_file.is_file():
        _read_metadata(suite, meta_file)
    return suite


def _read_metadata(suite: Suite, meta_file: Path) -> None:
    try:
        data = tomllib.loads(meta_file.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"{meta_file}: cannot read suite metadata: {exc}") from None
    suite.title = str(data.get("title", ""))
    suite.source = str(data.get("source", ""))
    suite.notes = str(data.get("notes", ""))
    suite.defaults = _task_meta(data.get("defaults", {}), TaskMeta(), meta_file, "defaults")
    for key, entry in data.get("tasks", {}).items():
        if not str(key).isdigit():
            raise UserError(f"{meta_file}: [tasks.{key}] must be named by a task id (a number)")
        suite.task_meta[int(key)] = _task_meta(entry, suite.defaults, meta_file, f"tasks.{key}")


def scan_tasks(suite: Suite) -> dict[int, Task]:
    """The suite folder's tasks by id, every file checked (a bad one fails here, by name)."""
    try:
        entries = sorted(suite.path.iterdir())
    except OSError as exc:
        raise UserError(f"tasks folder {suite.path} cannot be read: {exc.strerror}") from None
    found: dict[int, Task] = {}
    for entry in entries:
        match = TASK_FILE.match(entry.name)
        if not match or not entry.is_file():
            continue
        task_id = int(match.group(1))
        if task_id in found:
            raise UserError(f"suite {suite.name!r}: task id {task_id} is used by both "
                            f"{found[task_id].path.name} and {entry.name}")
        check_task_file(entry)
        meta = suite.task_meta.get(task_id, suite.defaults)
        found[task_id] = Task(suite=suite.name, id=task_id, name=entry.stem, path=entry, meta=meta)
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
                suite = load_suite(Path(path), origin=origin)
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
