"""The evaluation wire format: one request in, one result out, both plain JSON with a schema version.

The same records travel through the local evaluator, a container, a shared-directory queue and Ray,
so they hold everything an evaluation needs (sources, tolerances, protocol, limits) and nothing that
ties them to a suite or a run store. Standard library only: this module is imported on GPU hosts.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from pike_harness.worker import redaction

SCHEMA_VERSION = 1

# The verdicts a candidate can get. PIKE folds the first three into "error".
COMPILE_ERROR = "compile_error"
RUNTIME_ERROR = "runtime_error"
TIMEOUT = "timeout"
INCORRECT = "incorrect"
REJECTED = "rejected"
CORRECT = "correct"
CATEGORIES = (COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT, INCORRECT, REJECTED, CORRECT)
# What a device (not host) out-of-memory error says: torch's caching allocator, or a CUDA call made directly
DEVICE_OOM_MARKS = ("OutOfMemoryError", "CUDA out of memory", "cudaErrorMemoryAllocation")
ERROR_CATEGORIES = (COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT)


@dataclass
class Limits:
    """Resource limits for one candidate's process group; each stage has its own hard wall clock."""

    compile_timeout_s: float = 900.0
    run_timeout_s: float = 600.0
    memory_mb: int | None = None  # None: the evaluator picks a share of the host's memory
    file_size_mb: int = 16384  # the checked calls' outputs pass through one file: 5 calls of ~1 GB for level3 task 6
    max_processes: int = 256
    # Threads of all the candidate's processes together: a thread bomb would otherwise exhaust the
    # host's pids (32,768 on many kernels) between two policing rounds' verdicts.
    max_threads: int = 1024
    # Disk held by its scratch and exchange folders together (many files, each under file_size_mb).
    disk_mb: int = 32768


@dataclass
class EvalRequest:
    """Everything a worker needs to check and time one candidate for one task."""

    task: str  # "suite/id", a label only
    reference_source: str
    candidate_source: str
    atol: float = 1e-2
    rtol: float = 1e-2
    # What the task allows candidates to use; the worker sets TF32 flags identically for both sides.
    precision: str = "fp32"
    protocol: str = "robust"
    protocol_params: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"  # "cpu", "cuda" or "cuda:N" as the evaluator assigned it
    weight_seed: int = 1  # PIKE seeds weights with 1 before constructing each model
    input_seeds: list[int] = field(default_factory=lambda: [0])  # public seeds (PIKE uses 0)
    hidden_input_sets: int = 2  # extra sets with secret seeds, revealed only after the candidate loads
    limits: Limits = field(default_factory=Limits)
    request_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    schema: int = SCHEMA_VERSION
    # Baselines only (`pikeh baselines`): how the worker runs the (trusted) reference given as the
    # candidate: "eager", "compile", "compile-max-autotune", "cudagraphs" or "tensorrt" (see
    # worker/inside/baseline_modes.py). None for candidates. The mode is applied by the worker, so the
    # source stays the task's own and passes the candidate checks unchanged.
    baseline_mode: str | None = None
    # `pikeh profile` / `pikeh report --profile-best`: after a correct timing, run a few calls under
    # torch.profiler in the same process (worker/inside/profiling.py); the summary lands in
    # EvalResult.profile. Never affects the verdict or the runtime.
    profile: bool = False

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalRequest:
        _check_schema(data, "EvalRequest")
        data = dict(data)
        data["limits"] = Limits(**data.get("limits", {}))
        return cls(**_known_fields(cls, data))

    @classmethod
    def from_json(cls, text: str) -> EvalRequest:
        return cls.from_dict(json.loads(text))


@dataclass
class OutputCheck:
    """How one output of one input set compared with the reference."""

    input_set: int
    index: int
    shape: list[int] | None = None
    dtype: str | None = None
    max_abs_diff: float | None = None
    max_rel_diff: float | None = None
    ok: bool = False
    problem: str | None = None


@dataclass
class RuntimeStats:
    """Every statistic of a timed run; ``headline_ms`` is the protocol's chosen one."""

    headline_ms: float
    statistic: str  # which statistic the headline is ("mean" for pike, "median" for robust)
    mean_ms: float
    median_ms: float
    min_ms: float
    max_ms: float
    stdev_ms: float
    cv: float  # stdev / mean
    iqr_ms: float
    n: int
    host_wall_ms: float  # host clock across the timed loop, for the cross-check


@dataclass
class EvalResult:
    """The verdict on one candidate. ``category`` is one of CATEGORIES."""

    request_id: str
    task: str
    category: str
    reason: str | None = None  # the failing check or an error summary
    check: str | None = None  # machine name of the check that rejected or failed it
    runtime_ms: float | None = None  # the protocol's headline statistic, only when correct
    runtime: RuntimeStats | None = None
    outputs: list[OutputCheck] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)  # notes that do not decide the verdict
    stage_seconds: dict[str, float] = field(default_factory=dict)
    stdout_tail: str = ""
    stderr_tail: str = ""
    protocol: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    seeds: dict[str, Any] = field(default_factory=dict)
    isolation: str = ""  # how the candidate was isolated: "bwrap", "none (--unsafe-no-sandbox)", ...
    profile: dict[str, Any] | None = None  # only when the request asked for one (worker/inside/profiling.py)
    schema: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        """No value of this process's secret variables stays in a result, wherever it was made or read
        (a worker's supervisor, or the host receiving a remote worker's result): see ``redaction``."""
        found = redaction.secret_values()
        if not found:
            return
        self.reason = redaction.redact(self.reason, found)
        self.stdout_tail = redaction.redact(self.stdout_tail, found)
        self.stderr_tail = redaction.redact(self.stderr_tail, found)
        self.flags = redaction.redact(self.flags, found)
        self.environment = redaction.redact(self.environment, found)
        self.profile = redaction.redact(self.profile, found)
        for check in self.outputs:
            if isinstance(check, OutputCheck):
                check.problem = redaction.redact(check.problem, found)

    @property
    def is_correct(self) -> bool:
        return self.category == CORRECT

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        _check_schema(data, "EvalResult")
        data = dict(data)
        if data.get("runtime"):
            data["runtime"] = RuntimeStats(**data["runtime"])
        data["outputs"] = [OutputCheck(**o) for o in data.get("outputs", [])]
        return cls(**_known_fields(cls, data))

    @classmethod
    def from_json(cls, text: str) -> EvalResult:
        return cls.from_dict(json.loads(text))


def _check_schema(data: dict[str, Any], what: str) -> None:
    schema = data.get("schema", SCHEMA_VERSION)
    if schema > SCHEMA_VERSION:
        raise ValueError(f"{what} has schema {schema}, newer than this worker's {SCHEMA_VERSION}: upgrade it")


def _known_fields(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}
