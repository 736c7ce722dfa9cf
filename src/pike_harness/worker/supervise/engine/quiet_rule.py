"""The quiet rule: while a candidate is timed, nothing else the engine started competes with it.

Launch-bound models (a large share of level3-pike) are timed as much on the host CPU as on the GPU,
so a compiler, a process importing torch or a neighbour's warm-up on the same cores skews their
time. ``timing_quiet`` is the one way every timing is kept quiet (the engine's sequence around
``timing_start``/``timing_end``, and any other path that times, such as paired re-timing). The
plan's ``quiet_mode`` picks how:

* ``stop`` (default): every process of ours that the quiet registry holds and the timing concerns
  (``quiet_scope``: the whole host, or the timed device only) is stopped (SIGSTOP) and resumed
  afterwards: candidates loading, building, warming up or waiting, builders, processes still
  starting. The timed process may use every core meanwhile.
* ``cores``: nothing is stopped; the timed process runs on the core kept for its device's timing
  (``pin_cpus``), which no load, build, start or reference ever uses, and goes back to the shared
  cores afterwards. Other work goes on, so the batch is not slowed, but the memory bus, caches and
  the GPU's other clients are still shared.

Either way the device's reference process is kept idle (``Oracle.idle``): it writes input sets for
candidates still waiting, which is CPU work of ours the registry does not hold.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pike_harness.worker.supervise.engine.core import Engine


def timing_cores(engine: Engine, device: str) -> set[int] | None:
    """The cores kept for ``device``'s timing (one per GPU, in device order), or None if none are kept."""
    if not engine.timing_cpus:
        return None
    gpus = [d for d in engine.devices if d.startswith("cuda")]
    if device not in gpus:
        return None
    cores = sorted(engine.timing_cpus)
    return {cores[gpus.index(device) % len(cores)]}


@contextlib.contextmanager
def timing_quiet(engine: Engine, device: str, session: int | None) -> Iterator[None]:
    """Keep ``device``'s timing of the process group ``session`` quiet for the block, in the plan's
    ``quiet_mode``. With quiet timing off (``--no-quiet-timing``) it only keeps the reference idle."""
    from pike_harness.worker.supervise.spawn import set_session_affinity

    with contextlib.ExitStack() as stack:
        quiet = engine.quiet
        devices = engine.devices if quiet is not None and quiet.host_wide else [device]
        for name in devices:
            stack.enter_context(engine.oracle(name).idle())
        mode = engine.plan.quiet_mode
        if quiet is not None and mode == "stop":
            stack.enter_context(quiet.quiet(device, session))
        cores = timing_cores(engine, device) if mode == "cores" and quiet is not None else None
        if cores and session is not None:
            set_session_affinity(session, cores)
            stack.callback(_back_to_shared, engine, session)
        yield


def _back_to_shared(engine: Engine, session: Any) -> None:
    from pike_harness.worker.supervise.spawn import set_session_affinity

    if engine.load_cpus:
        set_session_affinity(session, set(engine.load_cpus))
