"""Reading the brainstorming agent's reply: one idea per bullet line, fitted to the number of branches."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pike_harness.kit.code_fences import outside_fences


class NoIdeasError(ValueError):
    """The brainstorming agent's reply held no idea: the task cannot start its first phase."""


_BULLET = re.compile(r"^(?P<indent>\s*)(?:[-*+\u2022\u2023\u25e6\u2043]|\d{1,3}[.)])\s+(?P<text>\S.*)$")


def parse_ideas(text: str) -> list[str]:
    """The brainstorming reply's bullet lines as a list of ideas.

    A bullet is ``-``, ``*``, ``+``, ``•`` or ``1.``/``1)`` followed by text. Bullets at the list's
    outermost indentation start ideas; deeper bullets and indented plain lines continue the current
    idea (models wrap long ideas and add sub-points); an unindented plain line ends it, so a closing
    remark is not glued onto the last idea. Lines inside fenced code blocks are ignored.
    """
    lines = outside_fences(text)
    bullets = [m for m in (_BULLET.match(line) for line in lines) if m]
    if not bullets:
        return []
    top = min(len(m["indent"].expandtabs(4)) for m in bullets)
    ideas: list[list[str]] = []
    open_idea = False
    for line in lines:
        if not line.strip():
            continue
        match = _BULLET.match(line)
        indent = len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip())
        if match and indent <= top:
            ideas.append([match["text"].strip()])
            open_idea = True
        elif open_idea and indent > top:
            ideas[-1].append(match["text"].strip() if match else line.strip())
        else:
            open_idea = False
    return [" ".join(parts) for parts in ideas]


def fit_ideas(ideas: Sequence[str], count: int) -> list[str]:
    """Exactly ``count`` ideas: the first ``count``, or the list repeated in order until long enough."""
    if not ideas:
        raise NoIdeasError("the brainstorming reply contained no bullet-line ideas")
    return [ideas[i % len(ideas)] for i in range(count)]
