"""What a runtime was measured on: host, device and versions, recorded with every result.

Launch-bound tasks time up to 2x apart on two H100 hosts, so a runtime means little without the CPU
and GPU it came from. ``host_info`` is standard library only; ``device_info`` needs torch and is
collected in the candidate's process before the candidate is imported.
"""

from __future__ import annotations

import os
import platform
import socket
from importlib import metadata
from typing import Any


def cpu_model() -> str:
    """The CPU's marketing name (the host CPU is part of what a timing ran on)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def driver_version() -> str | None:
    """The NVIDIA kernel driver's version, read without running nvidia-smi; None without one."""
    try:
        with open("/proc/driver/nvidia/version", encoding="utf-8", errors="replace") as handle:
            first = handle.readline()
    except OSError:
        return None
    for token in first.split():
        if token[:1].isdigit() and "." in token:
            return token
    return first.strip() or None


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def host_info() -> dict[str, Any]:
    return {
        "host": socket.gethostname(),
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


# What a candidate's process reports of its device (``device_info``), in the ``importing`` message it
# sends before the candidate's code runs; the supervisor takes these keys only, never over what it
# recorded itself (``host_info``, the device asked for), so not even the child can set its notes.
DEVICE_INFO_KEYS = frozenset({"torch", "cuda", "triton", "device", "gpu_error", "gpu", "gpu_capability",
                              "gpu_memory_mb", "gpu_multiprocessors", "driver", "cudnn"})


def device_info(device: str) -> dict[str, Any]:
    """torch/triton/CUDA versions and, for a CUDA device, the GPU's name, memory and driver."""
    import torch

    info: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": _version("triton"),
        "device": device,
    }
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            info["gpu_error"] = "CUDA is not available in the candidate's process"
            return info
        props = torch.cuda.get_device_properties(0)
        info.update({
            "gpu": props.name,
            "gpu_capability": f"{props.major}.{props.minor}",
            "gpu_memory_mb": props.total_memory // (1024 * 1024),
            "gpu_multiprocessors": props.multi_processor_count,
            "driver": driver_version(),
            "cudnn": torch.backends.cudnn.version(),
        })
    return info
