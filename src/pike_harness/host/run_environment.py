"""What run.json records about the machine a run ran on: timings are only comparable on one host."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from typing import Any

from pike_harness import __version__
from pike_harness.contracts.evaluation import Evaluator
from pike_harness.worker.environment import cpu_model


def environment_info(evaluator: Evaluator) -> dict[str, Any]:
    """Versions, host and devices, recorded in run.json: timings are only comparable on one host."""
    info: dict[str, Any] = {
        "pikeh": __version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "host": platform.node(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
    }
    try:
        import torch

        info["torch"] = torch.__version__
        info["cuda"] = torch.version.cuda  # None for a CPU build
    except ImportError:  # pragma: no cover - torch is a dependency
        info["torch"] = None
    try:  # the installed version, without importing triton (timings change with it)
        info["triton"] = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        info["triton"] = None
    described = evaluator.describe()
    info["evaluator"] = described
    info["gpu"] = described.get("gpu") or described.get("device_name")
    # How candidates were isolated (docs/evaluator.md): an engine in this process says; workers
    # elsewhere decide for themselves, and each result's ``isolation`` field records it.
    info["isolation"] = described.get("isolation") or "per worker: see each result's isolation field"
    return info
