"""The evaluation side's public API: everything an evaluator plugin may import, in one place.

An evaluator plugin is a transport around the evaluation engine (``local`` runs it in-process, the
``queue`` and ``docker`` evaluators reach worker processes through a shared folder, Ray its device
actors). What such a plugin needs beyond ``pike_harness.api`` (the host's contracts: ``Evaluator``,
``EvalRequest``, options) is here, and only here: the engine and its settings, the queue folder's
client and files, the bridge channel, the liveness rules that decide when a silent evaluation is
lost, and the sandbox's secret and orphan rules. Plugins never import ``pike_harness.worker.*``
modules directly, so the worker's internals can move without breaking a third-party evaluator.
Standard library only at import time (the engine loads torch when it starts a candidate).
"""

from __future__ import annotations

from pike_harness.worker import queue_channel
from pike_harness.worker.channel import Channel, ChannelClosed, ProtocolViolation
from pike_harness.worker.environment import host_info
from pike_harness.worker.inside.protocols import get_protocol
from pike_harness.worker.queue_client import QueueClient
from pike_harness.worker.supervise.devices import resolve_devices
from pike_harness.worker.supervise.engine import (
    Engine,
    EngineConfig,
    EngineError,
    EngineOptions,
    HostShare,
    LocalDevices,
    resolve,
)
from pike_harness.worker.supervise.errors import InfrastructureError
from pike_harness.worker.supervise.isolation import UNSAFE_OPTION_HELP
from pike_harness.worker.supervise.liveness import HOLD_GRACE_S, BeatWatch, HoldTimer, hold_deadline_s
from pike_harness.worker.supervise.sandbox import is_secret_name, sweep_orphans
from pike_harness.worker.supervise.service import ENGINE_STATS_SUFFIX
from pike_harness.worker.supervise.trusted_files import remove_tree, tail

__all__ = [
    "remove_tree",
    "ENGINE_STATS_SUFFIX",
    "HOLD_GRACE_S",
    "UNSAFE_OPTION_HELP",
    "BeatWatch",
    "Channel",
    "ChannelClosed",
    "Engine",
    "EngineConfig",
    "EngineError",
    "EngineOptions",
    "HoldTimer",
    "HostShare",
    "InfrastructureError",
    "LocalDevices",
    "ProtocolViolation",
    "QueueClient",
    "get_protocol",
    "hold_deadline_s",
    "host_info",
    "is_secret_name",
    "queue_channel",
    "resolve",
    "resolve_devices",
    "sweep_orphans",
    "tail",
]
