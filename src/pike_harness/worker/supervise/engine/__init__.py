"""The evaluation engine: the one object every evaluator runs, whatever carries requests to it.

Every evaluator (``local`` in-process, ``queue`` and ``docker`` workers behind a shared folder, Ray's
device actors) judges a candidate the same way, so a verdict or a runtime never depends on
``--evaluator``. What they share is this object; an evaluator plugin is a *transport* around it.

An ``Engine`` owns:

* the devices, through a ``DeviceProvider``: per device a FIFO ``DeviceGate`` (one timing at a time,
  oldest loaded candidate first; checks in a shared phase of ``check_slots`` that never overlaps a
  timing), a trusted ``ReferenceOracle``, and the ``QuietRegistry`` that pauses neighbours while a
  candidate is timed. ``LocalDevices`` (the default) keeps them in this process; a transport whose
  devices live elsewhere (a Ray actor) passes its own provider;
* CPU slots (``OrderedSlots``) for loading, building and JIT warm-up, and process-start slots, granted
  longest CPU work first (``work_order``);
* the content-addressed ``load_inline`` build cache and the per-source Triton/Inductor cache roots;
* pre-started candidate processes (``PrestartPool``), CPU pinning (loads stay off the timing cores)
  and the prewarm policy;
* the evaluation sequence: load -> warm -> wait for the device -> check -> time -> close, on one
  thread per admitted evaluation, each step an ``Evaluation`` (``supervisor``) method.

Public API (stable; a change is announced in a commit starting "engine API:")::

    engine = Engine(EngineConfig(device="cpu", jobs=4), devices=None, error_type=InfrastructureError)
    future = engine.submit(request, fixed_device=None, on_event=None)  # Future[EvalResult]
    engine.abort([future])            # cancel queued, kill running (future raises error_type)
    engine.precompile(requests, jobs=None, on_done=None) -> int   # load + warm only, fills JIT caches
    engine.describe() -> dict         # settings, for run metadata
    engine.stats(stages=False) -> dict  # gates, slots, quiet timing, build cache, pre-start figures
                                        # (stages=True: each candidate's stages, each device's idle causes)
    engine.close()                    # abort what is in flight, stop every process it started

``submit``: ``fixed_device`` True runs on ``request.device``, False lets the engine choose the least
busy device (ties go to the one with more pre-started processes), None (default) means "fixed when
``request.device`` is one of the engine's devices". ``on_event(event, evaluation)`` hears
``spawned``, ``loaded``, ``check_granted`` (the shared check phase, when the gate has one),
``granted``, ``timing_start``, ``timing_end`` (twice with a paired re-timing: the ordinary timing's
window, then the paired blocks') and ``released`` (a transport records its own
timestamps from it; ``granted`` is told after the device is taken and ``released`` before it is
freed, so recorded windows lie inside the real hold). Infrastructure failures end the future with
``error_type(message)`` (``local`` passes the host's ``EvaluatorError``); verdicts, however bad, are
results.

The package, one job per module:

* ``options``: the tunables (``EngineOptions``, ``EngineConfig``) and ``resolve(config, devices) -> Plan``,
  which checks every setting and fills every default without touching the host;
* ``devices``: the gate, oracle and quiet-registry interfaces, typed against the calls made on them,
  and ``LocalDevices``;
* ``sequence``: one evaluation's load -> warm -> check -> time sequence, as a small state machine;
* ``jobs``: a submission's future, listener and timestamps (``JobTrace``);
* ``work_order``: the order CPU work starts in (a job's work class from its source, the ordered queue);
* ``quiet_rule``: ``timing_quiet``, the one context manager every timing runs in;
* ``stage_breakdown``: where a run's time went, read off the traces (``stats(stages=True)``);
* ``core``: the ``Engine`` (build = resolve, then the start step that affects the host);
* ``paired``: the paired re-timing a request may ask for (``EvalRequest.paired``): the candidate and its
  eager reference in alternating blocks, the other side stopped during each block.

GPU side: torch, triton and the standard library only (no click, no pluggy, no ``pike_harness.api``),
so the same engine runs in a worker container. docs/evaluator.md, "Writing an evaluator".
"""


from pike_harness.worker.supervise.engine.core import Engine
from pike_harness.worker.supervise.engine.devices import (
    CheckSession,
    DeviceProvider,
    Gate,
    Hold,
    LocalDevices,
    Oracle,
    Quiet,
)
from pike_harness.worker.supervise.engine.jobs import JobTrace
from pike_harness.worker.supervise.engine.options import (
    CACHE_ENV,
    PREWARM_CHOICES,
    EngineConfig,
    EngineError,
    EngineOptions,
    HostShare,
    Plan,
    cache_root,
    default_cache_root,
    default_check_slots,
    default_cpu_slots,
    for_isolation,
    resolve,
)

__all__ = [
    "CACHE_ENV",
    "PREWARM_CHOICES",
    "CheckSession",
    "DeviceProvider",
    "Engine",
    "EngineConfig",
    "EngineError",
    "EngineOptions",
    "Gate",
    "Hold",
    "HostShare",
    "JobTrace",
    "LocalDevices",
    "Oracle",
    "Plan",
    "Quiet",
    "cache_root",
    "default_cache_root",
    "default_check_slots",
    "default_cpu_slots",
    "for_isolation",
    "resolve",
]
