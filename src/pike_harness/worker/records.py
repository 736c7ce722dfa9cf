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
from typing import Any, NoReturn

from pike_harness.worker import kinds, redaction, text_safety

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
# The longest any one string of a result may be: twice the 10,000-character output tails, the longest
# text the supervisor keeps on purpose. A candidate can make a reason, a check or a note megabytes
# long; each copy went into the journal (three of them), DuckDB (whose JSON reader stops at 16 MB a
# record, so one report failed for every run in it) and the next LLM prompt.
MAX_TEXT_CHARS = 20_000


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
class PairedSpec:
    """How a paired re-timing samples: alternating reference/candidate blocks until the 95% interval
    of the speedup is within ``target_halfwidth`` (relative), with at least ``min_pairs`` pairs, at most
    ``max_pairs``, and never longer than ``max_seconds`` of blocks (then the result says so)."""

    target_halfwidth: float = 0.02
    min_pairs: int = 5
    max_pairs: int = 60
    max_seconds: float = 60.0
    block_ms: float = 100.0  # the timed length of one block (each side), after its own short warm-up


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
    # Sets with secret seeds that only the timed loop shows, each in one uncounted call among the timed
    # calls (worker/inside/timing.py FreshCalls): a cache keyed on the input's content cannot replay them.
    # 0: none (PIKE's loop, which calls the same input every time).
    fresh_input_sets: int = 8
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
    # Paired re-timing (worker/paired_stats.py): after the candidate passes its checks, the worker also
    # loads the task's reference as an eager baseline in a process of its own and times the two in
    # alternating blocks until the speedup's interval is narrow enough; the outcome is
    # ``EvalResult.paired``. None: the ordinary timing only (what a search evaluates).
    paired: PairedSpec | None = None

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalRequest:
        _check_schema(data, "EvalRequest")
        data = dict(data)
        data["limits"] = Limits(**data.get("limits", {}))
        if data.get("paired"):
            data["paired"] = PairedSpec(**_known_fields(PairedSpec, data["paired"]))
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
class NoiseReport:
    """How quiet the host was around a timing: the noise canary and the CPU steal time.

    The canary is a fixed launch-bound probe (a few tiny kernels and a synchronize) timed by the
    candidate's process with the harness's own references just before and after its timing; the
    baseline is the device's recent canary median. Steal is the host's CPU steal time over the
    window, as a fraction of all CPU time (``/proc/stat``; None where the kernel does not report it)."""

    canary_before_ms: float | None = None
    canary_after_ms: float | None = None
    canary_baseline_ms: float | None = None  # the device's recent median; None until there is one
    steal_fraction: float | None = None
    redone: int = 0  # timings thrown away because the canary or steal was off, before this one
    flagged: str | None = None  # why this timing is noisy even so; None: quiet


NOISY_TIMING = "noisy_timing"  # the EvalResult flag of a timing whose NoiseReport is flagged


@dataclass
class PairedTiming:
    """The outcome of a paired re-timing (``EvalRequest.paired``): the candidate's speedup over the
    task's eager reference as the geometric mean of the blocks' paired ratios, with its 95% interval."""

    speedup: float
    ci_low: float
    ci_high: float
    pairs: list[list[float]] = field(default_factory=list)  # [reference_ms, candidate_ms] per pair, in order
    reference_ms: float | None = None  # geometric mean of the reference's blocks
    candidate_ms: float | None = None
    stop: str = ""  # "converged", "max_pairs" or "max_seconds"
    # How many independent pairs the interval counts: fewer than len(pairs) when successive ratios
    # move together (worker/paired_stats.py); None in results written before it was recorded.
    effective_pairs: float | None = None
    seconds: float = 0.0  # wall time of the blocks
    noise: NoiseReport | None = None  # canary and steal across the whole paired window
    flagged: str | None = None  # set when the interval is wider than the target, or the noise flagged it
    # Each block's window in order, as [side ("reference"/"candidate"), start_ns, end_ns] on the host's
    # CLOCK_MONOTONIC (system-wide): what the quiet rule (the other side stopped) can be checked against.
    windows: list[list[Any]] = field(default_factory=list)
    # The core both sides of each pair ran on, in order (``--paired-cores rotate``); empty when the
    # blocks ran where the scheduler put them.
    cores: list[int] = field(default_factory=list)


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
    noise: NoiseReport | None = None  # the canary and steal time around the timing (correct results)
    paired: PairedTiming | None = None  # only when the request asked for it (EvalRequest.paired)
    schema: int = SCHEMA_VERSION

    def __post_init__(self) -> None:
        """Every string of a result, nested parts included, is made safe wherever the result was made or
        read (a worker's supervisor, or the host receiving a remote worker's result, which a candidate
        may have written): no value of this process's secret variables stays in it (``redaction``), and
        no terminal control sequence or bidi mark (``text_safety``), and none longer than
        ``MAX_TEXT_CHARS``. A category outside ``CATEGORIES`` is a ``ValueError`` naming it (escaped as
        the rest)."""
        found = redaction.secret_values()
        for item in dataclasses.fields(self):
            setattr(self, item.name, text_safety.map_strings(
                getattr(self, item.name), lambda text: redaction.shown(text, found, MAX_TEXT_CHARS)))
        if self.category not in CATEGORIES:
            # A worker of another version, or a compromised one: no verdict the harness does not know
            # (it would count as neither a success nor a failure). A transport turns this ValueError
            # into its infrastructure error (``EvaluatorError``), never into a verdict.
            _refuse_category(self.category)

    @property
    def is_correct(self) -> bool:
        return self.category == CORRECT

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        """The result ``data`` holds. A remote worker's record (which a candidate may have written) is
        read here, so every field, nested parts included, must be of the kind its annotation says
        (``kinds.of_record``: no string or bool where a number belongs, no NaN or negative number, no
        null where none is allowed, no required field missing): else a ``ValueError`` naming the field,
        escaped as the unknown category is, which the transports turn into their infrastructure error.
        Fields this version does not know are dropped."""
        _check_schema(data, "EvalResult")
        if "category" in data and data["category"] not in CATEGORIES:
            # Named as the unknown category it is, whatever its kind, before any other field is read.
            _refuse_category(redaction.redact(data["category"], redaction.secret_values()))
        problem = kinds.problem(data, kinds.of_record(cls), "")
        if problem:
            shown = redaction.shown(problem, redaction.secret_values())[:300]
            raise ValueError(f"a result with a field of the wrong kind: {shown}")
        for index, output in enumerate(data.get("outputs", [])):
            if (output.get("max_abs_diff") is None) != (output.get("max_rel_diff") is None):
                # The supervisor measures both at once; what shows one shows the other.
                raise ValueError(f"a result with outputs[{index}] giving only one of max_abs_diff and max_rel_diff")
        data = dict(data)
        if data.get("runtime"):
            data["runtime"] = RuntimeStats(**_known_fields(RuntimeStats, data["runtime"]))
        data["outputs"] = [OutputCheck(**_known_fields(OutputCheck, o)) for o in data.get("outputs", [])]
        if data.get("noise"):
            data["noise"] = NoiseReport(**_known_fields(NoiseReport, data["noise"]))
        if data.get("paired"):
            paired = dict(data["paired"])
            if paired.get("noise"):
                paired["noise"] = NoiseReport(**_known_fields(NoiseReport, paired["noise"]))
            data["paired"] = PairedTiming(**_known_fields(PairedTiming, paired))
        return cls(**_known_fields(cls, data))

    @classmethod
    def from_json(cls, text: str) -> EvalResult:
        return cls.from_dict(json.loads(text))


def _refuse_category(category: Any) -> NoReturn:
    """The ``ValueError`` of a category outside ``CATEGORIES``, naming it escaped (the caller masked secrets)."""
    shown = text_safety.printable(str(category))[:100]
    raise ValueError(f"a result with the unknown category '{shown}' (not one of {', '.join(CATEGORIES)})")


def _check_schema(data: dict[str, Any], what: str) -> None:
    if type(data) is not dict:
        raise ValueError(f"{what} is {kinds.shown(data)}, not an object")
    schema = data.get("schema", SCHEMA_VERSION)
    if type(schema) is int and schema > SCHEMA_VERSION:
        raise ValueError(f"{what} has schema {schema}, newer than this worker's {SCHEMA_VERSION}: upgrade it")


def _known_fields(cls: type, data: dict[str, Any]) -> dict[str, Any]:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}
