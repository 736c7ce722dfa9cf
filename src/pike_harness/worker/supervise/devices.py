"""Which devices an evaluator or a worker serves, from what the user typed (``--device``)."""

from __future__ import annotations


def resolve_devices(spec: str, count: int | None = None) -> list[str]:
    """``auto``/``cpu``/``cuda``/``cuda:N``/``cuda:0,1`` -> ``cpu`` or ``cuda:N`` devices.

    ``count``: how many GPUs there are, when torch in this process is not the one to ask (the docker
    evaluator counts the host's with nvidia-smi). Raises ValueError with a message meant for the
    user; callers turn it into their own error type.
    """
    spec = (spec or "auto").strip().lower()
    if spec == "cpu":
        return ["cpu"]
    if count is None:
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if spec == "auto":
        return [f"cuda:{i}" for i in range(count)] or ["cpu"]
    if spec == "cuda":
        if not count:
            raise ValueError("no CUDA device is available here (use --device cpu)")
        return [f"cuda:{i}" for i in range(count)]
    indices = spec.removeprefix("cuda:").split(",") if spec.startswith("cuda:") else []
    if not indices or not all(i.strip().isdigit() for i in indices):
        raise ValueError(f"bad device {spec!r}: write auto, cpu, cuda, cuda:N or cuda:0,1")
    devices = [f"cuda:{int(i)}" for i in indices]
    missing = [d for d in devices if int(d.split(":")[1]) >= count]
    if missing:
        raise ValueError(f"{', '.join(missing)} not available ({count} CUDA device(s) visible)")
    return devices
