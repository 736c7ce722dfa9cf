"""``offline:mutate``: answers each agent role sensibly without a model, for the demo and tests.

Not an LLM, and it says so (``is_llm=False``, "(not an LLM)" in every reply). It reads the programs
quoted in the prompt and answers with real programs built by ``catalogue``:

- ``brainstorm``: up to N idea bullet lines chosen from what the reference contains.
- ``optimize``: a full ``ModelNew`` program applying one or two catalogue transformations to the
  reference (or, when the prompt quotes a previous solution, that solution's transformations plus one
  more); a share of answers (``broken_rate``, default 25%) is deliberately broken (syntax error,
  runtime error or wrong output) so the error-fixing path gets exercised.
- ``fix``: a working program: the quoted program without its deliberate breakage, or without its risky
  transformations, or the plain reference when the program is not one of ours.

Deterministic: the choices come from a hash of the messages, ``params.seed`` and ``request.key``.
Identical prompts without a key (PIKE-B asks one parent for several children with one prompt) get
successive variants: the n-th identical request seen by this backend gets variant n.

Usage is counted as characters / 4 ("tokens" for plots, not a tokenizer's count); the cost is 0.
Options (``BackendOptions.extra``): ``mutate_broken_rate`` (0..1, default 0.25) and
``mutate_compile_rate`` (0..1, default 0.1: the share of answers that add torch.compile, kept small
because building a compiled model takes many seconds on a CPU).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import threading
import time

from pike_harness.api import (
    BRAINSTORM,
    FIX,
    BackendOptions,
    LLMBackend,
    LLMRequest,
    LLMResponse,
    Usage,
    UserError,
)
from pikeh_offline import catalogue
from pikeh_offline.catalogue import BREAKS, RISKY, Features
from pikeh_offline.prompt import PromptInfo, parse_prompt

DEFAULT_BROKEN_RATE = 0.25
DEFAULT_COMPILE_RATE = 0.1
NOT_AN_LLM = "offline:mutate (not an LLM)"

# Ideas that do not map to a transformation but read like a brainstorm (the code agent is not bound
# by them; with mutate they pick variants through their hash).
_GENERAL_IDEAS = (
    "Capture the whole forward pass in a CUDA graph to remove kernel launch overhead.",
    "Fuse the elementwise operators into the kernel that produces their input.",
    "Avoid redundant copies: skip .contiguous() and transposes that the next kernel does not need.",
    "Use vectorized 128-bit loads and stores in the memory-bound kernels.",
    "Choose tile sizes per layer shape instead of one configuration for all.",
)
_FEATURE_IDEAS = (
    ("Linear", "Fuse the matrix multiply, bias add and activation into one kernel epilogue."),
    ("softmax", "Write a one-pass online softmax that keeps the running max and sum in registers."),
    ("LayerNorm", "Compute LayerNorm statistics in one pass with Welford's algorithm, one row per block."),
    ("gelu", "Use a vectorized GELU kernel that computes erf in float32 registers."),
    ("Conv2d", "Implement the convolution as an implicit GEMM so it runs on tensor cores."),
)


class MutateBackend(LLMBackend):
    provider = "offline"
    is_llm = False
    costs_known = True  # free

    def __init__(self, model: str, options: BackendOptions):
        super().__init__(model, options)
        extra = options.extra or {}
        self.broken_rate = float(extra.get("mutate_broken_rate", DEFAULT_BROKEN_RATE))
        self.compile_rate = float(extra.get("mutate_compile_rate", DEFAULT_COMPILE_RATE))
        for name, rate in (("mutate_broken_rate", self.broken_rate), ("mutate_compile_rate", self.compile_rate)):
            if not 0.0 <= rate <= 1.0:
                raise UserError(f"{name} must be between 0 and 1")
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()

    def complete(self, request: LLMRequest) -> LLMResponse:
        started = time.monotonic()
        rng = random.Random(self._seed(request))
        info = parse_prompt(request.messages)
        if request.role == BRAINSTORM or (info.kind == "brainstorm" and request.role not in (FIX,)):
            text = brainstorm_text(info, rng)
        elif request.role == FIX:
            text = fix_text(info)
        else:
            text = optimize_text(info, rng, broken_rate=self.broken_rate, compile_rate=self.compile_rate)
        prompt_chars = sum(len(str(m.get("content", ""))) for m in request.messages)
        return LLMResponse(
            text=text,
            usage=Usage(prompt_tokens=math.ceil(prompt_chars / 4), output_tokens=math.ceil(len(text) / 4)),
            latency_s=time.monotonic() - started, provider=self.provider, model=self.model,
            model_id=NOT_AN_LLM, cost_usd=0.0, cost_source="free", finish_reason="stop",
            truncated=False, empty=not text.strip(), is_llm=False,
        )

    def _seed(self, request: LLMRequest) -> int:
        material = json.dumps({"messages": request.messages, "seed": request.params.seed, "role": request.role},
                              sort_keys=True)
        digest = hashlib.sha256(material.encode()).hexdigest()
        if request.key is not None:
            variant = request.key
        else:
            with self._lock:
                occurrence = self._seen.get(digest, 0)
                self._seen[digest] = occurrence + 1
            variant = str(occurrence)
        return int(hashlib.sha256(f"{digest}/{variant}".encode()).hexdigest()[:16], 16)


# -- the three roles -------------------------------------------------------------------------------

def brainstorm_text(info: PromptInfo, rng: random.Random) -> str:
    features = Features.of(info.reference or "", info.half)
    ideas = [t.idea for t in catalogue.applicable(features) if t.effect != "slower"]
    source = info.reference or ""
    ideas += [idea for word, idea in _FEATURE_IDEAS if word.lower() in source.lower()]
    ideas += list(_GENERAL_IDEAS)
    rng.shuffle(ideas)
    lines = [f"- {idea}" for idea in ideas[: info.max_ideas]]
    return f"{NOT_AN_LLM}: ideas chosen from what the reference contains.\n\n" + "\n".join(lines) + "\n"


def optimize_text(info: PromptInfo, rng: random.Random, *, broken_rate: float,
                  compile_rate: float = DEFAULT_COMPILE_RATE) -> str:
    if not info.reference:
        return (f"{NOT_AN_LLM}: the prompt quotes no reference program (a fenced code block defining "
                "`class Model`), so there is nothing to transform.\n")
    features = Features.of(info.reference, info.half)
    choices = catalogue.applicable(features, allow_compile=False)  # compile is added below, rarely
    parent = catalogue.read_marker(info.program) if info.program else None
    focus = _focus_transform(info.focus, choices)
    if parent is not None:
        transforms = _evolve(parent[0], choices, rng, focus)
        origin = "the previous solution's transformations, evolved"
    else:
        transforms = _fresh(choices, rng, focus)
        origin = "the task's reference"
    if rng.random() < compile_rate:
        transforms = catalogue.canonical((*transforms, "compile"))
    base, base_class = _base(info)
    if base is None:
        return f"{NOT_AN_LLM}: the reference program does not parse, so there is nothing to transform.\n"
    if info.program and parent is None and base_class == catalogue.PARENT_CLASS:
        origin = "the previous solution (wrapped)"
    broken = rng.choice(BREAKS) if rng.random() < broken_rate else None
    program = catalogue.build_program(base, base_class, transforms, broken=broken, half=info.half, origin=origin)
    summary = ", ".join(transforms) or "no transformation"
    return f"{NOT_AN_LLM} applied: {summary}.\n\n```python\n{program}```\n"


def fix_text(info: PromptInfo) -> str:
    if not info.reference:
        return (f"{NOT_AN_LLM}: the prompt quotes no reference program (a fenced code block defining "
                "`class Model`), so there is nothing to fix.\n")
    base = _safe_parse(catalogue.base_from_reference, info.reference)
    if base is None:
        return f"{NOT_AN_LLM}: the reference program does not parse, so there is nothing to fix.\n"
    marker = catalogue.read_marker(info.program) if info.program else None
    if marker is None:
        transforms: tuple[str, ...] = ("inference_mode",)
        how = "rewrote the program from the reference (inference mode only)"
    else:
        transforms, broken = marker
        if broken:
            how = f"removed the {broken.replace('_', ' ')}"
        else:
            risky = [t for t in transforms if t in RISKY]
            drop = risky[-1] if risky else (transforms[-1] if transforms else None)
            transforms = tuple(t for t in transforms if t != drop)
            how = f"dropped {drop}" if drop else "kept the plain reference"
    program = catalogue.build_program(base, catalogue.REFERENCE_CLASS, transforms, half=info.half,
                                      origin="the task's reference (fixed)")
    return f"{NOT_AN_LLM} {how}.\n\n```python\n{program}```\n"


# -- choosing transformations -------------------------------------------------------------------

def _weighted_pick(options: list[catalogue.Transform], rng: random.Random) -> catalogue.Transform:
    return rng.choices(options, weights=[t.weight for t in options], k=1)[0]


def _fresh(choices: list[catalogue.Transform], rng: random.Random, focus: str | None) -> tuple[str, ...]:
    picked: set[str] = {focus} if focus else set()
    want = rng.choice((1, 2))
    while len(picked) < want:
        left = [t for t in choices if t.name not in picked]
        if not left:
            break
        picked.add(_weighted_pick(left, rng).name)
    return catalogue.canonical(picked)


def _evolve(parent: tuple[str, ...], choices: list[catalogue.Transform], rng: random.Random,
            focus: str | None) -> tuple[str, ...]:
    current = {t for t in parent if t in {c.name for c in choices}}
    kept = {"compile"} & set(parent)  # not among the choices (added by rate), but kept once present
    left = [t for t in choices if t.name not in current]
    roll = rng.random()
    if left and (roll < 0.6 or not current):
        current.add(focus if focus in {t.name for t in left} else _weighted_pick(left, rng).name)
    elif current and roll < 0.8 and left:
        current.discard(rng.choice(sorted(current)))
        current.add(_weighted_pick(left, rng).name)
    elif len(current) > 1:
        current.discard(rng.choice(sorted(current)))
    elif left:  # a single transformation cannot be dropped: an improvement always changes something
        current.add(_weighted_pick(left, rng).name)
    return catalogue.canonical(current | kept)


def _focus_transform(focus: str | None, choices: list[catalogue.Transform]) -> str | None:
    """The transformation a brainstormed idea asks for, when its words name one."""
    if not focus:
        return None
    words = focus.lower()
    for transform in choices:
        if any(keyword in words for keyword in transform.keywords):
            return transform.name
    return None


def _base(info: PromptInfo) -> tuple[str | None, str]:
    """The source the new ModelNew wraps: the reference, or a foreign previous solution."""
    if info.program and catalogue.read_marker(info.program) is None and "ModelNew" in info.program:
        wrapped = _safe_parse(catalogue.base_from_program, info.program)
        if wrapped is not None:
            return wrapped, catalogue.PARENT_CLASS
    return _safe_parse(catalogue.base_from_reference, info.reference or ""), catalogue.REFERENCE_CLASS


def _safe_parse(convert, source: str) -> str | None:
    try:
        return convert(source)
    except SyntaxError:
        return None
