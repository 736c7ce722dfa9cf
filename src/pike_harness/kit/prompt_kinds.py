"""Recognising the prompts built in ``prompt_templates`` by their marker lines: for test doubles and
offline backends, which must tell what is asked and recover the program a prompt quotes."""

from __future__ import annotations

from collections.abc import Sequence

from pike_harness.kit.code_fences import code_blocks
from pike_harness.kit.prompt_templates import BRAINSTORM_MARKER, FIX_MARKERS, IMPROVE_MARKER, REFERENCE_MARKER


def prompt_kind(messages: Sequence[dict[str, str]] | str) -> str | None:
    """``"brainstorm"``, ``"fix"``, ``"improve"`` or ``"optimize"`` for a prompt built here, else None."""
    text = messages if isinstance(messages, str) else _user_text(messages)
    if BRAINSTORM_MARKER in text:
        return "brainstorm"
    if any(marker in text for marker in FIX_MARKERS):
        return "fix"
    if IMPROVE_MARKER in text:
        return "improve"
    if REFERENCE_MARKER in text:
        return "optimize"
    return None


def quoted_program(messages: Sequence[dict[str, str]] | str) -> str | None:
    """The program an improve or fix prompt quotes (the parent, or the failing code), verbatim."""
    text = messages if isinstance(messages, str) else _user_text(messages)
    for marker in (*FIX_MARKERS, IMPROVE_MARKER):
        head, found, rest = text.partition(marker)
        if found:
            blocks = code_blocks(rest)
            return blocks[0] if blocks else None
    return None


def _user_text(messages: Sequence[dict[str, str]]) -> str:
    users = [m.get("content", "") for m in messages if m.get("role") == "user"]
    return users[-1] if users else ""
