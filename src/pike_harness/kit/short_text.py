"""Cutting a long message for a terminal line or a table cell: at a word boundary, with an ellipsis.

A reason cut mid-word ("cannot be multiplied (64x256 an") reads as a garbled error; cutting at the last
space before the limit and ending with "…" shows that text was left out and where.
"""

from __future__ import annotations

ELLIPSIS = "…"


def shorten(text: str, limit: int) -> str:
    """``text`` as is when it fits in ``limit`` characters, else cut at a word boundary plus an ellipsis.

    A single word longer than the limit (a path, a hash) is cut inside it rather than dropped.
    """
    if len(text) <= limit:
        return text
    cut = text[: max(1, limit - len(ELLIPSIS))]
    space = cut.rfind(" ")
    if space > limit // 2:  # a word boundary not too far back
        cut = cut[:space]
    return cut.rstrip(" ,;:(") + ELLIPSIS
