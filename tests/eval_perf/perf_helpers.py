"""Candidates and requests for Evaluator II's tests (smoke-suite tasks, real sources)."""

from __future__ import annotations

import contextlib
import importlib
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

from pike_harness.contracts.model import Limits, Task
from pike_harness.host.tasks import load_suite

REPO = Path(__file__).resolve().parents[2]
SMOKE = load_suite(REPO / "tasks" / "smoke", origin="tests")
BENCH = REPO / "benchmarks"


@contextlib.contextmanager
def benchmark_module(name: str) -> Iterator[ModuleType]:
    """A module of ``benchmarks/`` (which import each other by bare name), with that folder on the path
    only while it is used."""
    sys.path.insert(0, str(BENCH))
    try:
        yield importlib.import_module(name)
    finally:
        sys.path.remove(str(BENCH))

PLAIN = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        return torch.relu(self.linear(x))
"""


def candidate(prelude: str = "", forward_extra: str = "") -> str:
    """smoke/1's computation as ModelNew, with code run at import and at each forward."""
    body = textwrap.dedent(PLAIN)
    if forward_extra:
        body = body.replace("        return torch.relu", f"        {forward_extra}\n        return torch.relu")
    return textwrap.dedent(prelude) + body


def solutions_folder(base: Path) -> Path:
    """``base/solutions`` holding ``task_1.py``, smoke/1's computation as ModelNew: what a diagnosis
    script's ``--solutions`` takes on its CPU path."""
    folder = base / "solutions"
    folder.mkdir()
    (folder / "task_1.py").write_text(candidate())
    return folder


def smoke(task_id: int = 1) -> Task:
    return SMOKE.task(task_id)


def request(source: str, task_id: int = 1, **overrides):
    limits = Limits(compile_timeout_s=120, run_timeout_s=120, memory_mb=6000)
    return smoke(task_id).eval_request(source, limits=limits, **overrides)
