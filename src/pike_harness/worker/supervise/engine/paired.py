"""The paired re-timing (``EvalRequest.paired``): a correct candidate and its task's eager reference,
timed in alternating blocks on the same device, the side not being timed stopped.

Why: a single timing of a launch-bound model on a shared host cannot be trusted (the host's speed
moves by tens of percent within minutes), and neither can the ratio of two timings taken apart. Short
alternating blocks see nearly the same host, so the drift cancels in each pair's ratio, and the
spread of the ratios says how sure the speedup is (``paired_stats``).

How, once the candidate's ordinary timing has passed (the device is still held for it):

1. The reference is evaluated as a candidate with ``baseline_mode="eager"`` in a sandboxed process of
   its own on the same device: loaded and checked like any candidate, so its blocks run the same
   timed loop with the same output checks.
2. With the device held and the engine's quiet rule in force (``timing_start``/``timing_end`` around
   the blocks, as around any timing), pairs of blocks run in the order R C, C R, R C, ... (a
   first-block effect lands on each side equally often) until the interval is within the target
   (``converged``), or ``max_pairs`` pairs, or ``max_seconds`` of blocks.
3. During each block the other side's whole sandbox is stopped (SIGSTOP to every process of its
   tree, and the block starts only once every thread of them is seen stopped), so a candidate's
   background thread cannot slow the reference's blocks to inflate its own speedup, nor the reverse.
4. With ``paired_cores="rotate"`` (the default) both blocks of a pair run with the timed process's main
   thread (the one that calls the model) pinned to one core, and the next pair on the next core the
   candidate may use, in an order drawn at random for each re-timing (``rotation``); the process pins
   and unpins itself around the block (``child``), so its other threads keep their cores. On a shared
   VM a host-bound model's speed depends on the core it runs on and moves with it from second to second
   (an H200 host, 2026-11-29: level3-pike 31's solution read 1.40-1.80 ms across the cores of one
   process, 30's eager reference 9.8-19 ms; ``reports/timing/process-speed-h200-2026-11-29/``). Left
   free, each side runs wherever the scheduler put it, so a pair can compare a fast core with a slow
   one, and all pairs can sit on one core's draw; rotated, the two sides of a pair share a core and the
   pairs sample the cores, so the interval covers the spread between them instead of one draw of it.
   Each block's reply says whether the pin held (the thread's mask at the end, and the kernel's count
   of its moves between CPUs, ``pinning``): when a side's thread left its core (a candidate that
   widened its own mask during its block, even if it narrowed it again before the end), or the pin
   could not be set, the candidate gets the flag ``paired_unpinned`` and the reason in ``flagged``:
   those pairs did not share a core.

Each candidate block makes one uncounted call on an input set its process was never shown, while
its sets last (``fresh_inputs``: a cache that waits for the blocks to replay is judged there); the
reference's blocks make none.

A reference that fails, or a side that cannot be stopped, leaves the candidate's verdict as it is:
``paired`` stays None, the flag ``paired_unavailable`` is set and ``environment["paired"]`` says why.
A candidate that breaks a rule in one of its blocks is judged for it, as in any timing.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pike_harness.worker import paired_stats
from pike_harness.worker.records import PairedSpec, PairedTiming
from pike_harness.worker.supervise import fresh_inputs, process_tree
from pike_harness.worker.supervise.errors import InfrastructureError

if TYPE_CHECKING:
    from pike_harness.worker.supervise.supervisor import Evaluation

UNAVAILABLE_FLAG = "paired_unavailable"
WIDE_FLAG = "paired_wide_interval"
UNPINNED_FLAG = "paired_unpinned"
STOP_WAIT_S = 5.0  # how long every thread of a stopped side may take to be seen stopped
BLOCK_WARMUP_FRACTION = 0.2  # each block's own warm-up, as a fraction of its timed length
BLOCK_MIN_CALLS = 3  # timed calls per block at least, however long one call takes
WARMUP_PAIRS = 1  # pairs of blocks run first and not counted
REFERENCE, CANDIDATE = "reference", "candidate"


class PairingError(Exception):
    """The engine could not pair (a side could not be stopped): the candidate's verdict stands."""


def block_params(request_params: dict[str, Any], spec: PairedSpec) -> dict[str, Any]:
    """The protocol parameters of one block: the request's own (flush, window), with a short warm-up
    and ``block_ms`` of timed calls."""
    return {**request_params, "warmup_ms": spec.block_ms * BLOCK_WARMUP_FRACTION, "rep_ms": spec.block_ms,
            "min_warmup": 1, "min_reps": BLOCK_MIN_CALLS, "estimate_calls": 2}


def retime(candidate: Evaluation) -> None:
    """Fill ``candidate.paired`` (or say why not); the candidate has passed its checks and timing."""
    from pike_harness.worker.supervise.supervisor import Concluded, Evaluation

    request = candidate.request
    assert request.paired is not None
    reference = Evaluation(replace(request, candidate_source=request.reference_source, baseline_mode="eager",
                                   paired=None, profile=False, fresh_input_sets=0, request_id=uuid.uuid4().hex),
                           candidate.oracle, candidate.settings)
    reference.share_abort(candidate)  # closing the engine stops the reference's stages too
    began = time.monotonic()
    try:
        failed = reference.load() or reference.check()
        if failed is not None:
            _unavailable(candidate, f"the reference failed as a timed baseline: {failed.category}"
                                    f" ({failed.check}): {(failed.reason or '')[:300]}")
            return
        candidate.paired = alternate(candidate, reference, request.paired)
    except Concluded as done:
        if done.result.request_id == candidate.request.request_id:
            raise  # the candidate broke a rule in one of its blocks: that is its verdict
        _unavailable(candidate, f"the reference failed in a paired block: {done.result.category}"
                                f" ({done.result.check}): {(done.result.reason or '')[:300]}")
    except (PairingError, InfrastructureError) as exc:
        if candidate.aborted:
            raise
        _unavailable(candidate, str(exc)[:500])
    finally:
        reference.close()
        candidate.stages.add("paired", time.monotonic() - began)


def alternate(candidate: Evaluation, reference: Evaluation, spec: PairedSpec) -> PairedTiming:
    """The alternating blocks until converged or a cap, the other side stopped during each block."""
    from pike_harness.worker.supervise import noise

    sides = {REFERENCE: reference, CANDIDATE: candidate}
    params = block_params(dict(candidate.request.protocol_params), spec)
    pairs: list[tuple[float, float]] = []
    windows: list[list[Any]] = []
    canaries: list[float | None] = []
    steals: list[float] = []
    stop = ""
    cores: list[int] = []
    unpinned = {REFERENCE: 0, CANDIDATE: 0}  # counted blocks whose thread left its core
    candidate._notify("timing_start")  # the engine's quiet rule, as around any timing
    began = time.monotonic()
    cpu_before = noise.read_cpu_times()
    rotate = rotation(candidate)
    candidate_fresh = False  # whether the candidate's latest block made a fresh call
    try:
        for _ in range(WARMUP_PAIRS):  # not counted: the first blocks after loading run on cold caches
            for side in (REFERENCE, CANDIDATE):
                with stopped(sides[CANDIDATE if side == REFERENCE else REFERENCE]):
                    sides[side].timed_block(params, core=rotate[0] if rotate else None)
        while not stop:
            order = (REFERENCE, CANDIDATE) if len(pairs) % 2 == 0 else (CANDIDATE, REFERENCE)
            block_ms: dict[str, float] = {}
            core = rotate[len(pairs) % len(rotate)] if rotate else None
            for side in order:
                other = sides[CANDIDATE if side == REFERENCE else REFERENCE]
                with stopped(other):
                    block = sides[side].timed_block(params, core=core)
                # The block's median call: one call descheduled by the host (a 20 ms stall in a 30 ms
                # block) moves a mean by half and says nothing about either side's speed.
                block_ms[side] = block.stats.median_ms
                if core is not None and left_core(block.reply):
                    unpinned[side] += 1
                windows.append([side, block.start_ns, block.end_ns])
                if side == CANDIDATE:
                    canaries.extend(block.canary_pair)
                    candidate_fresh = bool(block.fresh.fresh)
                if block.steal is not None:
                    steals.append(block.steal)
            pairs.append((block_ms[REFERENCE], block_ms[CANDIDATE]))
            if core is not None:
                cores.append(core)
            stop = _stop_reason(pairs, spec, time.monotonic() - began,
                                candidate.block_fresh if candidate_fresh else None)
    finally:
        seconds = time.monotonic() - began
        candidate._notify("timing_end")
    estimate = paired_stats.estimate(pairs)
    steal = noise.steal_fraction(cpu_before, noise.read_cpu_times())
    report = candidate.settings.noise.report(candidate.device, canaries[0], canaries[-1],
                                             steal if steal is not None else (max(steals) if steals else None))
    flagged = report.flagged
    if estimate.halfwidth > spec.target_halfwidth:
        worth = (f", worth {estimate.effective_n:.1f} independent ones (successive ratios correlate, "
                 f"rho {estimate.autocorrelation:.2f})") if estimate.effective_n < estimate.n else ""
        flagged = (f"the 95% interval is +-{estimate.halfwidth:.1%} after {estimate.n} pairs{worth} ({stop}), "
                   f"wider than the +-{spec.target_halfwidth:.1%} target") + (f"; {flagged}" if flagged else "")
        _flag(candidate, WIDE_FLAG)
    if report.flagged is not None:
        _flag(candidate, noise.NOISY_FLAG)
    left = [f"the {side}'s timed thread left its core in {count} of {len(pairs)} blocks (its mask changed, or the "
            "kernel moved it), so those pairs did not share a core" for side, count in unpinned.items() if count]
    if left:
        flagged = "; ".join(left) + (f"; {flagged}" if flagged else "")
        _flag(candidate, UNPINNED_FLAG)
    return PairedTiming(speedup=estimate.speedup, ci_low=estimate.ci_low, ci_high=estimate.ci_high,
                        pairs=[[r, c] for r, c in pairs], reference_ms=estimate.reference_ms,
                        candidate_ms=estimate.candidate_ms, stop=stop, effective_pairs=round(estimate.effective_n, 2),
                        seconds=seconds, noise=report,
                        flagged=flagged, windows=windows, cores=cores)


def rotation(candidate: Evaluation) -> list[int]:
    """The cores pair after pair runs on (``paired_cores="rotate"``), in a fresh random order each
    re-timing: those the candidate's sandbox may use when the re-timing starts, after the quiet rule
    placed it (every core it loads on under ``stop``, the core kept for timing under ``cores``). Empty
    (nothing pinned) with ``free``, or when the mask cannot be read.

    Why random: a re-timing that converges after a few pairs samples only the first cores of the order.
    In a fixed order (lowest first) every re-timing of a run would sample the same few cores of a
    16-core host, and a host whose low cores are slower or faster (a shared VM's are, by tens of percent
    for a launch-bound model) would bias every speedup the same way. Shuffled, each re-timing draws its
    cores without replacement, so its pairs are a sample of the host's cores and a run's re-timings do
    not share one bias."""
    session = candidate.session
    if candidate.settings.paired_cores != "rotate" or session is None:
        return []
    try:
        cores = sorted(os.sched_getaffinity(session))
    except (OSError, AttributeError):
        return []
    random.SystemRandom().shuffle(cores)
    return cores


def left_core(reply: dict[str, Any]) -> bool:
    """Whether a block sent with a core ran off it: no pin report (the pin could not be set), a mask
    other than that core at the block's end, or a move between CPUs during it."""
    pin = reply.get("pin")
    if not isinstance(pin, dict):
        return True
    moves = pin.get("moves")
    moved = isinstance(moves, int) and not isinstance(moves, bool) and moves != 0
    return pin.get("held") is not True or moved


def _stop_reason(pairs: list[tuple[float, float]], spec: PairedSpec, elapsed_s: float,
                 fresh: fresh_inputs.FreshTimes | None = None) -> str:
    """Why sampling stops after these pairs ("" to go on); never before two pairs (no interval).
    ``fresh``: the blocks' fresh calls so far, when the latest candidate block made one: while they
    condemn on calls too few for the median test (``fresh_inputs.undecided``), convergence does not
    stop it (the caps do), else a cache converging at the fewest pairs is only flagged."""
    if paired_stats.converged(pairs, spec.target_halfwidth, spec.min_pairs) and \
            (fresh is None or not fresh_inputs.undecided(fresh)):
        return "converged"
    if len(pairs) >= max(2, spec.max_pairs):
        return "max_pairs"
    if elapsed_s >= spec.max_seconds and len(pairs) >= 2:
        return "max_seconds"
    return ""


@contextlib.contextmanager
def stopped(evaluation: Evaluation) -> Iterator[None]:
    """Every process of ``evaluation``'s sandbox stopped for the body: SIGSTOP to its whole tree, then
    wait until each thread of each process is seen stopped (a signal is delivered asynchronously, so
    without the wait a running thread could still get a few instructions into the other side's block).
    SIGCONT afterwards, whatever happened."""
    session = evaluation.session
    if session is None:
        raise PairingError("the paired re-timing could not stop the other side: its process has ended")
    try:
        process_tree.signal_trees([session], signal.SIGSTOP)
        _wait_stopped(session)
        yield
    finally:
        process_tree.signal_trees([session], signal.SIGCONT)


def _wait_stopped(root: int) -> None:
    running = process_tree.wait_stopped([root], STOP_WAIT_S)
    if running:
        raise PairingError(f"the paired re-timing could not stop the other side: process {running[0]} "
                           f"still ran after {STOP_WAIT_S:g} s")


def _unavailable(candidate: Evaluation, reason: str) -> None:
    candidate.paired = None
    _flag(candidate, UNAVAILABLE_FLAG)
    candidate.environment["paired"] = reason


def _flag(candidate: Evaluation, flag: str) -> None:
    if flag not in candidate.flags:
        candidate.flags.append(flag)
