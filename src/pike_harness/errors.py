"""Errors a user can cause, kept apart from bugs.

A ``UserError`` is printed as one line and exits non-zero; anything else is a bug and keeps its
traceback. Deriving from ``click.ClickException`` lets click do the printing in every command.
"""

from __future__ import annotations

import click


class UserError(click.ClickException):
    """A problem with the user's input (unknown task, bad file, missing key): one line, exit 1."""

    exit_code = 1


class BudgetExhausted(Exception):
    """Raised to a strategy when a task's query or money budget is spent; the task ends cleanly."""
