"""The ``ray`` evaluator: candidates checked and timed on the GPUs of a Ray cluster, any number of nodes.

One device actor per whole GPU (``num_gpus=1``) runs the evaluation engine
(``pike_harness.worker.supervise.engine``) for its device, the same object the ``local`` evaluator and the
queue/docker workers run, so a verdict and the conditions of its timing do not depend on the
transport; this plugin is the transport (placement, retries, node loss). Ray is an optional extra
(``pip install 'pike-harness[ray]'``): nothing here imports it until the evaluator is built, and
even then only a separate bridge process does (``bridge.py``). Design and cluster recipes:
docs/cluster.md ("Ray").
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pike_harness.api import EvaluatorOptions, EvaluatorSpec, hookimpl
from pike_harness.worker.api import UNSAFE_OPTION_HELP


@dataclass
class RayConfig:
    """The ray evaluator's options (``pikeh eval --evaluator ray --help``)."""

    ray_address: str | None = field(default=None, metadata={
        "metavar": "ADDR", "help": "The cluster: HOST:PORT of its head (as `ray start --head` prints), "
                                   "ray://HOST:10001 from outside the cluster, or auto (default: $RAY_ADDRESS, "
                                   "else the cluster this machine belongs to)."})
    ray_placement: str | None = field(default=None, metadata={
        "choices": ("task", "spread"), "help": "task (default): all evaluations of a task on one node, so its "
                                               "baseline and candidates share a host (the node is a hash of the "
                                               "task and the host: every run and resume agrees); spread: any GPU "
                                               "of the cluster (identical nodes only)."})
    ray_retries: int | None = field(default=None, metadata={
        "min": 0, "help": "Times an evaluation is re-run elsewhere after a node, worker or actor failure (or a "
                          "stuck evaluation) before the run stops with an infrastructure error. These are all the "
                          "tries it gets: the run loop adds none. Default 2."})
    ray_inflight: int | None = field(default=None, metadata={
        "min": 1, "help": "Candidates this run keeps in flight per GPU (loading, waiting or being timed); the "
                          "GPU's engine queues what every run sends first come, first served. Default: the "
                          "engine's capacity (its CPU slots, the node's CPUs per GPU at most, plus the loaded "
                          "candidates that may wait)."})
    ray_build_cache: str | None = field(default=None, metadata={
        "metavar": "DIR|off", "help": "The load_inline build cache on each node (a node-local path; a shared file "
                                      "system works too). Default: $PIKEH_CACHE_DIR or ~/.cache/pike-harness on "
                                      "the node; 'off' builds every candidate from scratch."})
    ray_node_dir: str | None = field(default=None, metadata={
        "metavar": "DIR", "help": "Node-local folder for scratch and reference files (default /tmp/pikeh-ray)."})
    unsafe_no_sandbox: bool | None = field(default=None, metadata={"help": UNSAFE_OPTION_HELP, "flag": True})
    # Not CLI options: tests shrink them.
    ray_hold_grace: float | None = field(default=None, metadata={
        "cli": False, "help": "Seconds added to a request's stage limits before its device actor counts it "
                              "stuck (liveness.HoldTimer)."})
    ray_connect_timeout: float | None = field(default=None, metadata={
        "cli": False, "help": "Seconds to wait for the bridge to reach the cluster."})


def _build(options: EvaluatorOptions):
    from .evaluator import RayEvaluator

    return RayEvaluator(options)


@hookimpl
def register_evaluators(register) -> None:
    register(EvaluatorSpec(
        name="ray",
        factory=_build,
        config=RayConfig,
        description="a Ray cluster's GPUs, any number of nodes: one actor per whole GPU runs the evaluation "
                    "engine (needs pip install 'pike-harness[ray]')",
    ))
