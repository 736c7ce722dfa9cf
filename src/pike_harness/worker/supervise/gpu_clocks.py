"""A GPU's clocks, power limit and temperature, read by the supervisor around each timed loop.

A card that throttles (heat, a lowered power cap, another tenant's load) times slower, and a speedup
over a baseline measured at other clocks compares two machines. So the supervisor, outside the
candidate's process, reads the SM and memory clocks, the power limit and the temperature before and
after the timing stage, and the result's environment carries them as ``gpu_clocks``: {"before": {...},
"after": {...}} with ``sm_mhz``, ``mem_mhz``, ``power_limit_w``, ``temperature_c``.

NVML through ctypes (libnvidia-ml.so.1, about 0.1 ms a read; no pynvml needed), else one
``nvidia-smi`` query (50-100 ms). Where neither exists (a CPU host, a driver-less container) the
reading is None and the field is left out: never an error. Standard library only.
"""

from __future__ import annotations

import contextlib
import ctypes
import shutil
import subprocess
import threading
from typing import Any

NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 1, 2, 0
FIELDS = ("sm_mhz", "mem_mhz", "power_limit_w", "temperature_c")

_lock = threading.Lock()
_nvml: Any = None  # the loaded library, False once it failed to load


def _library() -> Any:
    global _nvml
    with _lock:
        if _nvml is None:
            try:
                lib = ctypes.CDLL("libnvidia-ml.so.1")
                _nvml = lib if lib.nvmlInit_v2() == 0 else False
            except (OSError, AttributeError):
                _nvml = False
        return _nvml


def _by_nvml(index: int) -> dict[str, Any] | None:
    lib = _library()
    if not lib:
        return None
    handle = ctypes.c_void_p()
    if lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(handle)) != 0:
        return None
    sm, mem, power, temp = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint(), ctypes.c_uint()
    reading: dict[str, Any] = {}
    if lib.nvmlDeviceGetClockInfo(handle, NVML_CLOCK_SM, ctypes.byref(sm)) == 0:
        reading["sm_mhz"] = float(sm.value)
    if lib.nvmlDeviceGetClockInfo(handle, NVML_CLOCK_MEM, ctypes.byref(mem)) == 0:
        reading["mem_mhz"] = float(mem.value)
    if lib.nvmlDeviceGetPowerManagementLimit(handle, ctypes.byref(power)) == 0:
        reading["power_limit_w"] = power.value / 1000.0
    if lib.nvmlDeviceGetTemperature(handle, NVML_TEMPERATURE_GPU, ctypes.byref(temp)) == 0:
        reading["temperature_c"] = float(temp.value)
    return reading or None


def parse_smi(line: str) -> dict[str, Any] | None:
    """One ``nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.limit,temperature.gpu
    --format=csv,noheader,nounits`` line -> a reading ("[N/A]" fields are left out)."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != len(FIELDS):
        return None
    reading = {}
    for name, text in zip(FIELDS, parts, strict=True):
        with contextlib.suppress(ValueError):
            reading[name] = float(text)
    return reading or None


def _by_smi(index: int) -> dict[str, Any] | None:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        done = subprocess.run([smi, f"--id={index}", "--query-gpu=clocks.sm,clocks.mem,power.limit,temperature.gpu",
                               "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.strip().splitlines()
    return parse_smi(lines[0]) if done.returncode == 0 and lines else None


def read(physical_index: str | int | None) -> dict[str, Any] | None:
    """One reading of the GPU with this (physical, nvidia-smi) index; None on a CPU or without NVML."""
    if physical_index is None or str(physical_index).strip() == "":
        return None
    try:
        index = int(str(physical_index).split(",")[0])
    except ValueError:
        return None  # a UUID in CUDA_VISIBLE_DEVICES: not worth resolving for a diagnostic
    return _by_nvml(index) or _by_smi(index)


def drift(attempt: dict[str, Any] | None, baseline: dict[str, Any] | None, threshold: float = 0.05) -> list[str]:
    """Which clocks of an attempt's timing differ from its baseline's by more than ``threshold``
    (relative), comparing the mean of each side's before/after readings; [] when either is unknown."""
    def mean(clocks: dict[str, Any] | None, name: str) -> float | None:
        values = [float(r[name]) for r in ((clocks or {}).get("before"), (clocks or {}).get("after"))
                  if isinstance(r, dict) and r.get(name)]
        return sum(values) / len(values) if values else None

    out = []
    for name in ("sm_mhz", "mem_mhz"):
        a, b = mean(attempt, name), mean(baseline, name)
        if a is not None and b is not None and abs(a - b) > threshold * b:
            out.append(f"{name.split('_')[0]} clock {a:.0f} MHz vs baseline {b:.0f} MHz")
    return out
