"""The worker service's options, declared once (click): ``pikeh worker`` and ``python -m
pike_harness.worker.supervise.service`` (what the container images and ``--docker-host-python`` run) both take
them from here.

The one dependency beyond torch, triton and the standard library that GPU-side code may import:
click is pure Python, the images install it, and one declaration means the two ways to start a worker
can never drift apart. Nothing here imports torch; ``run_service`` hands over to the service.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from pike_harness.worker.supervise.engine.options import EngineConfig
from pike_harness.worker.supervise.isolation import UNSAFE_OPTION_HELP
from pike_harness.worker.supervise.liveness import STALE_AFTER_S
from pike_harness.worker.supervise.retry import MAX_ATTEMPTS

STANDALONE = "python -m pike_harness.worker.supervise.service"


def _engine_help(name: str) -> str:
    """The engine option's own help text (``pikeh eval/run --evaluator local`` show the same)."""
    return next(f.metadata["help"] for f in dataclasses.fields(EngineConfig) if f.name == name)


_OPTIONS = [
    click.option("--io-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                 help="The queue folder shared with `pikeh eval/run --evaluator queue --io-dir DIR` "
                      "(local disk or a shared file system)."),
    click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda, cuda:N or cuda:0,1."),
    click.option("--max-active", type=click.IntRange(min=1), default=None,
                 help="Evaluations in flight (loading runs in parallel; checking and timing take turns per "
                      "device). Default: what the engine takes at once (CPU slots + 2 per device)."),
    click.option("--worker-id", default=None, help="This worker's name in the folder. Default: <host>-<pid>."),
    click.option("--workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
                 help="Private folder for reference outputs and scratch (default: a temporary folder)."),
    click.option("--heartbeat", type=click.FloatRange(min=0.05), default=1.0, show_default=True,
                 help="Seconds between heartbeats."),
    click.option("--stale-after", type=click.FloatRange(min=0.1), default=STALE_AFTER_S, show_default=True,
                 help="Seconds a heartbeat may stand still before its worker counts as dead (an unreadable "
                      "heartbeat does not count as one that moved, nor as a dead worker)."),
    click.option("--max-attempts", type=click.IntRange(min=1), default=MAX_ATTEMPTS, show_default=True,
                 help="Workers that may die on (or hold past its deadline) one request before it is given up "
                      "(reported as worker_lost)."),
    click.option("--key-file", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
                 help="Shared key (also given to the host with --queue-key-file): accept only signed requests, "
                      "sign results."),
    click.option("--key-stdin", is_flag=True, help="Read the shared key from the first line of standard input."),
    click.option("--stdin-lifeline", is_flag=True, help="Exit when standard input reaches end-of-file."),
    click.option("--replace", is_flag=True,
                 help="The previous worker with this --worker-id is known to be dead: take its requests at once."),
    click.option("--idle-exit", type=click.FloatRange(min=0), default=None, metavar="SECONDS",
                 help="Exit after this long without work (batch jobs)."),
    click.option("--prestart", type=click.IntRange(min=0), default=None, help=_engine_help("prestart")),
    click.option("--quiet", is_flag=True, help="Log warnings and errors only."),
    click.option("--unsafe-no-sandbox", is_flag=True, help=UNSAFE_OPTION_HELP),
    click.option("--sandbox-optional", is_flag=True,
                 help="Inside a container (the isolation): sandbox candidates where the container allows it and "
                      "say in each result when it does not, instead of refusing to start (the docker evaluator "
                      "passes it)."),
]


def service_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """Attach the worker's options to a click command (``pikeh worker`` and the standalone one)."""
    for option in reversed(_OPTIONS):
        function = option(function)
    return function


class StartError(click.ClickException):
    """The worker cannot start as asked (folder unusable, id in use, bad key): one line, exit status 2."""

    exit_code = 2


def run_service(*, io_dir: Path | None, device: str, max_active: int | None, worker_id: str | None,
                workdir: Path | None, heartbeat: float, stale_after: float, max_attempts: int,
                key_file: Path | None, key_stdin: bool, stdin_lifeline: bool, replace: bool,
                idle_exit: float | None, quiet: bool, prestart: int | None = None, unsafe_no_sandbox: bool = False,
                sandbox_optional: bool = False) -> int:
    """Serve with these options until stopped; the exit status. Raises ``click.UsageError`` for a bad
    combination and ``service.ServiceError`` when the worker cannot start."""
    if io_dir is None:
        raise click.UsageError("--io-dir DIR is required: the folder shared with "
                               "`pikeh eval/run --evaluator queue --io-dir DIR`")
    if key_file and key_stdin:
        raise click.UsageError("give --key-file or --key-stdin, not both")
    from pike_harness.worker import queue_channel as qc
    from pike_harness.worker.supervise import service
    try:
        key = qc.read_key(key_file) if key_file else (service.read_key_line(sys.stdin.buffer) if key_stdin else None)
    except qc.ChannelError as exc:
        raise service.ServiceError(str(exc)) from None
    config = service.ServiceConfig(io_dir=io_dir, device=device, max_active=max_active, worker_id=worker_id,
                                   workdir=workdir, heartbeat_s=heartbeat, stale_after_s=stale_after,
                                   max_attempts=max_attempts, key=key, stdin_lifeline=stdin_lifeline,
                                   replace=replace, idle_exit_s=idle_exit,
                                   engine=EngineConfig(prestart=prestart, unsafe_no_sandbox=unsafe_no_sandbox,
                                                       sandbox_optional=sandbox_optional,
                                                       hidden_paths=(str(key_file.absolute()),) if key_file else ()))
    service.setup_logging(quiet)
    return service.serve(config)


@click.command(STANDALONE, context_settings={"help_option_names": ["-h", "--help"]})
@service_options
def standalone(**options: Any) -> None:
    """Serve evaluation requests from a queue folder shared with `pikeh eval/run --evaluator queue
    --io-dir DIR` (docs/containers.md, docs/cluster.md). The same worker as `pikeh worker`."""
    from pike_harness.worker.supervise.service import ServiceError

    try:
        code = run_service(**options)
    except ServiceError as exc:
        raise StartError(str(exc)) from None
    sys.exit(code)
