"""Reading a PIKE-style prompt without a model: which programs it quotes and what it allows.

Robust to wording: the prompt builders in ``pike_harness.kit.prompt_templates`` mark each prompt kind with a fixed
line, and those markers are used when present, but everything falls back to plain rules: the task's
reference is the last fenced block defining ``class Model`` (the worked example comes before it), the
program to improve or fix is a fenced block defining ``class ModelNew`` after it, the tolerance is read
from ``atol``/``rtol`` numbers, and reduced precision is used only when the text allows it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from pike_harness.api import code_fences, prompt_kinds, prompt_templates

DEFAULT_TOLERANCE = 1e-2
_DEFINES_MODEL = re.compile(r"^class\s+Model\s*[(:]", re.MULTILINE)
_DEFINES_MODEL_NEW = re.compile(r"^class\s+ModelNew\s*[(:]", re.MULTILINE)
_NUMBER = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"
_ATOL = re.compile(rf"\batol\s*[=:]?\s*{_NUMBER}")
_RTOL = re.compile(rf"\brtol\s*[=:]?\s*{_NUMBER}")
# "reduced precision is allowed down to bfloat16", "precision: fp16", "bf16 is allowed"
_HALF_ALLOWED = (
    re.compile(r"allowed down to (bfloat16|float16|bf16|fp16)\b", re.IGNORECASE),
    re.compile(r"\bprecision\s*[:=]\s*(bf16|fp16|bfloat16|float16)\b", re.IGNORECASE),
    re.compile(r"\b(bf16|fp16|bfloat16|float16)\b[^.\n;]{0,20}\b(?:is|are) allowed", re.IGNORECASE),
)
_HALF_NAMES = {"bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16"}
_FOCUS = re.compile(rf"^\s*{re.escape(prompt_templates.FOCUS_PREFIX)}\s*(.+)$", re.MULTILINE | re.IGNORECASE)
_MAX_IDEAS = re.compile(r"\b(?:up to|at most) (\d{1,3})\b", re.IGNORECASE)


@dataclass
class PromptInfo:
    """What a prompt says, as far as a program-rewriting stand-in needs to know."""

    kind: str | None  # "brainstorm" | "optimize" | "improve" | "fix" (prompt_kinds.prompt_kind), or None
    reference: str | None  # the task's source (defines Model)
    program: str | None  # the parent to improve or the failing program to fix
    atol: float = DEFAULT_TOLERANCE
    rtol: float = DEFAULT_TOLERANCE
    half: str | None = None  # "bf16" or "fp16" when the prompt allows reduced precision
    focus: str | None = None  # PIKE-B's brainstormed idea line
    max_ideas: int = 10


def parse_prompt(messages: Sequence[dict[str, str]]) -> PromptInfo:
    text = "\n\n".join(str(m.get("content", "")) for m in messages)
    blocks = code_fences.code_blocks(text)
    ref_index = max((i for i, b in enumerate(blocks) if defines_model(b) and not defines_model_new(b)),
                    default=None)
    reference = blocks[ref_index] if ref_index is not None else None
    program = prompt_kinds.quoted_program(list(messages))
    if program is None or not program.strip():
        after = blocks[ref_index + 1:] if ref_index is not None else blocks
        candidates = [b for b in after if defines_model_new(b)]
        program = candidates[-1] if candidates else None
    info = PromptInfo(kind=prompt_kinds.prompt_kind(list(messages)), reference=reference, program=program)
    if match := _ATOL.search(text):
        info.atol = float(match.group(1))
    if match := _RTOL.search(text):
        info.rtol = float(match.group(1))
    info.half = half_allowed(text)
    if match := _FOCUS.search(text):
        info.focus = match.group(1).strip()
    if match := _MAX_IDEAS.search(text):
        info.max_ideas = max(1, int(match.group(1)))
    return info


def defines_model(source: str) -> bool:
    return bool(_DEFINES_MODEL.search(source))


def defines_model_new(source: str) -> bool:
    return bool(_DEFINES_MODEL_NEW.search(source))


def half_allowed(text: str) -> str | None:
    """``"bf16"``/``"fp16"`` when the text permits that reduced precision, else None (the safe reading)."""
    for pattern in _HALF_ALLOWED:
        if match := pattern.search(text):
            return _HALF_NAMES[match.group(1).lower()]
    return None
