"""The ``docker`` evaluator plugin: eval workers in containers with no network, no capabilities, a
read-only root and tmpfs scratch, started and stopped by the evaluator (Docker or Podman).

Registration and options only; the evaluator (``evaluator.py``) and the engine's command line
(``engine.py``) load when the evaluator is built, so `pikeh --help` stays instant.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pike_harness.api import EvaluatorError, EvaluatorOptions, EvaluatorSpec, hookimpl


def _size(name: str, value: str | None) -> None:
    from .engine import SIZE

    if value is not None and not SIZE.match(value):
        raise EvaluatorError(f"--{name.replace('_', '-')} {value!r}: write a number with an optional unit, "
                             "e.g. 16g or 512m")


@dataclass
class DockerConfig:
    """The docker evaluator's options (``pikeh eval --evaluator docker --help``)."""

    io_dir: str | None = field(default=None, metadata={
        "metavar": "DIR", "help": "The queue folder shared with the workers. Default: a private temporary one."})
    docker_engine: str | None = field(default=None, metadata={
        "choices": ("docker", "podman"), "help": "Container engine. Default: docker."})
    docker_image: str | None = field(default=None, metadata={
        "metavar": "IMAGE", "help": "Worker image. Default: pikeh-worker:cuda with GPUs, pikeh-worker:cpu without "
                                    "(build them with `pikeh worker image build`)."})
    docker_gpus: str | None = field(default=None, metadata={
        "choices": ("per-gpu", "shared"), "help": "One container per GPU (default) or one container for all GPUs."})
    docker_memory: str | None = field(default=None, metadata={
        "metavar": "SIZE", "help": "Memory limit per container, scratch included (no swap). Default: half of this "
                                   "host's memory, split between the per-GPU containers."})
    docker_pids: int | None = field(default=None, metadata={
        "min": 64, "help": "Process and thread limit per container. Default: 4096."})
    docker_scratch: str | None = field(default=None, metadata={
        "metavar": "SIZE", "help": "Size of the tmpfs scratch (/scratch) per container. Default: 8g."})
    docker_max_active: int | None = field(default=None, metadata={
        "min": 1, "help": "Evaluations in flight per container (the worker's --max-active)."})
    docker_host_python: bool | None = field(default=None, metadata={
        "help": "Mount this host's Python, venv and pike_harness read-only into the container instead of using "
                "the image's (for images without PyTorch; CI uses it)."})
    docker_runtime: str | None = field(default=None, metadata={
        "metavar": "NAME", "help": "Container runtime, e.g. runsc (gVisor) for a user-space kernel between "
                                   "candidates and the host. Default: the engine's (runc)."})
    docker_start_timeout: float | None = field(default=None, metadata={
        "min": 1.0, "metavar": "SECONDS", "help": "How long the containers may take to start answering. "
                                                  "Default: 180."})

    def __post_init__(self) -> None:
        _size("docker_memory", self.docker_memory)
        _size("docker_scratch", self.docker_scratch)


def _factory(options: EvaluatorOptions):
    from .evaluator import DockerEvaluator

    return DockerEvaluator(options)


@hookimpl
def register_evaluators(register) -> None:
    register(EvaluatorSpec(
        name="docker",
        factory=_factory,
        config=DockerConfig,
        description="worker containers on this host (Docker or Podman), one per GPU or one for all: no network, "
                    "no capabilities, read-only root, tmpfs scratch",
    ))
