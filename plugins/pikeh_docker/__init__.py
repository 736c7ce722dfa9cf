"""The ``docker`` evaluator plugin: eval workers in containers with no network, no capabilities, a
read-only root and tmpfs scratch, started and stopped by the evaluator (Docker or Podman).

Registration and options only; the evaluator (``evaluator.py``) and the engine's command line
(``engine.py``) load when the evaluator is built, so `pikeh --help` stays instant.
"""

from __future__ import annotations

from pathlib import Path

import click

from pike_harness.api import EvaluatorOptions, EvaluatorSpec, hookimpl


def _size(_ctx: click.Context, _param: click.Parameter, value: str | None) -> str | None:
    from .engine import SIZE

    if value is not None and not SIZE.match(value):
        raise click.BadParameter(f"{value!r}: write a number with an optional unit, e.g. 16g or 512m")
    return value


def _factory(options: EvaluatorOptions):
    from .evaluator import DockerEvaluator

    return DockerEvaluator(options)


@hookimpl
def register_evaluators(register) -> None:
    register(EvaluatorSpec(
        name="docker",
        factory=_factory,
        description="worker containers on this host (Docker or Podman), one per GPU or one for all: no network, "
                    "no capabilities, read-only root, tmpfs scratch",
        options=[
            click.Option(["--io-dir"], type=click.Path(file_okay=False, path_type=Path), default=None,
                         help="[queue, docker] The queue folder shared with the workers (local disk or a shared "
                              "file system). Required for queue; docker uses a private temporary one by default."),
            click.Option(["--docker-engine"], type=click.Choice(["docker", "podman"]), default=None,
                         help="[docker] Container engine. Default: docker."),
            click.Option(["--docker-image"], default=None, metavar="IMAGE",
                         help="[docker] Worker image. Default: pikeh-worker:cuda with GPUs, pikeh-worker:cpu "
                              "without (build them with `pikeh worker image build`)."),
            click.Option(["--docker-gpus"], type=click.Choice(["per-gpu", "shared"]), default=None,
                         help="[docker] One container per GPU (default) or one container for all GPUs."),
            click.Option(["--docker-memory"], default=None, callback=_size, metavar="SIZE",
                         help="[docker] Memory limit per container, scratch included (no swap). Default: half "
                              "of this host's memory, split between the per-GPU containers."),
            click.Option(["--docker-pids"], type=click.IntRange(min=64), default=None,
                         help="[docker] Process and thread limit per container. Default: 4096."),
            click.Option(["--docker-scratch"], default=None, callback=_size, metavar="SIZE",
                         help="[docker] Size of the tmpfs scratch (/scratch) per container. Default: 8g."),
            click.Option(["--docker-max-active"], type=click.IntRange(min=1), default=None,
                         help="[docker] Evaluations in flight per container (the worker's --max-active)."),
            click.Option(["--docker-host-python"], is_flag=True, default=None,
                         help="[docker] Mount this host's Python, venv and pike_harness read-only into the "
                              "container instead of using the image's (for images without PyTorch; CI uses it)."),
            click.Option(["--docker-runtime"], default=None, metavar="NAME",
                         help="[docker] Container runtime, e.g. runsc (gVisor) for a user-space kernel between "
                              "candidates and the host. Default: the engine's (runc)."),
            click.Option(["--docker-start-timeout"], type=click.FloatRange(min=1), default=None, metavar="SECONDS",
                         help="[docker] How long the containers may take to start answering. Default: 180."),
        ],
    ))
