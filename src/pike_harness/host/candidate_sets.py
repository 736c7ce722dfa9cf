"""Sets of candidate files, each matched to its task: a folder of solutions, or a manifest.

One place for the mapping, shared by ``pikeh eval`` and ``benchmarks/fidelity.py``:

- A folder plus a suite: files named ``task_N.py`` (PIKE's published solutions) or ``N_anything.py``
  (a suite's own naming) are candidates for task ``N`` of the suite. Other ``.py`` files are skipped
  and named in ``CandidateSet.skipped``.
- A manifest: a JSON-lines file, one object per line, ``{"task": "SUITE/ID", "file": "PATH"}``; a
  relative ``file`` is relative to the manifest's folder. Blank lines and lines starting with ``#``
  are ignored. The same file may appear for several tasks, and a task several times.

Mistakes (an empty folder, a task id the suite lacks, a malformed manifest line, a missing file) are
``UserError``s naming the file and line, unless ``strict=False`` asks to skip unknown task ids.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pike_harness.errors import UserError

SOLUTION_NAME = re.compile(r"^(?:task_)?(\d+)(?:_.*)?\.py$")


@dataclass(frozen=True)
class Candidate:
    task: Any  # contracts.model.Task
    path: Path

    @property
    def label(self) -> str:
        return self.path.name

    def source(self) -> str:
        try:
            return self.path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise UserError(f"{self.path}: cannot read the candidate: {exc}") from None


@dataclass
class CandidateSet:
    candidates: list[Candidate] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "NAME: why", for files a folder held but no task took


def task_id_of(path: Path) -> int | None:
    """The task id a solution file's name gives (``task_7.py``, ``7_ResNet.py``), or None."""
    match = SOLUTION_NAME.match(path.name)
    return int(match.group(1)) if match else None


def from_folder(folder: Path, suite: Any, *, wanted: set[int] | None = None, strict: bool = True) -> CandidateSet:
    """Every solution file in ``folder`` for a task of ``suite`` (a ``contracts.suite.Suite``), by task id.

    ``wanted`` keeps only those ids. With ``strict``, a file for a task the suite lacks is an error;
    otherwise it is skipped and named in ``skipped``.
    """
    if not folder.is_dir():
        raise UserError(f"{folder}: not a folder")
    found = CandidateSet()
    files = sorted(folder.glob("*.py"), key=lambda p: (task_id_of(p) is None, task_id_of(p) or 0, p.name))
    if not files:
        raise UserError(f"{folder}: no .py files (candidates are named task_N.py or N_name.py)")
    known = {task.id for task in suite.tasks()}
    for path in files:
        task_id = task_id_of(path)
        if task_id is None:
            found.skipped.append(f"{path.name}: no task id in its name (task_N.py or N_name.py)")
            continue
        if wanted is not None and task_id not in wanted:
            continue
        if task_id not in known:
            if strict:
                raise UserError(f"{path}: suite {suite.name!r} has no task {task_id}")
            found.skipped.append(f"{path.name}: suite {suite.name!r} has no task {task_id}")
            continue
        found.candidates.append(Candidate(suite.task(task_id), path))
    if not found.candidates:
        raise UserError(f"{folder}: no candidate file names a task of suite {suite.name!r} "
                        f"({'; '.join(found.skipped[:3]) or 'none matched the selection'})")
    return found


def from_manifest(manifest: Path, catalog: Any) -> CandidateSet:
    """The candidates a JSON-lines manifest lists; tasks resolved through ``catalog`` (``host.tasks.TaskCatalog``)."""
    try:
        lines = manifest.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{manifest}: cannot read the manifest: {exc}") from None
    found = CandidateSet()
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        where = f"{manifest}:{number}"
        try:
            entry = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UserError(f"{where}: not a JSON object ({exc.msg}); write {{\"task\": \"SUITE/ID\", "
                            "\"file\": \"PATH\"}") from None
        if not isinstance(entry, dict) or not isinstance(entry.get("task"), str) \
                or not isinstance(entry.get("file"), str):
            raise UserError(f"{where}: each line needs \"task\" (SUITE/ID) and \"file\" (a path), both strings")
        path = Path(entry["file"]).expanduser()
        if not path.is_absolute():
            path = manifest.parent / path
        if not path.is_file():
            raise UserError(f"{where}: no candidate file {path}")
        try:
            task = catalog.resolve(entry["task"])
        except UserError as exc:
            raise UserError(f"{where}: {exc}") from None
        found.candidates.append(Candidate(task, path))
    if not found.candidates:
        raise UserError(f"{manifest}: the manifest lists no candidates")
    return found
