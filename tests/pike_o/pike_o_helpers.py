"""Small builders shared by the PIKE-O unit tests: verdicts and databases filled by hand."""

from __future__ import annotations

from pikeh_pike_o.config import PikeOConfig
from pikeh_pike_o.database import ProgramDatabase

from pike_harness.api import EvalResult

REFERENCE_CODE = "import torch\n\n\nclass Model(torch.nn.Module):\n    pass\n"


def ok(runtime_ms: float) -> EvalResult:
    return EvalResult(request_id="r", task="t/1", category="correct", runtime_ms=runtime_ms)


def bad(category: str = "compile_error") -> EvalResult:
    return EvalResult(request_id="r", task="t/1", category=category, reason=f"scripted {category}")


def code(name: str, length: int = 0) -> str:
    """A distinct program; ``length`` pads it, to move it along the complexity axis."""
    return f"class ModelNew:\n    tag = {name!r}\n" + "# pad\n" * length


def database(**overrides) -> ProgramDatabase:
    return ProgramDatabase(PikeOConfig(**overrides))
