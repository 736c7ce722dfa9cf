"""The errors pike-harness raises on purpose, kept apart from bugs.

Every deliberate error derives from ``PikehError``. A ``UserError`` is a problem the user can fix
(unknown task, bad file, missing key): the CLI prints it as one line and exits 1 (2 for a ``UsageError``). Anything that is
not a ``PikehError`` is a bug and keeps its traceback. Core modules never import click: only the CLI
(``pike_harness.cli``) turns a ``UserError`` into a click error, so the host can be used as a library
and tested without click.
"""

from __future__ import annotations


class PikehError(Exception):
    """Base of every error pike-harness raises on purpose (catch this to catch them all)."""

    @property
    def message(self) -> str:
        return str(self)


class UserError(PikehError):
    """A problem with the user's input (unknown task, bad file, missing key): one line, exit 1."""


class UsageError(UserError):
    """A command-line value that cannot be used (an unknown strategy, an output folder inside a file):
    one line, exit 2, the code click gives its own usage errors, so scripts tell a typo from a failed run."""

    exit_code = 2


class BudgetExhausted(PikehError):
    """Raised to a strategy when a task's query or money budget is spent; the task ends cleanly."""
