"""Where an engine's devices live: the gate, the trusted reference and the quiet registry of each.

``LocalDevices`` keeps them in this process (every transport uses it today; a Ray device actor builds
its own from its plan). The protocols below are the calls the engine and ``supervisor.Evaluation``
make on them, so a provider that keeps them elsewhere knows exactly what to forward.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from pike_harness.worker.check_plan import PlannedCall
from pike_harness.worker.records import EvalRequest
from pike_harness.worker.supervise.engine.options import Plan


class Hold(Protocol):
    """A lock-like turn on a device (a gate ticket, or one phase of a check session)."""

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool: ...

    def release(self) -> None: ...

    def cancel(self) -> None: ...


class CheckSession(Protocol):
    """One evaluation's turns on a gate with a shared check phase: ``check`` (with other candidates),
    then ``time`` (alone), or ``alone`` (a stage run again with no other model resident)."""

    def phase(self, name: str) -> Hold: ...

    def others_resident(self) -> bool: ...

    def end(self) -> None: ...


class GateFigures(Protocol):
    def to_dict(self) -> dict[str, Any]: ...


class Gate(Protocol):
    """One device's lock (``scheduling.DeviceGate``), served lowest ``rank`` first (the engine's work
    order; seq alone without one). With ``check_slots`` > 1 an evaluation takes a ``session`` (checks
    shared, timing alone); with 1 it checks and times in one hold of ``ticket``."""

    @property
    def check_slots(self) -> int: ...

    @property
    def stats(self) -> GateFigures: ...

    def ticket(self, seq: int, rank: tuple[int, ...] | None = None) -> Hold: ...

    def session(self, seq: int, rank: tuple[int, ...] | None = None) -> CheckSession: ...


class Oracle(Protocol):
    """A device's trusted reference (``reference.ReferenceOracle``), as ``supervisor.Evaluation`` calls
    it: hidden seeds from a per-run pool, input sets written for the candidate, and the comparison of
    the candidate's outputs file (one entry per planned call, or per input set for the timed calls'
    drawn outputs) against reference outputs it keeps."""

    def start(self) -> None: ...

    def hidden_seeds(self, request: EvalRequest) -> list[int]: ...

    def set_bytes(self, request: EvalRequest) -> int | None: ...

    def write_inputs(self, request: EvalRequest, seeds: list[int], path: Path, timeout_s: float,
                     tick: Callable[[], None] | None = None) -> tuple[str | None, str]: ...

    def compare(self, request: EvalRequest, seeds: list[int], outputs: Path, labels: list[str],
                plan: list[PlannedCall], *, warmed: bool, timeout_s: float) -> dict[str, Any]: ...

    def compare_timed(self, request: EvalRequest, seeds: list[int], outputs: Path, sets: list[int],
                      labels: list[str], plan: list[PlannedCall], *, timeout_s: float,
                      fresh_seeds: Sequence[int] = ()) -> dict[str, Any]: ...

    def idle(self) -> AbstractContextManager[Any]: ...

    def figures(self) -> dict[str, dict[str, float]]: ...

    def close(self) -> None: ...


class Quiet(Protocol):
    """The quiet registry (``scheduling.QuietRegistry``): processes it may pause while a candidate is
    timed, on its device (``host_wide`` False) or on the whole host."""

    @property
    def host_wide(self) -> bool: ...

    @property
    def pauses(self) -> int: ...

    @property
    def paused_s(self) -> float: ...

    def add(self, pid: int, marker: str, scope: str) -> int: ...

    def remove(self, token: int) -> None: ...

    def quiet(self, device: str, exempt_pid: int | None) -> AbstractContextManager[Any]: ...

    def paused_seconds(self, token: int | None) -> float: ...


class DeviceProvider(Protocol):
    """Where the engine's devices live: their names, one gate and one oracle each, and the quiet
    registry they share (None: no quiet timing)."""

    @property
    def devices(self) -> list[str]: ...

    @property
    def quiet(self) -> Quiet | None: ...

    def gate(self, device: str) -> Gate: ...

    def oracle(self, device: str) -> Oracle: ...

    def close(self) -> None: ...


class LocalDevices:
    """This process's devices, as ``plan`` says: a FIFO gate with the plan's check slots, a reference
    process and one shared quiet registry (when the plan times quietly)."""

    def __init__(self, plan: Plan, workdir: Path, *, environ: Mapping[str, str] | None = None):
        from pike_harness.worker.supervise.reference import ReferenceOracle
        from pike_harness.worker.supervise.scheduling import DeviceGate, QuietRegistry

        self.devices = list(plan.devices)
        self.quiet: Quiet | None = QuietRegistry(host_wide=plan.quiet_scope == "host") if plan.quiet_timing else None
        self.gates = {device: DeviceGate(device, check_slots=plan.check_slots[device])
                      for device in self.devices}
        self.oracles = {device: ReferenceOracle(device, Path(workdir), environ=environ) for device in self.devices}
        for oracle in self.oracles.values():  # pay the reference process's start-up now, in the background
            threading.Thread(target=quietly, args=(oracle.start,), name="pikeh-reference-start",
                             daemon=True).start()

    def gate(self, device: str) -> Gate:
        return self.gates[device]

    def oracle(self, device: str) -> Oracle:
        return self.oracles[device]

    def close(self) -> None:
        for oracle in self.oracles.values():
            with contextlib.suppress(Exception):
                oracle.close()


def quietly(function: Callable[..., Any], *args: Any) -> None:
    """Run a head start in the background; if it fails, the first real use reports the error."""
    with contextlib.suppress(Exception):
        function(*args)
