"""One submitted evaluation as the engine tracks it: its future, its events and its timestamps."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from typing import Any

from pike_harness.worker.records import EvalRequest, EvalResult


@dataclass
class JobTrace:
    """When one evaluation passed each point (time.monotonic seconds): ``Engine.stats`` counts them,
    and benchmarks read them (``engine.traces``) to see where time went."""

    seq: int
    task: str
    submitted: float
    device: str | None = None
    work_class: int = 2  # engine.work_order's class of its source (0 build, 1 JIT warm-up, 2 plain)
    load_start: float | None = None  # its CPU slot granted
    spawned: float | None = None  # its process in hand (taken from the pool, or started and ready)
    builds: list[tuple[float, float]] = field(default_factory=list)  # its load_inline builds (start, end)
    imported: float | None = None  # the candidate imported (its builds included)
    loaded: float | None = None  # ...and warmed up, when it is: it gives its CPU slot back
    check_granted: float | None = None  # the shared check phase (gates with check_slots > 1)
    checked: float | None = None
    granted: float | None = None  # the device held alone: timing (and checking, with one check slot)
    timing_start: float | None = None  # the ordinary timing's window
    timing_end: float | None = None
    paired_start: float | None = None  # the paired re-timing's blocks, when the request asks (engine.paired)
    paired_end: float | None = None
    released: float | None = None
    done: float | None = None
    category: str | None = None
    warmed: bool = False
    prestarted: bool | None = None
    # Seconds its process (and its load_inline builds) stood stopped by the quiet rule for other
    # candidates' timings: part of its starting, building, loading and waiting, not a stage of its own.
    paused_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def window_started(self, now: float) -> None:
        """A timed window began. Both windows are told by the same ``timing_start`` event (the quiet
        rule applies to both); the paired re-timing's is the one that begins after the ordinary
        timing's window has ended."""
        if self.timing_end is None:
            self.timing_start = now
        else:
            self.paired_start = now

    def window_ended(self, now: float) -> None:
        """The window ``window_started`` opened last has ended."""
        if self.paired_start is None:
            self.timing_end = now
        else:
            self.paired_end = now


@dataclass
class Job:
    """A submission: the request, where it may run, its future and trace, and the transport's listener."""

    seq: int
    request: EvalRequest
    fixed_device: bool
    future: Future[EvalResult]
    trace: JobTrace
    on_event: Callable[[str, Any], None] | None = None
    evaluation: Any = None  # the supervisor.Evaluation, once loading began
    key: tuple[int, int] = (0, 0)  # its place on ordered resources (engine.work_order.order_key)
    aborted: bool = False

    def tell(self, event: str, evaluation: Any) -> None:
        """Pass an event on to the transport's ``on_event``."""
        if self.on_event is not None:
            self.on_event(event, evaluation)
