"""The one place rich consoles are made, so tables survive a pipe.

Off a terminal (``pikeh run > results.txt``, ``pikeh tasks audit | cat``) rich falls back to 80
columns and squeezes tables to fit: milliseconds lose their decimals, legends are cut and run names
wrap over several lines. A file has no width, so off a terminal the console is wide enough for any
table's natural width (tables are drawn at the width their content needs, never stretched) and writes
no colour codes; on a terminal it keeps the terminal's width.
"""

from __future__ import annotations

import sys
from typing import IO

from rich.console import Console
from rich.markup import escape

OFF_TERMINAL_WIDTH = 1000  # wider than any table we draw: off a terminal nothing is cut or wrapped


def console(*, stderr: bool = False, file: IO[str] | None = None) -> Console:
    """A console for stdout (results), stderr (progress) or ``file``, at a width that cuts nothing."""
    target = file if file is not None else (sys.stderr if stderr else sys.stdout)
    probe = Console(file=target)
    if probe.is_terminal:
        return probe
    return Console(file=target, width=OFF_TERMINAL_WIDTH, no_color=True, highlight=False)


def literal(text: object) -> str:
    """``text`` as written, for a rich string or table cell that also holds markup of ours: a
    candidate's exception message, a kernel's name or a result's flag is never read as markup (an
    unmatched ``[/x]`` in it would otherwise end the command with a MarkupError)."""
    return escape(str(text))
