"""``ast.parse`` behind one process-wide lock.

CPython 3.11 keeps the recursion depth of its AST converter in state shared by threads, so two
threads parsing at once can fail with ``SystemError: AST constructor recursion depth mismatch``
(seen here: the offline mutator parsing in a strategy thread while an evaluator thread parsed a
candidate). Parsing is fast; one lock costs nothing measurable and makes every caller safe.
Standard library only: the eval worker uses it too.
"""

from __future__ import annotations

import ast
import threading

_LOCK = threading.Lock()


def parse_python(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)``, one thread at a time."""
    with _LOCK:
        return ast.parse(source, filename=filename)
