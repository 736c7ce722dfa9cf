"""Candidates with known verdicts and helpers for the Ray evaluator tests (see conftest.py)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pike_harness.contracts.model import EvalRequest, Limits
from pike_harness.host.tasks import load_suite

if TYPE_CHECKING:
    from ray_cluster import LoopbackCluster

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
SMOKE = load_suite(REPO / "tasks" / "smoke", origin="tests")
NO_RAY = "Ray is not installed (an optional extra): pip install 'pike-harness[ray]' to run these tests"


def ray_missing() -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec("ray") is None
    except (ImportError, ValueError):
        return True


OK = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        return torch.relu(self.linear(x))  # variant NONCE
"""

# Correct, and slow on the device (200 ms per call), so evaluations are still on a node when it dies.
SLOW_OK = OK.replace("return torch.relu", "import time; time.sleep(0.2); return torch.relu")
# Seconds per call: an evaluation of it cannot end in the moment between "running" and a cluster kill.
SLOWER_OK = OK.replace("return torch.relu", "import time; time.sleep(2.0); return torch.relu")
WRONG = OK.replace("torch.relu(self.linear(x))", "torch.relu(self.linear(x)) + 1.0")
RAISES = OK.replace("return torch.relu(self.linear(x))", "raise ValueError('bad launch')")
BROKEN = OK.replace("import torch\n", "import torch\nimport not_a_module_pikeh\n", 1)

# (source, expected category, expected check)
CANDIDATES = {
    "ok": (OK, "correct", None),
    "slow_ok": (SLOW_OK, "correct", None),
    "slower_ok": (SLOWER_OK, "correct", None),
    "wrong": (WRONG, "incorrect", "allclose"),
    "raises": (RAISES, "runtime_error", "forward"),
    "broken": (BROKEN, "compile_error", "load"),
}


@dataclass
class Case:
    name: str
    request: EvalRequest
    category: str
    check: str | None


def case(name: str, nonce: int = 0) -> Case:
    source, category, check = CANDIDATES[name]
    request = SMOKE.task(1).eval_request(source.replace("NONCE", str(nonce)),
                                         limits=Limits(compile_timeout_s=180, run_timeout_s=180, memory_mb=3000))
    return Case(name, request, category, check)


def wait_until(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def ready_devices(evaluator) -> list[dict]:
    return [d for d in evaluator.status().get("devices", []) if d.get("ready") and not d.get("dead")]


def leftovers(root: Path) -> list[int]:
    """Processes whose working directory is under ``root`` (a node folder: candidates, references)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry}/cwd").startswith(str(root)):
                    found.append(int(entry))
    return found


def kill_leftovers(root: Path) -> None:
    for pid in leftovers(root):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def ray_evaluator(cluster: LoopbackCluster, workdir: Path, devices: int, **extra):
    """A RayEvaluator on ``cluster`` (device cpu, quick protocol), once ``devices`` devices are ready."""
    from pikeh_ray import RayConfig
    from pikeh_ray.evaluator import RayEvaluator

    from pike_harness.contracts.evaluation import EvaluatorOptions

    options = {"ray_address": cluster.address, "ray_node_dir": str(cluster.root / "nodes"),
               "ray_build_cache": "off", **extra}
    evaluator = RayEvaluator(EvaluatorOptions(device="cpu", protocol="quick", workdir=workdir,
                                              config=RayConfig(**options)))
    wait_until(lambda: len(ready_devices(evaluator)) >= devices, 120, f"{devices} device actor(s)")
    return evaluator
