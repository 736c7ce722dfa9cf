"""Shared pieces of the evaluator benchmarks (bench_overhead, bench_noise, bench_throughput).

Each benchmark builds real ``local`` evaluators from the source tree (no install needed:
``PYTHONPATH=src:plugins``), submits real candidates, and writes ``<name>.json`` (everything
measured) and ``<name>.md`` (a fragment for docs/performance.md) into ``--out`` (default ``$OUT``).
Configurations compared side by side in one run:

* ``ours``: the defaults (CPU slots, pre-started processes, build cache, quiet timing, pinning);
* ``no-prestart``: the same without pre-started processes;
* ``pike-like``: compile and time one candidate at a time, each in a fresh process, no build cache
  (what PIKE's own evaluator does).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# PIKE-B's published best programs for level3-pike (task_N.py), the fidelity benchmarks' solutions. The
# project does not ship them: a developer puts a copy in this git-ignored folder of the checkout, and a
# GPU call carries it.
PIKE_B_SOLUTIONS = REPO / ".fidelity" / "pike-b-level3"
for path in (REPO / "src", REPO / "plugins"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from pike_harness.contracts.model import Limits, Task  # noqa: E402
from pike_harness.contracts.suite import Suite  # noqa: E402
from pike_harness.host.tasks import load_suite  # noqa: E402
from pike_harness.kit.short_text import shorten  # noqa: E402
from pike_harness.worker.text_safety import printable  # noqa: E402

CONFIGS: dict[str, dict[str, Any]] = {
    "ours": {},
    "no-prestart": {"prestart": 0},
    "pike-like": {"jobs": 1, "max_ready": 0, "prestart": 0, "build_cache": "off", "jit_cache": "private",
                  "quiet_timing": False, "pin_cpus": False, "prewarm": "off"},
    "unsandboxed": {"unsafe_no_sandbox": True},
    "no-prestart-unsandboxed": {"prestart": 0, "unsafe_no_sandbox": True},
}

TRIVIAL = """
import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)

    def forward(self, x):
        return torch.relu(self.linear(x))
"""

# smoke/5 (GELU) with a one-kernel CUDA extension: the build PIKE's measurements describe.
INLINE_CUDA = r'''
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SOURCE = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
// variant NONCE
__global__ void gelu_kernel(const float* x, float* y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) {
        float v = x[i];
        y[i] = 0.5f * v * (1.0f + erff(v * 0.70710678118654752f));
    }
}

torch::Tensor gelu_cuda(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    int64_t n = xc.numel();
    int threads = 256;
    int blocks = (int)((n + threads - 1) / threads);
    gelu_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
CPP_SOURCE = "torch::Tensor gelu_cuda(torch::Tensor x);"

_ext = load_inline(name="pikeh_bench_gelu", cpp_sources=CPP_SOURCE, cuda_sources=CUDA_SOURCE,
                   functions=["gelu_cuda"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.gelu_cuda(x)
'''

# The same on the CPU: a C++ extension built against torch's headers (a real, slow build).
INLINE_CPP = r'''
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CPP_SOURCE = r"""
// variant NONCE
torch::Tensor gelu_cpu(torch::Tensor x) { return torch::gelu(x); }
"""

_ext = load_inline(name="pikeh_bench_gelu_cpu", cpp_sources=CPP_SOURCE, functions=["gelu_cpu"], verbose=False)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.gelu_cpu(x)
'''

# For smoke checks on small machines: a library without torch's headers (builds in about a second).
INLINE_TINY = r'''
import ctypes

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

_lib = load_inline(name="pikeh_bench_tiny", cpp_sources=['extern "C" int one() { return 1; } // NONCE'],
                   no_implicit_headers=True, is_python_module=False)
ONE = ctypes.CDLL(_lib).one()


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.nn.functional.gelu(x) * ONE
'''

# Not load_inline: a torch.compile candidate (smoke/5's GELU in a small MLP-like chain), compiled cold
# (a fresh source has its own JIT cache). A compile load where ninja is missing, and a check of the
# warm-up in phase 1 under quiet timing.
COMPILE = r'''
import torch
import torch.nn as nn

_variant = "NONCE"


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.fn = torch.compile(self._forward)

    @staticmethod
    def _forward(x):
        y = torch.nn.functional.gelu(x)
        return y + 0.0 * torch.tanh(x) * torch.sigmoid(x)

    def forward(self, x):
        return self.fn(x)
'''

INLINE_KINDS = {"cuda": INLINE_CUDA, "cpp": INLINE_CPP, "tiny": INLINE_TINY, "compile": COMPILE}


class JsonlState:
    """A resumable benchmark's finished measurements: one JSON line each in ``folder/name``, read once,
    appended and fsynced as each ends (a device call cut mid-way loses at most the line being written,
    whose measurement then runs again)."""

    def __init__(self, folder: Path, name: str):
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / name
        self.rows: dict[str, dict[str, Any]] = {}
        if self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:  # a line cut by a kill: measured again
                    continue
                self.rows[row["key"]] = row

    def done(self, key: str) -> bool:
        return key in self.rows

    def add(self, row: dict[str, Any]) -> None:
        row = {**row, "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        self.rows[row["key"]] = row
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(row, sort_keys=True, default=str) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def get(self, key: str) -> dict[str, Any] | None:
        return self.rows.get(key)


def have_ninja() -> bool:
    """torch's JIT extensions (load_inline) need ninja."""
    try:
        from torch.utils.cpp_extension import is_ninja_available

        return bool(is_ninja_available())
    except Exception:
        return False


def suite(name: str) -> Suite:
    return load_suite(REPO / "tasks" / name, origin="benchmarks")


def task(ref: str) -> Task:
    name, _, task_id = ref.rpartition("/")
    return suite(name).task(int(task_id))


def inline_source(kind: str, nonce: str) -> str:
    return INLINE_KINDS[kind].replace("NONCE", nonce)


def fresh_nonce() -> str:
    """A token that makes a source (and so its build) new to every cache."""
    return secrets.token_hex(8)


def request(task_obj: Task, source: str, **overrides: Any):
    limits = Limits(compile_timeout_s=900, run_timeout_s=600)
    return task_obj.eval_request(source, limits=limits, **overrides)


def make_evaluator(config: str, device: str, protocol: str, workdir: Path, cache: Path | None,
                   protocol_params: dict[str, Any] | None = None, **extra: Any):
    """A real LocalEvaluator in one of CONFIGS, with its build cache in ``cache`` (``protocol_params``:
    the protocol's overrides, e.g. pike's warm-up and repetition budgets)."""
    from pikeh_local import LocalEvaluator

    from pike_harness.contracts.evaluation import EvaluatorOptions

    options = {**extra, **CONFIGS[config]}
    if options.get("build_cache") != "off":
        options["build_cache"] = str(cache) if cache is not None else "off"
    workdir.mkdir(parents=True, exist_ok=True)
    return LocalEvaluator(EvaluatorOptions(device=device, protocol=protocol, protocol_params=protocol_params or {},
                                           workdir=workdir, config=LocalEvaluator.Config(**options)))


def default_device() -> str:
    import torch

    return "cuda:0" if torch.cuda.is_available() else "cpu"


def arguments(description: str, budget_s: float) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "bench-out"),
                        help="Folder for <name>.json and <name>.md (default: $OUT, else ./bench-out).")
    parser.add_argument("--device", default=None, help="cpu or cuda:N (default: cuda:0 if available).")
    parser.add_argument("--protocol", default=None, help="Timing protocol (each benchmark has a default).")
    parser.add_argument("--budget-s", type=float, default=budget_s,
                        help=f"Hard time cap in seconds; partial results are written (default {budget_s:g}).")
    parser.add_argument("--workdir", type=Path, default=None, help="Scratch folder (default: a temporary one).")
    parser.add_argument("--jobs", type=int, default=None, help="CPU slots of the evaluators (default: theirs).")
    return parser


def extra_options(args: argparse.Namespace) -> dict[str, Any]:
    """Evaluator options given on the benchmark's command line (the configuration's own win)."""
    return {"jobs": args.jobs} if args.jobs else {}


def workdir(args: argparse.Namespace, name: str) -> Path:
    base = args.workdir or Path(tempfile.mkdtemp(prefix=f"pikeh-{name}-"))
    base.mkdir(parents=True, exist_ok=True)
    return base


class Budget:
    """Seconds left before the benchmark's hard cap."""

    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def over(self, margin: float = 0.0) -> bool:
        return self.left() < margin


def spread(values: list[float | None]) -> float | None:
    """Largest over smallest of the values given (1.0: they agree); None with fewer than two."""
    found = [v for v in values if v]
    return max(found) / min(found) if len(found) >= 2 else None


def summary(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    mean = statistics.fmean(values)
    stdev = statistics.stdev(values) if len(values) > 1 else 0.0
    return {"n": len(values), "mean": mean, "median": statistics.median(values), "min": min(values),
            "max": max(values), "stdev": stdev, "cv": stdev / mean if mean else None}


def environment_of(results: list[Any]) -> dict[str, Any]:
    """Host, GPU and versions as the worker recorded them with a result."""
    keys = ("host", "cpu", "cpu_count", "gpu", "gpu_capability", "driver", "torch", "cuda", "triton", "python")
    for result in results:
        env = getattr(result, "environment", None) or {}
        if env.get("torch"):
            return {key: env.get(key) for key in keys}
    return {}


def write(out: Path, name: str, payload: dict[str, Any], markdown: str) -> None:
    out.mkdir(parents=True, exist_ok=True)
    payload = {"benchmark": name, "date": time.strftime("%Y-%m-%d %H:%M:%S %z"), **payload}
    (out / f"{name}.json").write_text(json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")
    (out / f"{name}.md").write_text(markdown.rstrip() + "\n")
    print(markdown)
    print(f"[{name}] wrote {out / (name + '.json')} and {out / (name + '.md')}", flush=True)


CELL_LIMIT = 120  # characters of free text in one markdown table cell


def md_cell(value: Any, limit: int = CELL_LIMIT) -> str:
    """``value`` as one markdown table cell: on one line, its ``|`` escaped, cut to ``limit`` characters.

    A verdict's check name and a file name come from candidates and the tree they were read from: a ``|``
    or a newline in one would split the row or end the table in the report a reader trusts."""
    text = " ".join(printable(str(value)).split())
    return shorten(text, limit).replace("\\", "\\\\").replace("|", "\\|")


def fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def env_line(env: dict[str, Any]) -> str:
    return (f"{env.get('gpu') or env.get('cpu')} on {env.get('host')} ({env.get('cpu')}, {env.get('cpu_count')} cores); "
            f"torch {env.get('torch')}, CUDA {env.get('cuda')}, Triton {env.get('triton')}, driver {env.get('driver')}")


# -- a diagnosis that times in fresh processes of its own script (``--inner SPEC``) --------------------
def diagnosis_arguments(doc: str, solutions_help: str) -> argparse.ArgumentParser:
    """What every per-process diagnosis takes: the hidden ``--inner`` (the process's spec as JSON),
    ``--out``, ``--device``, ``--suite`` and ``--solutions``."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--inner", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "bench-out"))
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--suite", default="level3-pike")
    parser.add_argument("--solutions", type=Path, required=False, help=solutions_help)
    return parser


def run_inner(script: str, spec: dict[str, Any], mark: str, timeout_s: float) -> dict[str, Any]:
    """Run ``script --inner SPEC`` in a fresh process (the benchmarks and the sources on its path) and
    return the JSON it printed after ``mark``, or ``{"error": ...}`` (a timeout, or no such line)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(REPO / "benchmarks"), str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    try:
        proc = subprocess.run([sys.executable, script, "--inner", json.dumps(spec)], capture_output=True, text=True,
                              timeout=timeout_s, env=env, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout_s:.0f} s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith(mark)]
    if not lines:
        return {"error": f"exit {proc.returncode}: {proc.stderr[-1500:]}"}
    return dict(json.loads(lines[-1][len(mark):]))
