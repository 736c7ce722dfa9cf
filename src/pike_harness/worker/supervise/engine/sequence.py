"""One evaluation's way through the engine: load -> warm -> wait for the device -> check -> time -> close.

Each step is a ``supervisor.Evaluation`` method; this module decides the order, which lock is held for
each (a CPU slot while loading and warming, the device's gate while checking and timing), the quiet
registry's part (the candidate is registered while it waits; its neighbours are paused while it is
timed) and the events a transport hears. The states, in order:

1. **slot**: wait for a CPU slot (``engine.work_order``: longest CPU work first, or submission
   order); a job aborted meanwhile ends here.
2. **load**: pick the device, start (or take a pre-started) candidate process, import and build it.
3. **warm**: one call off the device lock, for candidates whose first call compiles (``prewarm``).
4. **device**: give the CPU slot back, then on a gate with check slots: **check** in the shared
   phase and **time** alone (either run **alone** again after running out of memory beside others);
   on a gate without: check and time in one hold of the device.
5. **close**: stop the candidate's processes, record the verdict (or the infrastructure error).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pike_harness.worker.records import EvalResult
from pike_harness.worker.supervise.engine.devices import CheckSession, Hold
from pike_harness.worker.supervise.engine.jobs import Job
from pike_harness.worker.supervise.engine.quiet_rule import timing_quiet
from pike_harness.worker.supervise.errors import InfrastructureError

if TYPE_CHECKING:
    from pike_harness.worker.supervise.engine.core import Engine

JIT_FLAGS = ("technique:triton", "technique:torch.compile")


class EvaluationSequence:
    """Runs one job through the states above on the engine's slots, devices and quiet registry."""

    def __init__(self, engine: Engine, job: Job):
        self.engine = engine
        self.job = job
        self.trace = job.trace
        self.quiet_token: int | None = None  # the candidate's membership of the quiet registry
        self.evaluation: Any = None

    def run(self, cpu_done: Callable[[], None] = lambda: None) -> None:
        """The states above; ``cpu_done`` is called when the CPU slot is given back (the work queue
        counts the builds in progress by it)."""
        from pike_harness.worker.supervise.supervisor import Evaluation

        engine, job, trace = self.engine, self.job, self.job.trace
        if not job.future.set_running_or_notify_cancel():
            return
        device: str | None = None
        slot_held = False
        slots = engine.cpu_slots(job)
        try:
            slots.acquire(job.key)  # 1. slot
            slot_held = True
            if engine.closing or job.aborted:
                raise InfrastructureError("the evaluation was aborted")
            device = engine.pick_device(job)  # 2. load
            trace.device, trace.load_start = device, time.monotonic()
            evaluation = self.evaluation = Evaluation(replace(job.request, device=device),
                                                      engine.oracle(device), engine.settings)
            evaluation.start_key = job.key
            engine.track(job, evaluation)
            evaluation.listener = self._listener(device)
            result = evaluation.load()
            trace.imported = time.monotonic()
            trace.prestarted = bool(evaluation.environment.get("prestarted"))
            if result is None and self.wants_warm(evaluation):  # 3. warm
                trace.warmed = True
                result = evaluation.warm()
            trace.loaded = time.monotonic()
            job.tell("loaded", evaluation)
            slots.release()  # 4. device
            slot_held = False
            cpu_done()
            if result is None:
                result = self._on_device(evaluation, device)
            trace.category = result.category  # 5. close
            evaluation.close()
            trace.done = engine.last_done = time.monotonic()
            job.future.set_result(result)
        except InfrastructureError as exc:
            trace.category = "infrastructure_error"
            job.future.set_exception(engine.error_type(str(exc)))
        except BaseException as exc:  # a bug: the caller sees it rather than a future that never ends
            trace.category = "bug"
            job.future.set_exception(exc)
        finally:
            if trace.done is None:
                trace.done = time.monotonic()
            if slot_held:
                slots.release()
            self._leave_quiet()
            if self.evaluation is not None:
                trace.paused_s += self.evaluation.build_paused_s
                self.evaluation.close()
            engine.untrack(self.evaluation, device)

    def wants_warm(self, evaluation: Any) -> bool:
        """The prewarm policy: which candidates get one call while loading (JIT compiles off the gate)."""
        from pike_harness.worker.inside.baseline_modes import JIT_MODES

        prewarm = self.engine.plan.prewarm
        if prewarm == "all":
            return True
        if prewarm == "jit":
            return (any(flag in evaluation.flags for flag in JIT_FLAGS)
                    or evaluation.request.baseline_mode in JIT_MODES)
        return False

    def _leave_quiet(self) -> None:
        """Leave the quiet registry (holding the device, or done), noting how long it was stopped in it."""
        quiet = self.engine.quiet
        if self.quiet_token is not None and quiet is not None:
            self.job.trace.paused_s += quiet.paused_seconds(self.quiet_token)
            quiet.remove(self.quiet_token)
            self.quiet_token = None

    def _listener(self, device: str) -> Callable[[str, Any], None]:
        """The Evaluation's hook: register the candidate for quiet timing, keep its timing quiet
        (``quiet_rule.timing_quiet``), note the times, and pass each event on to the transport's
        ``on_event``."""
        quiet_blocks: list[Any] = []
        quiet = self.engine.quiet
        job = self.job

        def listener(event: str, ev: Any) -> None:
            if event == "build_start":
                job.trace.builds.append((time.monotonic(), time.monotonic()))
                return  # the engine's own figures (stage_breakdown), not a transport's event
            if event == "build_end":
                job.trace.builds[-1] = (job.trace.builds[-1][0], time.monotonic())
                return
            if event == "spawned":
                job.trace.spawned = time.monotonic()
            if event == "spawned" and quiet is not None:
                token = self.quiet_token = quiet.add(ev.popen.pid, ev.marker, device)
                ev.paused_s = lambda: quiet.paused_seconds(token)
            elif event == "timing_start":
                context = timing_quiet(self.engine, device, ev.session)
                context.__enter__()
                quiet_blocks.append(context)
                job.trace.window_started(time.monotonic())  # once quiet: the window is the quiet one
            elif event == "timing_end":
                job.trace.window_ended(time.monotonic())
                while quiet_blocks:
                    quiet_blocks.pop().__exit__(None, None, None)
            job.tell(event, ev)

        return listener

    def _on_device(self, evaluation: Any, device: str) -> EvalResult:
        """Wait for the device (policing the idle candidate), then correctness and timing holding it."""
        gate = self.engine.gate(device)
        if gate.check_slots > 1:
            return self._in_phases(evaluation, gate.session(self.job.seq, self.job.key))
        ticket = gate.ticket(self.job.seq, self.job.key)
        try:
            early = self._hold(evaluation, ticket)
        except BaseException:
            ticket.cancel()
            ticket.release()  # held, if the failure came after the grant
            raise
        if early is not None:
            ticket.cancel()
            return early
        try:
            return evaluation.finish()
        finally:
            # Stamped and told before the lock opens: a window a transport records from the events
            # then lies inside the real hold, so two recorded windows on one device never overlap.
            self.trace.released = time.monotonic()
            try:
                self.job.tell("released", evaluation)
            finally:
                ticket.release()

    def _in_phases(self, evaluation: Any, session: CheckSession) -> EvalResult:
        """The checked calls in the device's shared check phase (several candidates at once, never
        while one is timed), then timing holding the device alone. A candidate that runs out of device
        memory while other candidates' models are resident runs that stage again with none resident."""
        from pike_harness.worker.supervise.supervisor import RetryAlone

        trace = self.trace
        try:
            early = evaluation.wait_for(session.phase("check"))
            if early is not None:
                return early
            trace.check_granted = time.monotonic()
            self.job.tell("check_granted", evaluation)
            alone = False
            try:
                result = evaluation.check(shared=True)
            except RetryAlone:
                trace.checked = time.monotonic()
                early = self._hold(evaluation, session.phase("alone"))
                if early is not None:
                    return early
                alone, result = True, evaluation.check()
            trace.checked = trace.checked or time.monotonic()
            if result is not None:
                return result
            if not alone:
                early = self._hold(evaluation, session.phase("time"))
                if early is not None:
                    return early
                try:
                    return evaluation.time(shared=session.others_resident())
                except RetryAlone:
                    early = self._hold(evaluation, session.phase("alone"))
                    if early is not None:
                        return early
            return evaluation.time()
        finally:
            try:
                if trace.granted is not None:  # before the session ends, as in _on_device
                    trace.released = time.monotonic()
                    self.job.tell("released", evaluation)
            finally:
                session.end()

    def _hold(self, evaluation: Any, phase: Hold) -> EvalResult | None:
        """Wait for a lock (a gate ticket, or a session phase) that holds the device alone; a result means
        the candidate broke a limit meanwhile."""
        from pike_harness.worker.supervise.spawn import set_session_affinity

        early = evaluation.wait_for(phase)
        if early is not None:
            return early
        if self.trace.granted is None:
            self.trace.granted = time.monotonic()
        self._leave_quiet()  # the candidate holding the device is never paused
        # Stopping the others frees every core for it; under "cores" the timing cores stay reserved.
        cpus = self.engine.all_cpus if self.engine.plan.quiet_mode == "stop" else self.engine.load_cpus
        if cpus and evaluation.session is not None:
            set_session_affinity(evaluation.session, set(cpus))
        self.job.tell("granted", evaluation)
        return None
