"""Built-in task suites: ``smoke`` (small tasks for demos and CPU tests) and ``level3-pike`` (PIKE's benchmark).

The task files ship in the ``pikeh_tasks`` data package (the repository's ``tasks/`` folder), so a
wheel install finds them the same way a source checkout does.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from pike_harness.api import hookimpl, load_suite

BUILTIN_SUITES = ("smoke", "level3-pike")


@hookimpl
def register_suites(register) -> None:
    root = Path(str(files("pikeh_tasks")))
    for name in BUILTIN_SUITES:
        path = root / name
        if path.is_dir():
            register(load_suite(path, origin="suites"))
