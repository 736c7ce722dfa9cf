"""Text a candidate wrote, made safe to show: no terminal control sequences, no bidi overrides, no lone surrogates.

A candidate's exception messages, stdout and stderr reach a user's terminal (``pikeh eval``, a run's
progress lines), the reports, DuckDB and an LLM's next prompt. An ESC in them is a command to the
terminal that shows them: it can clear the screen, rewrite the verdict line above it, set the window
title or write to the clipboard (OSC 52). Unicode's bidirectional embeddings, overrides and isolates
reorder what a reader sees against what is there ("Trojan Source"). So every string of a result
passes through ``printable``: C0 controls other than newline and tab, DEL, the C1 controls and those
bidi marks become a visible ``\\xNN`` or ``\\uNNNN``, and a carriage return becomes a newline (a
progress bar's updates stay readable, one per line). So does every surrogate code unit (U+D800 to
U+DFFF, each on its own, paired or not): a candidate's JSON can carry ``"\\udcff"`` and a file name
read with ``surrogateescape`` carries one for each undecodable byte, and such a string cannot be
encoded as UTF-8 (a terminal, DuckDB's JSON, a prompt's hash would raise), so every record string is
valid UTF-8 text. Standard library only.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

# The bidi marks, embeddings, overrides and isolates: what reorders text as it is shown.
BIDI_MARKS = frozenset(chr(c) for c in (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)))
_CONTROLS = [c for c in range(0x20) if c not in (0x09, 0x0A)] + [0x7F, *range(0x80, 0xA0)]
# Surrogate code units: no UTF-8 encoding exists for one (a pair in a str is two of them, not a character).
_SURROGATES = range(0xD800, 0xE000)
_VISIBLE = {c: (f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}") for c in (*_CONTROLS, *map(ord, BIDI_MARKS), *_SURROGATES)}


def printable(text: str) -> str:
    """``text`` with every control character, bidi mark and surrogate shown as an escape (see the module)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").translate(_VISIBLE)


def head_capped(text: str, limit: int, *, length: int | None = None) -> str:
    """``text`` whole when it fits in ``limit`` characters, else its first ``limit`` and a note of the
    cut; ``length``: the length the text had before an earlier cut (the note says that one). One
    marking for every cut of a text from outside (a result's strings, a run's database cells, prompts)."""
    length = max(len(text), length or 0)
    if length <= limit:
        return text
    return f"{text[:limit]} ... [cut: the first {limit:,} of {length:,} characters]"


def tail_capped(text: str, limit: int) -> str:
    """``text`` whole when it fits in ``limit`` characters, else a note of the cut and its last ``limit``."""
    if len(text) <= limit:
        return text
    return f"[cut: the last {limit:,} of {len(text):,} characters] ... {text[-limit:]}"


def map_strings(value: Any, change: Callable[[str], str]) -> Any:
    """``value`` with ``change`` applied to every string inside it (dict keys and values, lists and
    tuples walked; a dataclass instance's fields changed in place, so a record's nested parts are
    covered, today's and tomorrow's); anything else as it was."""
    if isinstance(value, str):
        return change(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for item in dataclasses.fields(value):
            setattr(value, item.name, map_strings(getattr(value, item.name), change))
        return value
    if isinstance(value, dict):
        return {map_strings(key, change): map_strings(item, change) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(map_strings(item, change) for item in value)
    return value
