"""``ast.parse`` behind one process-wide lock, and every way a source fails to parse as a ``SyntaxError``.

CPython 3.11 keeps the recursion depth of its AST converter in state shared by threads, so two
threads parsing at once can fail with ``SystemError: AST constructor recursion depth mismatch``
(seen here: the offline mutator parsing in a strategy thread while an evaluator thread parsed a
candidate). Parsing is fast; one lock costs nothing measurable and makes every caller safe.

A source nested a few thousand levels deep (``-`` * 200000 + ``1``, ``not not ...``, ``lambda:
lambda: ...``, a chain of conditional expressions) makes CPython's parser raise ``MemoryError`` (its
stack overflowed) or ``RecursionError`` (the AST converter's limit), and a lone surrogate in the text
raises ``UnicodeEncodeError``: none of them a ``SyntaxError``, so a caller that handles bad source by
its ``SyntaxError`` let a candidate's text escape as the harness's crash. Here they all become a
``SyntaxError`` that says why (and on which line, found again by parsing prefixes within ``LINE_SEARCH_CHARS``).
Standard library only: the eval worker uses it too.
"""

from __future__ import annotations

import ast
import io
import threading

_LOCK = threading.Lock()
# The line of a too-deep construct is found by parsing line prefixes (a bisection: about log2(lines)
# more parses, under the lock) when that parses at most this many characters in all (about 2 s at the
# parser's slowest, 2 MB/s; a candidate's source is far smaller); else its error names no line.
LINE_SEARCH_CHARS = 4_000_000
DEPTH_ERRORS = (MemoryError, RecursionError)


def parse_python(source: str, filename: str = "<unknown>") -> ast.Module:
    """``ast.parse(source, filename)``, one thread at a time; a source that cannot be parsed for any
    reason raises ``SyntaxError`` (nesting too deep for the parser and text that cannot be encoded too)."""
    with _LOCK:
        try:
            return ast.parse(source, filename=filename)
        except DEPTH_ERRORS as exc:
            line = _deep_line(source)
            error = SyntaxError(f"the source is nested too deeply for Python's parser ({_named(exc)})",
                                (filename, line, None, None))
        except ValueError as exc:  # a lone surrogate (UnicodeEncodeError); null bytes are a SyntaxError already
            error = SyntaxError(f"the source cannot be parsed ({_named(exc)})", (filename, None, None, None))
    raise error from None


def _named(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text[:200]}" if text else type(exc).__name__


def _deep_line(source: str) -> int | None:
    """The first line at which a prefix of the source fails for depth: where the deep construct
    overflows the parser (or, for the AST converter's limit, where its statement ends).

    Monotone: the parser takes statements in order and stops at the first it cannot parse, so a prefix
    fails for depth exactly when it reaches that point. Called under the lock."""
    lines = io.StringIO(source, newline="").readlines()  # \n, \r\n and \r end a line, as for the tokenizer
    if len(source) * len(lines).bit_length() > LINE_SEARCH_CHARS:
        return None
    low, high = 1, len(lines)
    while low < high:
        middle = (low + high) // 2
        try:
            ast.parse("".join(lines[:middle]))
        except DEPTH_ERRORS:
            high = middle
            continue
        except (SyntaxError, ValueError):
            pass
        low = middle + 1
    return high if lines else None
