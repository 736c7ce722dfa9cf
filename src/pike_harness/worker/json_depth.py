"""How deep a JSON text nests, measured without parsing it.

Python's ``json.loads`` recurses once per level of lists and objects, and so does every walk of the
value it returns (masking secrets in a result, checking field kinds): text that a less trusted process
wrote (a candidate's outputs index, a message on a candidate's channel) could nest deep enough to
raise ``RecursionError`` in the trusted reader, or deep enough to pass the parser and fail the first
walk. Its readers measure the depth first. Standard library only.
"""

from __future__ import annotations

import re

_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_BRACKETS = bytes.maketrans(b"{}", b"[]")  # objects count as lists: only the depth matters here
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))


def nests_within(text: bytes, depth: int) -> bool:
    """Whether the JSON ``text``'s lists and objects nest at most ``depth`` deep, found without recursing
    and in time linear in its length: strings dropped, every bracket kept, then each pass deletes the
    innermost pairs. Text nested deeper (or not balanced, which is no JSON either) keeps some."""
    brackets = _JSON_STRING.sub(b"", text).translate(_BRACKETS, _NOT_BRACKETS)
    for _ in range(depth):
        if not brackets:
            break
        brackets = brackets.replace(b"[]", b"")
    return not brackets
