"""The ``queue`` evaluator: candidates go to eval workers through a shared folder (``--io-dir``).

The host's side of the directory channel (``pike_harness.worker.queue_channel``): it writes each
request into the folder and waits for a worker to write the result back. The workers run wherever
the folder is visible (``pikeh worker --io-dir DIR`` by hand, from Slurm, in Apptainer or Docker),
so the search can run on a login node or a laptop and the evaluations on GPU nodes, with no network
between them. A clear error names the folder when no worker answers. docs/cluster.md has recipes.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pike_harness.api import (
    EvalRequest,
    EvalResult,
    Evaluator,
    EvaluatorError,
    EvaluatorOptions,
    EvaluatorSpec,
    apply_options,
    check_protocol,
    evaluator_config,
    hookimpl,
)

IO_DIR_HELP = ("The queue folder shared with the workers (local disk or a shared file system). Required for "
               "queue; docker uses a private temporary one by default.")


@dataclass
class QueueConfig:
    """The queue evaluator's options (``pikeh eval --evaluator queue --help``)."""

    io_dir: str | None = field(default=None, metadata={"metavar": "DIR", "help": IO_DIR_HELP})
    queue_wait: float | None = field(default=None, metadata={
        "min": 0.0, "metavar": "SECONDS", "help": "How long submitted requests wait for a live worker before "
                                                  "the run fails with an error naming the folder. Default: 60."})
    queue_key_file: str | None = field(default=None, metadata={
        "metavar": "FILE", "help": "Shared key file (give the workers the same with --key-file): requests and "
                                   "results are signed, so nothing else writing to the folder can forge a verdict."})


class QueueEvaluator(Evaluator):
    """Submits to whatever workers serve ``--io-dir``; the workers' ``--device`` decides where they run."""

    name = "queue"
    Config = QueueConfig

    def __init__(self, options: EvaluatorOptions):
        from pike_harness.worker.api import QueueClient
        from pike_harness.worker.api import queue_channel as qc

        config = evaluator_config(options, self.Config)
        if not config.io_dir:
            raise EvaluatorError("the queue evaluator needs --io-dir DIR, the folder its workers serve "
                                 "(start one with `pikeh worker --io-dir DIR`)")
        if options.device not in ("auto", None):
            raise EvaluatorError(f"--device {options.device}: with the queue evaluator the workers choose their "
                                 "devices; give --device to `pikeh worker`")
        check_protocol(options)
        key = None
        if config.queue_key_file:
            try:
                key = qc.read_key(Path(config.queue_key_file))
            except qc.ChannelError as exc:
                raise EvaluatorError(str(exc)) from None
        self.options = options
        self.client = QueueClient(Path(config.io_dir), key=key, error_type=EvaluatorError,
                                  wait_for_worker_s=60.0 if config.queue_wait is None else float(config.queue_wait))

    def submit(self, request: EvalRequest) -> Future[EvalResult]:
        return self.client.submit(apply_options(request, self.options))

    def describe(self) -> dict[str, Any]:
        from pike_harness.worker.api import get_protocol

        protocol = get_protocol(self.options.protocol, self.options.protocol_params)
        workers = self.client.live_workers()
        return {"evaluator": self.name, **self.client.describe(),
                "devices": sorted({d for beat in workers.values() for d in beat.get("devices", [])}),
                "hosts": sorted({str(beat.get("host")) for beat in workers.values()}),
                "protocol": {**protocol.describe(), "params": dict(self.options.protocol_params)}}

    def stats(self) -> dict[str, Any]:
        """Each live worker's engine figures (``workers/<id>.engine-stats``, rewritten before each
        result is written): the build-cache, quiet-timing and scheduling figures ``local`` reports."""
        from pike_harness.worker.api import ENGINE_STATS_SUFFIX
        from pike_harness.worker.api import queue_channel as qc

        folder = self.client.qdir.workers
        live = qc.read_heartbeats(self.client.qdir)
        workers = {}
        for name in qc.names(folder):
            if name.endswith(ENGINE_STATS_SUFFIX) and name[:-len(ENGINE_STATS_SUFFIX)] in live:
                try:
                    data = qc.read_json(folder, name, max_bytes=qc.HEARTBEAT_BYTES)
                except (ValueError, OSError):
                    continue
                if data is not None:
                    workers[name[:-len(ENGINE_STATS_SUFFIX)]] = data
        return {"workers": workers}

    def close(self) -> None:
        self.client.close()


@hookimpl
def register_evaluators(register) -> None:
    register(EvaluatorSpec(
        name="queue",
        factory=QueueEvaluator,
        config=QueueConfig,
        description="workers anywhere that share a folder (--io-dir): started by hand, by Slurm or in a "
                    "container with `pikeh worker --io-dir DIR`",
    ))
