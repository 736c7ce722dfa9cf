"""The global numeric flags (TF32, cuDNN) a task's precision implies, set identically on both sides.

A candidate may flip these at import to trade accuracy for speed (a published PIKE solution does),
and they are process-global, so the reference process and the candidate process both set them from
the task's precision before every measurement; what a candidate changes is undone before we time it
and noted in the result. torch only.
"""

from __future__ import annotations

from typing import Any

import torch

# precision -> (cuda.matmul.allow_tf32, cudnn.allow_tf32)
# "fp32" keeps PyTorch's shipped defaults, the conditions PIKE's paper measured under: matmuls in
# full fp32, cuDNN convolutions allowed TF32. Lower precisions allow TF32 everywhere; whatever a
# candidate does inside ModelNew (fp16, bf16) is judged by the task's tolerance.
FLAGS_BY_PRECISION: dict[str, tuple[bool, bool]] = {
    "fp32": (False, True),
    "tf32": (True, True),
    "bf16": (True, True),
    "fp16": (True, True),
}


def apply(precision: str) -> dict[str, Any]:
    """Set the flags for ``precision`` (and cudnn.benchmark off) through the legacy setters.

    torch >= 2.9 raises when the legacy and the new (``fp32_precision``) APIs are read after being
    mixed; setting through the legacy attributes resets both views consistently, whichever API a
    candidate used.
    """
    matmul, cudnn = FLAGS_BY_PRECISION.get(precision, FLAGS_BY_PRECISION["fp32"])
    torch.backends.cuda.matmul.allow_tf32 = matmul
    torch.backends.cudnn.allow_tf32 = cudnn
    torch.backends.cudnn.benchmark = False
    return current()


def current() -> dict[str, Any]:
    """The flags as they stand; "mixed" where a candidate left torch's two flag APIs disagreeing."""
    readers = {
        "cuda.matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
        "cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
        "cudnn.benchmark": lambda: torch.backends.cudnn.benchmark,
    }
    values: dict[str, Any] = {}
    for name, read in readers.items():
        try:
            values[name] = bool(read())
        except RuntimeError:
            values[name] = "mixed"
    return values
