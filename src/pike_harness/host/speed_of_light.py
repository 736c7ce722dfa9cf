"""Speed-of-light bounds: the fastest a task could run on a device, from its work and the device's peaks.

    SoL time = max(FLOPs / peak FLOP rate, least bytes / memory bandwidth)

at the precision a task's checks allow (``bound_precision``). FLOPs and bytes come from the reference
(``worker/work_count.py``, counted in a process of its own); peaks from the vendor datasheets below,
keyed by the GPU name torch reports, or from a user's TOML file (``load_peaks``). A correct attempt's
*fraction of SoL* is SoL time / its runtime: 1.0 would be a perfect roofline implementation.

Assumptions (docs/report.md says them to readers): dense (not sparse) tensor-core rates; one read of
every input, parameter and buffer and one write of every output, intermediates free; boost clocks
(the datasheets' figures); FLOPs of matmul/convolution/attention only.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pike_harness.errors import UserError

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
BYTES_PER_FLOAT = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2}
# Unit roundoff of each format's mantissa: a tolerance at least ten of these wide accepts outputs
# computed (and stored, for the 16-bit ones) in that format.
UNIT_ROUNDOFF = {"fp16": 2.0 ** -11, "bf16": 2.0 ** -8, "tf32": 2.0 ** -11, "fp32": 2.0 ** -24}


@dataclass(frozen=True)
class Peaks:
    """One device's dense peak rates in TFLOP/s and its memory bandwidth in GB/s."""

    name: str
    fp32: float
    tf32: float
    bf16: float
    fp16: float
    bandwidth_gbs: float
    source: str = ""

    def flops_per_s(self, precision: str) -> float:
        return float(getattr(self, precision)) * 1e12


# Vendor datasheet figures, dense (the datasheets' "with sparsity" figures are twice these), boost clock.
# Patterns match torch.cuda.get_device_name(); the first match wins, so specific names come first.
#  - H100 SXM5 80GB: NVIDIA H100 Tensor Core GPU datasheet (2023): FP32 67, TF32 494.7 (989 sparse),
#    BF16/FP16 989.4 (1979 sparse) TFLOPS; HBM3 3.35 TB/s.
#  - H100 PCIe 80GB: same datasheet: FP32 51, TF32 378 (756 sparse), BF16/FP16 756 (1513 sparse); 2.0 TB/s.
#  - H200 SXM 141GB: NVIDIA H200 datasheet (2024): compute as H100 SXM; HBM3e 4.8 TB/s.
#  - A100 40GB / 80GB SXM: NVIDIA A100 datasheet (2021): FP32 19.5, TF32 156, BF16/FP16 312;
#    1,555 GB/s (40GB), 2,039 GB/s (80GB SXM), 1,935 GB/s (80GB PCIe).
#  - L40S: NVIDIA L40S datasheet (2023): FP32 91.6, TF32 183 (366 sparse), BF16/FP16 362.05 (733 sparse);
#    GDDR6 864 GB/s.
#  - GeForce RTX 4090: NVIDIA Ada Lovelace architecture whitepaper v2.1, appendix A: FP32 82.6, TF32 82.6,
#    BF16/FP16 with FP32 accumulate 165.2 (330.3 sparse); GDDR6X 1,008 GB/s.
#  - AMD Instinct MI300X: AMD MI300X data sheet (2023): FP32 matrix 163.4, TF32 653.7, BF16/FP16 1307.4
#    (2614.9 sparse); HBM3 5.3 TB/s.
DATASHEET: tuple[tuple[str, Peaks], ...] = (
    (r"H100.*PCIe", Peaks("H100 PCIe", 51.2, 378.0, 756.0, 756.0, 2000.0, "NVIDIA H100 datasheet")),
    (r"H100", Peaks("H100 SXM", 67.0, 494.7, 989.4, 989.4, 3350.0, "NVIDIA H100 datasheet")),
    (r"H200", Peaks("H200 SXM", 67.0, 494.7, 989.4, 989.4, 4800.0, "NVIDIA H200 datasheet")),
    (r"A100.*PCIe.*80|A100.*80.*PCIe", Peaks("A100 80GB PCIe", 19.5, 156.0, 312.0, 312.0, 1935.0,
                                              "NVIDIA A100 datasheet")),
    (r"A100.*80", Peaks("A100 80GB SXM", 19.5, 156.0, 312.0, 312.0, 2039.0, "NVIDIA A100 datasheet")),
    (r"A100", Peaks("A100 40GB", 19.5, 156.0, 312.0, 312.0, 1555.0, "NVIDIA A100 datasheet")),
    (r"L40S", Peaks("L40S", 91.6, 183.0, 362.05, 362.05, 864.0, "NVIDIA L40S datasheet")),
    (r"RTX 4090", Peaks("RTX 4090", 82.6, 82.6, 165.2, 165.2, 1008.0, "NVIDIA Ada whitepaper")),
    (r"MI300X", Peaks("MI300X", 163.4, 653.7, 1307.4, 1307.4, 5300.0, "AMD MI300X data sheet")),
)


def load_peaks(paths: Iterable[Path | str]) -> list[tuple[str, Peaks]]:
    """Extra peak tables from TOML files, each ``[[device]]`` with ``match`` (a regular expression on the
    device name), ``name``, ``fp32``, ``tf32``, ``bf16``, ``fp16`` (TFLOP/s) and ``bandwidth_gbs``.
    They are tried before the datasheet table, later files first."""
    table: list[tuple[str, Peaks]] = []
    for path in paths:
        try:
            data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
            for entry in data.get("device") or []:
                rates = {k: float(entry[k]) for k in PRECISIONS}
                peaks = Peaks(str(entry.get("name") or entry["match"]), rates["fp32"], rates["tf32"], rates["bf16"],
                              rates["fp16"], float(entry["bandwidth_gbs"]), str(entry.get("source") or path))
                table.insert(0, (str(entry["match"]), peaks))
        except (OSError, tomllib.TOMLDecodeError, KeyError, TypeError, ValueError) as exc:
            raise UserError(f"peak table {path}: {type(exc).__name__}: {exc} (each [[device]] needs match, name, "
                            "fp32, tf32, bf16, fp16 and bandwidth_gbs)") from None
    return table


def find_peaks(device_name: str | None, extra: Sequence[tuple[str, Peaks]] = ()) -> Peaks | None:
    """The peaks of a device by its name (a user's table first, then the datasheets); None if unknown."""
    if not device_name:
        return None
    for pattern, peaks in (*extra, *DATASHEET):
        if re.search(pattern, device_name, re.IGNORECASE):
            return peaks
    return None


def bound_precision(precision: str, rule: str, atol: float, rtol: float) -> str:
    """The precision a bound is computed at: the cheapest one a correct candidate may use.

    Under the "stated" rule the task's ``precision`` is the rule. Under "tolerance" (PIKE's) any
    computation whose outputs pass the tolerance is correct, so the bound uses the narrowest format whose
    unit roundoff is at most a tenth of ``rtol``: fp16 (storage and tensor cores) for rtol >= 4.9e-3, as
    level3-pike's 1e-2; else fp32.
    """
    if rule != "tolerance":
        return precision if precision in PRECISIONS else "fp32"
    for name in ("fp16", "tf32"):  # narrowest first; storage in fp16, TF32 only in the tensor cores
        if rtol >= 10 * UNIT_ROUNDOFF[name]:
            return name
    return "fp32"


def sol_ms(flops: float, nbytes: float, peaks: Peaks, precision: str) -> dict[str, float | str]:
    """The bound and which side of the roofline sets it."""
    compute_ms = flops / peaks.flops_per_s(precision) * 1e3
    memory_ms = nbytes / (peaks.bandwidth_gbs * 1e9) * 1e3
    return {"sol_ms": max(compute_ms, memory_ms), "compute_ms": compute_ms, "memory_ms": memory_ms,
            "bound": "compute" if compute_ms >= memory_ms else "memory"}


def fraction(sol: float | None, runtime_ms: float | None) -> float | None:
    """A runtime's fraction of speed-of-light (1.0 = at the bound); None when either is unknown."""
    if sol is None or not runtime_ms or runtime_ms <= 0:
        return None
    return sol / runtime_ms


def count_work(items: Sequence[tuple[str, str]], *, gpu_name: bool = False,
               timeout_s: float = 600.0) -> tuple[list[dict[str, Any]], str | None]:
    """FLOPs and least bytes of each (source, precision), counted in one child process
    (``worker/work_count.py``); with ``gpu_name`` also the name of the GPU that process sees."""
    payload = {"items": [{"source": source, "bytes_per_float": BYTES_PER_FLOAT.get(precision, 4)}
                         for source, precision in items], "gpu": gpu_name}
    env = dict(os.environ)
    if not gpu_name:
        env["CUDA_VISIBLE_DEVICES"] = ""  # counting runs on meta/CPU tensors; no GPU context needed
    try:
        done = subprocess.run([sys.executable, "-m", "pike_harness.worker.work_count"], input=json.dumps(payload),
                              capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    except subprocess.TimeoutExpired:
        raise UserError(f"counting the references' FLOPs took over {timeout_s:g} s") from None
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the counting process failed (status {done.returncode}): {done.stderr[-2000:]}")
    reply = json.loads(lines[-1])
    return list(reply["counts"]), reply.get("gpu")


def task_bound(task: Any, count: dict[str, Any], peaks: Peaks | None) -> dict[str, Any]:
    """One task's bound record: its counts, the precision, and (with peaks) the SoL time."""
    meta = task.meta
    precision = bound_precision(meta.precision, meta.precision_rule, meta.atol, meta.rtol)
    record: dict[str, Any] = {"task": task.ref, "name": task.name, "precision": precision, **count}
    if peaks is not None and "error" not in count:
        record.update(sol_ms(count["flops"], count["bytes"], peaks, precision), device=peaks.name)
    return record


def bounds(tasks: Sequence[Any], device_name: str | None, extra_peaks: Sequence[tuple[str, Peaks]] = ()
           ) -> tuple[list[dict[str, Any]], Peaks | None]:
    """The bound of every task on the device named (None: no peaks, counts only)."""
    peaks = find_peaks(device_name, extra_peaks)
    items = [(t.source, bound_precision(t.meta.precision, t.meta.precision_rule, t.meta.atol, t.meta.rtol))
             for t in tasks]
    counts, _ = count_work(items)
    return [task_bound(task, count, peaks) for task, count in zip(tasks, counts, strict=True)], peaks


def peaks_dict(peaks: Peaks | None) -> dict[str, Any] | None:
    return asdict(peaks) if peaks is not None else None
