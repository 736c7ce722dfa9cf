"""What run.json records about the machine a run ran on: timings are only comparable on one host."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import platform
import sys
from pathlib import Path
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
    info["torch"], info["cuda"] = torch_build()
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


def torch_build() -> tuple[str | None, str | None]:
    """torch's version and the CUDA it was built for (None on a CPU build), read from torch's own
    ``torch/version.py`` without importing torch: a host whose candidates run elsewhere (a queue, Ray,
    a container) or on a fake evaluator never needs torch, and importing it costs seconds of CPU."""
    loaded = sys.modules.get("torch")
    if loaded is not None:
        return loaded.__version__, loaded.version.cuda
    spec = importlib.util.find_spec("torch")  # finds the package without running its __init__
    if spec is None or not spec.submodule_search_locations:  # pragma: no cover - torch is a dependency
        return None, None
    names: dict[str, Any] = {}
    version_file = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    exec(compile(version_file.read_text(), str(version_file), "exec"), names)  # assignments only
    return names.get("__version__"), names.get("cuda")
