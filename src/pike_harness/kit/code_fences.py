"""Markdown code fences: how programs are quoted in prompts (``fence``) and read back out of replies.

The host extracts code from every reply with ``extract_code``; strategies should not re-implement it.
"""

from __future__ import annotations

import re


def fence(code: str, lang: str = "python") -> str:
    """Wrap ``code`` in a fenced block whose fence is longer than any backtick run inside it, so a
    program that itself contains ``` (in a docstring or a kernel comment) is quoted intact."""
    longest = max((len(run) for run in re.findall(r"`{3,}", code)), default=0)
    ticks = "`" * max(3, longest + 1)
    body = code if code.endswith("\n") else code + "\n"
    return f"{ticks}{lang}\n{body}{ticks}"


_FENCE_OPEN = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})(?P<info>[^\n]*)$")


def code_blocks(text: str) -> list[str]:
    """Every fenced code block of a Markdown text, in order (CommonMark fences: ``` or ~~~, three or
    more, up to three spaces of indent; an unclosed fence runs to the end, as in a truncated reply)."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    blocks: list[str] = []
    i = 0
    while i < len(lines):
        match = _FENCE_OPEN.match(lines[i])
        if not match or (match["fence"][0] == "`" and "`" in match["info"]):
            i += 1
            continue
        indent, marker = len(match["indent"]), match["fence"]
        closing = re.compile(rf"^ {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
        body: list[str] = []
        i += 1
        while i < len(lines) and not closing.match(lines[i]):
            body.append(_dedent(lines[i], indent))
            i += 1
        i += 1  # skip the closing fence (or step past the end)
        blocks.append("\n".join(body) + "\n" if body else "")
    return blocks


def _dedent(line: str, indent: int) -> str:
    removable = len(line) - len(line.lstrip(" "))
    return line[min(indent, removable):]


def extract_code(text: str) -> str:
    """The program in a reply: its first fenced code block of any language tag, else the whole reply."""
    blocks = code_blocks(text)
    if blocks:
        return blocks[0]
    stripped = text.strip()
    return stripped + "\n" if stripped else ""


def outside_fences(text: str) -> list[str]:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    kept: list[str] = []
    closing: re.Pattern[str] | None = None
    for line in lines:
        if closing is not None:
            if closing.match(line):
                closing = None
            continue
        match = _FENCE_OPEN.match(line)
        if match and not (match["fence"][0] == "`" and "`" in match["info"]):
            marker = match["fence"]
            closing = re.compile(rf"^ {{0,3}}{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
            continue
        kept.append(line)
    return kept
