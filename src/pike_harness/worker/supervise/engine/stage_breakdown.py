"""Where a run's time went: each candidate's stages, and why each device stood idle.

Both are read off the engine's ``JobTrace`` timestamps after the fact, so they cost nothing while
candidates run. A candidate's stages partition its time from submission to done (they add up to it
exactly): the next bottleneck of a batch is the stage with the largest total. A device's idle time
(no timing and no paired block on it) is split by what its candidates were doing meanwhile, most
device-bound first: ``checks`` (checked calls in the shared phase, which keep a timing out),
``handover`` (a ready candidate not yet granted: the gate's own latency), ``builds``, ``starts``
(process starts), ``loading`` (importing or warming up), and ``nothing_ready`` (waiting for a CPU
slot, or nothing submitted). Beside the stages, each candidate's ``paused_s``: how long the quiet rule
stopped its process and builds for other candidates' timings, and ``last``, the candidate that ended the
run: on a busy GPU a long warm-up is stopped for most of the timings that happen meanwhile, so what ends
a batch can be a candidate's CPU work plus the device's timings, not either alone.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pike_harness.worker.supervise.engine.jobs import JobTrace

STAGES = ("slot_wait", "starting", "building", "importing", "warming", "device_wait", "checking", "timing",
          "paired", "closing")
IDLE_CAUSES = ("checks", "handover", "builds", "starts", "loading", "nothing_ready")


def candidate_stages(trace: JobTrace) -> dict[str, float]:
    """Seconds in each of ``STAGES`` from submission to done; they add up to ``done - submitted``.

    A stage's time is the span up to the timestamp that ends it; a stage an evaluation never reached
    (it failed earlier) is 0. ``building`` is the part of the import spent in ``load_inline`` builds;
    ``timing`` is the ordinary timing, ``paired`` the paired re-timing after it (its reference's load
    and checks, then the alternating blocks)."""
    out = dict.fromkeys(STAGES, 0.0)
    one_hold = trace.check_granted is None
    milestones = [(trace.load_start, "slot_wait"), (trace.spawned, "starting"), (trace.imported, "importing"),
                  (trace.loaded, "warming"), (trace.check_granted, "device_wait"), (trace.checked, "checking"),
                  (trace.granted, "device_wait"), (trace.timing_start, "checking" if one_hold else "timing"),
                  (trace.timing_end, "timing"), (trace.paired_end, "paired"), (trace.done, "closing")]
    previous = trace.submitted
    for moment, stage in milestones:
        if moment is None:
            continue
        moment = max(moment, previous)
        out[stage] += moment - previous
        previous = moment
    built = min(sum(max(0.0, end - start) for start, end in trace.builds), out["importing"])
    out["building"], out["importing"] = built, out["importing"] - built
    return out


def _intervals(trace: JobTrace) -> list[tuple[str, float, float]]:
    """(state, start, end) for what the candidate did that decides a device's idle cause."""
    spans: list[tuple[str, float | None, float | None]] = [("starts", trace.load_start, trace.spawned)]
    spans += [("builds", start, end) for start, end in trace.builds]
    spans.append(("loading", trace.spawned, trace.loaded))
    first_grant = trace.check_granted or trace.granted
    spans.append(("handover", trace.loaded, first_grant))
    if trace.check_granted is not None:
        spans.append(("checks", trace.check_granted, trace.checked))
        spans.append(("handover", trace.checked, trace.granted))
    return [(state, start, end) for state, start, end in spans
            if start is not None and end is not None and end > start]


def device_idle(traces: Iterable[JobTrace], device: str, begin: float, end: float) -> dict[str, float]:
    """Seconds between ``begin`` and ``end`` that ``device`` was not timing, by ``IDLE_CAUSES``.

    One sweep over the candidates' intervals (sorted events, counts per state), so a 9,000-evaluation
    run costs milliseconds."""
    mine = [t for t in traces if t.device == device]
    events: list[tuple[float, int, str]] = []
    for trace in mine:
        for start, stop in ((trace.timing_start, trace.timing_end), (trace.paired_start, trace.paired_end)):
            if start is not None:
                stop = stop or trace.done or end
                events += [(start, 1, "timing"), (stop, -1, "timing")]
        for state, start, stop in _intervals(trace):
            events += [(start, 1, state), (stop, -1, state)]
    events.sort(key=lambda e: e[0])
    counts = dict.fromkeys(("timing", *IDLE_CAUSES), 0)
    idle = dict.fromkeys(IDLE_CAUSES, 0.0)
    now = begin
    for moment, change, state in [*events, (end, 0, "timing")]:
        moment = min(max(moment, begin), end)
        if moment > now and counts["timing"] <= 0:
            cause = next((c for c in IDLE_CAUSES[:-1] if counts[c] > 0), "nothing_ready")
            idle[cause] += moment - now
        now = max(now, moment)
        counts[state] += change
    return idle


def breakdown(traces: list[JobTrace], devices: list[str], begin: float | None, end: float) -> dict[str, Any]:
    """The run's breakdown: per-stage totals, each candidate's stages (submission order) and each
    device's idle seconds by cause."""
    candidates = []
    totals = dict.fromkeys(STAGES, 0.0)
    for trace in sorted(traces, key=lambda t: t.seq):
        if trace.done is None:
            continue
        stages = candidate_stages(trace)
        for stage, seconds in stages.items():
            totals[stage] += seconds
        candidates.append({"seq": trace.seq, "task": trace.task, "device": trace.device,
                           "work_class": trace.work_class, "category": trace.category,
                           "total_s": trace.done - trace.submitted, **{f"{k}_s": v for k, v in stages.items()},
                           "paused_s": trace.paused_s})
    idle = {d: device_idle(traces, d, begin, end) for d in devices} if begin is not None else {}
    finished = [(t.done, t) for t in traces if t.done is not None]
    last = max(finished, key=lambda pair: pair[0], default=None)
    return {"totals_s": totals, "candidates": candidates, "device_idle_s": idle,
            "last": _last(last[1], last[0], begin) if last is not None else None}


def _last(trace: JobTrace, done: float, begin: float | None) -> dict[str, Any]:
    """The candidate that finished last: what ended the run (its longest stage, how long the quiet rule
    stopped it for others' timings)."""
    stages = candidate_stages(trace)
    longest = max(stages, key=lambda stage: stages[stage])
    return {"seq": trace.seq, "task": trace.task, "category": trace.category,
            "done_s": done - (trace.submitted if begin is None else begin),
            "longest_stage": longest, "longest_stage_s": stages[longest], "paused_s": trace.paused_s}


def format_breakdown(figures: dict[str, Any]) -> str:
    """The breakdown as a few lines of text (``pikeh eval --stages``, the throughput benchmark)."""
    totals = figures.get("totals_s") or {}
    lines = ["stage totals (s, all candidates): " + ", ".join(f"{k} {v:.1f}" for k, v in totals.items())]
    for device, idle in (figures.get("device_idle_s") or {}).items():
        lines.append(f"{device} idle (s, by cause): " + ", ".join(f"{k} {v:.1f}" for k, v in idle.items()))
    last = figures.get("last")
    if last:
        lines.append(f"last to finish: {last['task']} (#{last['seq']}, {last['category']}) at {last['done_s']:.1f} s; "
                     f"its longest stage {last['longest_stage']} {last['longest_stage_s']:.1f} s; stopped "
                     f"{last['paused_s']:.1f} s for others' timings")
    return "\n".join(lines)
