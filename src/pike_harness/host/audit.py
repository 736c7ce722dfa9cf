"""Task audit: is each reference a benchmark whose correctness check can be trusted?

A reference can be "correct" in a way that makes the check useless: outputs so small that any
near-zero answer passes ``allclose``, outputs that do not change with the input (so a candidate may
return a constant), non-finite or non-deterministic outputs. The audit runs each reference the way
the evaluator does (``pike_harness.worker.inside.loading``: inputs seeded with 0, weights with 1, ``.eval()``,
``no_grad``) and measures exactly those things.

Two depths:

- ``check_task``: build the model and run ``forward`` on the ``meta`` device (falling back to fake
  tensors), which costs no memory and no arithmetic, and compare parameter count and shapes with the
  expectations recorded in ``suite.toml``. All of level3-pike in about a second.
- ``audit_task``: run the reference for real on CPU or CUDA: shapes, magnitude against the task's
  tolerances, sensitivity to the input seed and to the weight seed, finiteness, determinism across
  a rebuild and a repeated call, parameter count and a rough eager runtime.

The records and their rendering (rich table, JSON, markdown) live in ``pike_harness.host.audit_report``.
"""

from __future__ import annotations

import contextlib
import gc
import math
import os
import platform
import statistics
import sys
import time
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import torch

from pike_harness.contracts.model import Task
from pike_harness.host.audit_report import (
    CONSTANT_PASSES,
    EXPECTATION_MISMATCH,
    INPUT_INSENSITIVE,
    NEAR_ZERO,
    NONDETERMINISTIC,
    NONFINITE,
    WEIGHT_INSENSITIVE,
    AuditEnvironment,
    AuditReport,
    Finding,
    TaskAudit,
    TaskCheck,
)
from pike_harness.worker.environment import cpu_model, driver_version
from pike_harness.worker.inside.loading import (
    build_model,
    init_inputs,
    load_source,
    make_inputs,
    model_class,
    module_name_for,
    to_device,
)

# PIKE's seeds (inputs 0, weights 1) and the alternatives that must change the output.
INPUT_SEED = 0
ALT_INPUT_SEED = 1
WEIGHT_SEED = 1
ALT_WEIGHT_SEED = 2

# A reference is judged by its own ``Model``: a task file's ``ModelNew``, if any, is not the reference.
REFERENCE_CLASS = ("Model",)

# Keys a suite may set under [tasks.N] (they arrive in TaskMeta.extra).
EXPECT_PARAMS = "params"
EXPECT_OUTPUT_SHAPE = "output_shape"
EXPECT_INPUT_SHAPES = "input_shapes"
KNOWN_FINDINGS = "audit_known"
RECORDED_EAGER_MS = "eager_ms_h100"

# Above this many times atol/rtol, atol is negligible for a typical element: only rtol decides.
LARGE_MAGNITUDE_FACTOR = 1e3
# Report (as a note) outputs where at least this share of elements would accept a zero.
PARTIAL_ZERO_NOTE = 0.5


@dataclass
class AuditOptions:
    """How hard the audit works per task; the defaults follow the facts' measurement (3 + 10 calls)."""

    device: str = "cpu"
    warmup: int = 3
    reps: int = 10
    time_budget_s: float = 5.0  # stop timing early once this much was spent (after one timed call)


# --------------------------------------------------------------------------------------------------
# Fast structural check (meta device)


def check_task(task: Task) -> TaskCheck:
    """Build ``task`` without data and compare its shapes and parameter count with the suite's record."""
    started = time.perf_counter()
    result = TaskCheck(ref=task.ref, name=task.name, expected=expectations(task))
    try:
        with _loaded(task) as module:
            result.init_args = _jsonable(init_inputs(module))
            params, inputs, outputs, mode = _trace(module)
    except Exception as exc:  # the task's own code failed: report it by task, keep going
        result.status = "error"
        result.error = _describe(exc)
        result.seconds = time.perf_counter() - started
        return result
    result.mode = mode
    result.params = params
    result.input_shapes = [list(x.shape) for x in inputs if isinstance(x, torch.Tensor)]
    result.output_shapes = [list(y.shape) for y in outputs]
    result.output_dtypes = [_dtype_name(y.dtype) for y in outputs]
    result.problems = expectation_problems(result.expected, params, result.input_shapes, result.output_shapes)
    if result.problems:
        result.status = "mismatch"
    result.seconds = time.perf_counter() - started
    return result


def _trace(module: types.ModuleType) -> tuple[int, list[Any], list[torch.Tensor], str]:
    """Construct and run the reference on the meta device, or under fake tensors when meta fails.

    Some operators have no meta kernel; fake tensors run the real operator's shape logic instead.
    """
    cls = model_class(module, REFERENCE_CLASS)
    try:
        with torch.device("meta"), torch.no_grad():
            model = cls(*init_inputs(module))
            model.eval()
            inputs = list(module.get_inputs())
            outputs = flatten_outputs(model(*inputs))
        return count_parameters(model), inputs, outputs, "meta"
    except Exception:
        from torch._subclasses.fake_tensor import FakeTensorMode

        with FakeTensorMode(allow_non_fake_inputs=True), torch.no_grad():
            model = cls(*init_inputs(module))
            model.eval()
            inputs = list(module.get_inputs())
            outputs = flatten_outputs(model(*inputs))
        return count_parameters(model), inputs, outputs, "fake"


def expectations(task: Task) -> dict[str, Any]:
    """The shapes and parameter count ``suite.toml`` records for a task (empty when it records none)."""
    extra = task.meta.extra
    return {key: extra[key] for key in (EXPECT_PARAMS, EXPECT_INPUT_SHAPES, EXPECT_OUTPUT_SHAPE) if key in extra}


def expectation_problems(expected: dict[str, Any], params: int | None, input_shapes: list[list[int]],
                         output_shapes: list[list[int]]) -> list[str]:
    """One line per recorded expectation that the built model does not meet."""
    problems = []
    if EXPECT_PARAMS in expected and params != int(expected[EXPECT_PARAMS]):
        problems.append(f"params {params} != expected {expected[EXPECT_PARAMS]}")
    if EXPECT_INPUT_SHAPES in expected:
        want = [list(s) for s in expected[EXPECT_INPUT_SHAPES]]
        if input_shapes != want:
            problems.append(f"input shapes {input_shapes} != expected {want}")
    if EXPECT_OUTPUT_SHAPE in expected:
        want_out = expected[EXPECT_OUTPUT_SHAPE]
        # One output: a flat shape. Several: a list of shapes.
        want_list = [list(s) for s in want_out] if want_out and isinstance(want_out[0], list) else [list(want_out)]
        if output_shapes != want_list:
            got = output_shapes[0] if len(output_shapes) == 1 else output_shapes
            problems.append(f"output shape {got} != expected {want_out}")
    return problems


# --------------------------------------------------------------------------------------------------
# Full audit (real run)


def audit_task(task: Task, options: AuditOptions) -> TaskAudit:
    """Run one reference for real and judge whether its correctness check can be trusted."""
    started = time.perf_counter()
    result = TaskAudit(ref=task.ref, name=task.name, atol=task.meta.atol, rtol=task.meta.rtol)
    recorded = task.meta.extra.get(RECORDED_EAGER_MS)
    result.recorded_eager_ms = float(recorded) if recorded is not None else None
    device = torch.device(options.device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    try:
        with _loaded(task) as module:
            _measure(module, task, device, options, result)
    except Exception as exc:
        result.verdict = "error"
        result.error = _describe(exc)
    finally:
        gc.collect()
        if device.type == "cuda":
            result.peak_memory_mb = torch.cuda.max_memory_allocated(device) / 2**20
            torch.cuda.empty_cache()
    if result.verdict != "error":
        known = set(task.meta.extra.get(KNOWN_FINDINGS, ()))
        for finding in result.findings:
            finding.known = finding.code in known
        result.verdict = "flagged" if result.findings else "ok"
    result.seconds = time.perf_counter() - started
    return result


def _measure(module: types.ModuleType, task: Task, device: torch.device, options: AuditOptions,
             result: TaskAudit) -> None:
    """The audit proper. Keeps one reference output alive at a time beside the baseline ``y0``."""
    cls = model_class(module, REFERENCE_CLASS)
    args = init_inputs(module)
    atol, rtol = task.meta.atol, task.meta.rtol

    cpu_inputs = make_inputs(module, INPUT_SEED)
    result.input_shapes = [list(x.shape) for x in cpu_inputs if isinstance(x, torch.Tensor)]
    model = build_model(cls, args, weight_seed=WEIGHT_SEED, device=device)
    result.params = count_parameters(model)
    weights = state_fingerprint(model)
    y0 = _forward(model, cpu_inputs, device)
    result.output_shapes = [list(y.shape) for y in y0]
    result.output_dtypes = [_dtype_name(y.dtype) for y in y0]

    # Same model, same inputs, called again: catches state carried between calls.
    repeat = compare(y0, _forward(model, cpu_inputs, device), atol, rtol)
    result.repeat_diff = repeat.max_diff
    result.runtime_ms, result.runtime_reps = time_forward(model, cpu_inputs, device, options)
    del model

    # Rebuilt from the same seeds: what the evaluator relies on to give a candidate equal weights.
    model = build_model(cls, args, weight_seed=WEIGHT_SEED, device=device)
    rebuild = compare(y0, _forward(model, cpu_inputs, device), atol, rtol)
    result.rebuild_diff = rebuild.max_diff
    input_seed = compare(y0, _forward(model, make_inputs(module, ALT_INPUT_SEED), device), atol, rtol)
    result.input_seed_diff, result.input_seed_mismatch = input_seed.max_diff, input_seed.mismatch
    del model

    model = build_model(cls, args, weight_seed=ALT_WEIGHT_SEED, device=device)
    weight_seed: Comparison | None = None
    if state_fingerprint(model) != weights:
        weight_seed = compare(y0, _forward(model, cpu_inputs, device), atol, rtol)
        result.weight_seed_diff, result.weight_seed_mismatch = weight_seed.max_diff, weight_seed.mismatch
    else:
        result.notes.append("no randomly initialised weights (the state is the same for every weight seed)")
    del model

    stats = output_stats(y0, atol, rtol)
    result.mean_abs, result.max_abs = stats.mean_abs, stats.max_abs
    result.zero_pass_fraction, result.nonfinite = stats.zero_pass_fraction, stats.nonfinite
    judge(result, stats, input_seed, weight_seed, rebuild, repeat, expectations(task))


def judge(result: TaskAudit, stats: OutputStats, input_seed: Comparison, weight_seed: Comparison | None,
          rebuild: Comparison, repeat: Comparison, expected: dict[str, Any]) -> None:
    """Turn the measurements into findings (reasons to distrust the check) and notes (worth knowing)."""
    atol, rtol = result.atol, result.rtol
    add = result.findings.append
    if stats.nonfinite:
        add(Finding(NONFINITE, f"{stats.nonfinite} of {stats.numel} output elements are NaN or infinite"))
    if stats.numel and stats.zero_pass_fraction == 1.0:
        add(Finding(NEAR_ZERO, f"every output element is within tolerance of zero (max |y| = "
                               f"{stats.max_abs:.2g}, atol {atol:g}): an all-zero answer passes"))
    elif stats.constant_passes:
        add(Finding(CONSTANT_PASSES, f"every output element is within tolerance of the output's mean "
                                     f"({stats.mean:.3g}): a constant answer passes"))
    for name, code, comparison, seeds in (
        ("input", INPUT_INSENSITIVE, input_seed, f"{INPUT_SEED} and {ALT_INPUT_SEED}"),
        ("weight", WEIGHT_INSENSITIVE, weight_seed, f"{WEIGHT_SEED} and {ALT_WEIGHT_SEED}"),
    ):
        if comparison is None:
            continue
        if comparison.identical:
            add(Finding(code, f"outputs for {name} seeds {seeds} are identical: the output ignores the {name}s"))
        elif comparison.allclose:
            add(Finding(code, f"outputs for {name} seeds {seeds} agree within tolerance (max diff "
                              f"{comparison.max_diff:.2g}): the check cannot tell the {name}s apart"))
    if not rebuild.allclose or not repeat.allclose:
        add(Finding(NONDETERMINISTIC, f"two runs with the same seeds differ beyond tolerance (rebuilt model: "
                                      f"{rebuild.max_diff:.3g}, repeated call: {repeat.max_diff:.3g})"))
    elif not rebuild.identical or not repeat.identical:
        result.notes.append(f"not bitwise deterministic (max diff {max(rebuild.max_diff, repeat.max_diff):.2g}), "
                            f"within tolerance")
    problems = expectation_problems(expected, result.params, result.input_shapes, result.output_shapes)
    if problems:
        add(Finding(EXPECTATION_MISMATCH, "; ".join(problems)))

    if stats.mean_abs is not None and stats.mean_abs * rtol > LARGE_MAGNITUDE_FACTOR * atol:
        result.notes.append(f"large outputs (mean |y| {stats.mean_abs:.2g}, max {stats.max_abs:.2g}): atol "
                            f"{atol:g} is negligible, only rtol {rtol:g} matters")
    if stats.zero_pass_fraction is not None and PARTIAL_ZERO_NOTE <= stats.zero_pass_fraction < 1.0:
        result.notes.append(f"{stats.zero_pass_fraction:.0%} of output elements are within tolerance of zero")


# --------------------------------------------------------------------------------------------------
# Measurements


@dataclass
class Comparison:
    max_diff: float
    mismatch: float  # share of elements outside tolerance
    allclose: bool
    identical: bool


@dataclass
class OutputStats:
    numel: int
    mean_abs: float | None
    max_abs: float | None
    mean: float | None
    zero_pass_fraction: float | None
    constant_passes: bool
    nonfinite: int


def flatten_outputs(output: Any) -> list[torch.Tensor]:
    """A model's output as a list of tensors (PIKE compares tuples element-wise)."""
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, list | tuple):
        return [t for item in output for t in flatten_outputs(item)]
    raise TypeError(f"the model returned {type(output).__name__}, not a tensor or a tuple of tensors")


def compare(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor], atol: float, rtol: float) -> Comparison:
    """Max absolute difference and ``allclose`` verdict over paired outputs, as the evaluator judges them."""
    if len(a) != len(b) or any(x.shape != y.shape for x, y in zip(a, b, strict=True)):
        return Comparison(math.inf, 1.0, False, False)
    max_diff, mismatched, numel, identical = 0.0, 0, 0, True
    for x, y in zip(a, b, strict=True):
        identical = identical and _equal(x, y)
        if x.numel() == 0:
            continue
        xf, yf = _as_float(x), _as_float(y)
        diff = (xf - yf).abs()
        diff = torch.where(torch.isnan(xf) & torch.isnan(yf), torch.zeros_like(diff), diff)
        max_diff = max(max_diff, _finite_or_inf(diff.max().item()))
        close = torch.isclose(yf, xf, rtol=rtol, atol=atol, equal_nan=True)
        mismatched += int((~close).sum().item())
        numel += x.numel()
    return Comparison(max_diff, mismatched / numel if numel else 0.0, mismatched == 0, identical)


def output_stats(outputs: Sequence[torch.Tensor], atol: float, rtol: float) -> OutputStats:
    """Magnitudes of the reference output against the tolerance, over all finite elements."""
    numel = sum(y.numel() for y in outputs)
    if numel == 0:
        return OutputStats(0, None, None, None, None, False, 0)
    total_abs, total, max_abs, zero_ok, nonfinite, finite_count = 0.0, 0.0, 0.0, 0, 0, 0
    for y in outputs:
        yf = y.float()
        finite = torch.isfinite(yf)
        nonfinite += int((~finite).sum().item())
        values = yf[finite]
        finite_count += values.numel()
        if values.numel() == 0:
            continue
        magnitude = values.abs()
        total_abs += magnitude.double().sum().item()
        total += values.double().sum().item()
        max_abs = max(max_abs, magnitude.max().item())
        # allclose(zeros, y): |0 - y| <= atol + rtol * |y|
        zero_ok += int((magnitude <= atol + rtol * magnitude).sum().item())
    mean = total / finite_count if finite_count else None
    constant_ok = False
    if mean is not None and numel > 1:
        constant_ok = all(
            bool(torch.isclose(torch.full_like(y.float(), mean), y.float(), rtol=rtol, atol=atol).all())
            for y in outputs if y.numel()
        )
    return OutputStats(
        numel=numel,
        mean_abs=total_abs / finite_count if finite_count else None,
        max_abs=max_abs if finite_count else None,
        mean=mean,
        zero_pass_fraction=zero_ok / numel,
        constant_passes=constant_ok,
        nonfinite=nonfinite,
    )


def time_forward(model: torch.nn.Module, cpu_inputs: Sequence[Any], device: torch.device,
                 options: AuditOptions) -> tuple[float | None, int]:
    """Median eager time of single forward calls (CUDA events on GPU, perf_counter on CPU); rough."""
    inputs = to_device(cpu_inputs, device)
    timings: list[float] = []
    spent = 0.0
    with torch.no_grad():
        for _ in range(options.warmup):
            model(*inputs)
        _synchronize(device)
        for _ in range(options.reps):
            elapsed = _timed_call(model, inputs, device)
            timings.append(elapsed)
            spent += elapsed / 1000.0
            if spent > options.time_budget_s:
                break
    del inputs
    return (statistics.median(timings) if timings else None), len(timings)


def _timed_call(model: torch.nn.Module, inputs: Sequence[Any], device: torch.device) -> float:
    if device.type == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        model(*inputs)
        end.record()
        torch.cuda.synchronize(device)
        return start.elapsed_time(end)
    begin = time.perf_counter()
    model(*inputs)
    return (time.perf_counter() - begin) * 1000.0


def _forward(model: torch.nn.Module, cpu_inputs: Sequence[Any], device: torch.device) -> list[torch.Tensor]:
    """One reference call on fresh device copies of the inputs; outputs detached from the model."""
    with torch.no_grad():
        outputs = flatten_outputs(model(*to_device(cpu_inputs, device)))
    _synchronize(device)
    # A model may hand back a buffer it reuses on the next call: keep a copy of what it said now.
    return [y.detach().clone() for y in outputs]


def state_fingerprint(model: Any) -> list[tuple[str, float, float]]:
    """Name, sum and sum of squares of every parameter and buffer: equal for equal weights, cheaply."""
    if not isinstance(model, torch.nn.Module):
        return []
    with torch.no_grad():
        return [(name, float(t.double().sum()), float(t.double().square().sum()))
                for name, t in model.state_dict().items() if t.is_floating_point()]


def count_parameters(model: Any) -> int:
    """Distinct parameters (shared ones once), as ``sum(p.numel() for p in model.parameters())``."""
    if not isinstance(model, torch.nn.Module):
        return 0
    return sum(p.numel() for p in model.parameters())


# --------------------------------------------------------------------------------------------------
# Environment


def resolve_device(requested: str | None) -> str:
    """One device for the audit, parsed like every other command's ``--device`` (``auto`` or none:
    the first GPU if there is one); a device this host lacks is the user's mistake, said in one line."""
    from pike_harness.errors import UserError
    from pike_harness.worker.supervise.devices import resolve_devices

    try:
        devices = resolve_devices(requested or "auto")
    except ValueError as exc:
        raise UserError(f"--device {requested}: {exc}") from None
    if len(devices) > 1 and requested not in (None, "auto", "cuda"):
        raise UserError(f"--device {requested}: the audit runs on one device; name one, e.g. {devices[0]}")
    return devices[0]


def prepare_device(device: str) -> None:
    """Set the numerics flags PIKE's references ran under (PyTorch defaults), explicitly.

    A task or an earlier import may have changed them; the audit measures the published setting.
    """
    if torch.device(device).type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = False


def environment(device: str) -> AuditEnvironment:
    dev = torch.device(device)
    is_cuda = dev.type == "cuda"
    return AuditEnvironment(
        device=device,
        device_name=torch.cuda.get_device_name(dev) if is_cuda else f"CPU ({cpu_model()})",
        torch_version=torch.__version__,
        cuda_version=torch.version.cuda,
        python_version=platform.python_version(),
        host=platform.node(),
        cpu=cpu_model(),
        cpu_count=os.cpu_count() or 0,
        tf32_matmul=torch.backends.cuda.matmul.allow_tf32 if is_cuda else None,
        tf32_cudnn=torch.backends.cudnn.allow_tf32 if is_cuda else None,
        driver=driver_version() if is_cuda else None,
        date=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
    )


def run_audit(tasks: Sequence[Task], options: AuditOptions,
              progress: Callable[[Task], None] | None = None) -> AuditReport:
    """Audit ``tasks`` one after another in this process; ``progress`` is told before each starts."""
    prepare_device(options.device)
    env = environment(options.device)
    results = []
    for task in tasks:
        if progress is not None:
            progress(task)
        results.append(audit_task(task, options))
    suites = sorted({t.suite for t in tasks})
    settings = {**asdict(options), "input_seed": INPUT_SEED, "alt_input_seed": ALT_INPUT_SEED,
                "weight_seed": WEIGHT_SEED, "alt_weight_seed": ALT_WEIGHT_SEED}
    return AuditReport(environment=env, suites=suites, options=settings, tasks=results)


# --------------------------------------------------------------------------------------------------
# Helpers


@contextlib.contextmanager
def _loaded(task: Task) -> Iterator[types.ModuleType]:
    """The task's module, unregistered afterwards so nothing it holds outlives the task."""
    name = module_name_for(task.source, "pikeh_audit")
    try:
        yield load_source(task.source, name)
    finally:
        sys.modules.pop(name, None)


def _as_float(t: torch.Tensor) -> torch.Tensor:
    return t if t.dtype == torch.float64 else t.float()


def _equal(x: torch.Tensor, y: torch.Tensor) -> bool:
    """Bitwise equality that counts NaN as equal to NaN (the same answer twice)."""
    if x.dtype != y.dtype or x.shape != y.shape:
        return False
    if x.is_floating_point():
        both_nan = torch.isnan(x) & torch.isnan(y)
        return bool(((x == y) | both_nan).all())
    return bool(torch.equal(x, y))


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _finite_or_inf(value: float) -> float:
    return value if not math.isnan(value) else math.inf


def _jsonable(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    return repr(value)


