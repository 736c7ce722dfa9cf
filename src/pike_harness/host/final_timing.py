"""Each task's final best, timed paired against its eager reference when the task's search ends.

Why: the search-time runtime that made an attempt the best is one timing among hundreds, on a host
whose speed drifts; the winner is partly the luckiest. So once a task's search is done (budget spent
or stopped normally), its final best (the rule of final_best.py) is submitted once more through the
run's evaluator with ``EvalRequest.paired``: the evaluator times it against the task's eager reference
in alternating blocks until the speedup's 95% interval is narrow enough, and the outcome is journaled
as a ``final_timing`` event. No LLM query, nothing charged to the budget.

Resume: a task whose ``final_timing`` names the same best (key and code hash) is not timed again; a
re-timing is bracketed by ``eval_start`` and its end like any evaluation, so a Ctrl-C during it leaves
an ``eval_abort`` and the resume times it again. A result without a paired timing (the evaluator
could not pair, the code failed its checks again) is journaled with its reason, and the report falls
back, visibly, to the search-time number.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from pike_harness.contracts.journal import FINAL_TIMING_PREFIX, EvalAbort, FinalTiming
from pike_harness.contracts.model import EvalResult, PairedSpec, PairedTiming
from pike_harness.host.final_best import Contender, contender
from pike_harness.host.run_signals import RunInterrupted
from pike_harness.host.store import sha256
from pike_harness.kit.short_text import shorten

if TYPE_CHECKING:
    from pike_harness.host.run_services import RunServices
    from pike_harness.host.task_run import TaskRun


def best_from_journal(runner: RunServices, task_run: TaskRun) -> Contender | None:
    """The final best of a task that ended in an earlier process, from its journaled attempts (its code
    read from each attempt's mirror, for the ``torch.jit.trace`` rule)."""
    config, ref = runner.config, task_run.task.ref
    best: Contender | None = None
    for (task, key), event in runner.replay.attempts.items():
        if task != ref or event.get("category") != "correct":
            continue
        code = _mirrored_code(runner, ref, key, event.get("index"), event.get("code_sha256"))
        rival = contender(key=key, index=event.get("index"), category=event.get("category"),
                          runtime_ms=event.get("runtime_ms"), code=code, code_sha256=event.get("code_sha256"),
                          query_budget=config.query_budget, include_jit_trace=config.include_jit_trace)
        if rival is not None and rival.beats(best):
            best = rival
    return best


def time_final_best(runner: RunServices, task_run: TaskRun) -> None:
    """Re-time the task's final best paired (once per best), journal it, and show it."""
    config, ref, best = runner.config, task_run.task.ref, task_run.best
    if not config.final_retime or best is None:
        return
    recorded = runner.replay.final_timings.get(ref)
    if recorded is not None and (recorded.get("best_key"), recorded.get("code_sha256")) == (best.key, best.code_sha256):
        task_run.note_final_timing(recorded, say=False)  # timed (and logged) by an earlier process
        return
    key = FINAL_TIMING_PREFIX + best.key
    code = _mirrored_code(runner, ref, best.key, best.index, best.code_sha256)
    if code is None:
        _journal(runner, task_run, FinalTiming(task=ref, key=key, best_key=best.key, code_sha256=best.code_sha256 or "",
                                               result=None, why="the best attempt's code.py is missing or does "
                                               "not match the journal's hash"))
        return
    if runner.replay.eval_starts.get((ref, key), 0) >= 2:
        _journal(runner, task_run, FinalTiming(task=ref, key=key, best_key=best.key, code_sha256=sha256(code),
                                               result=None, why="the re-timing was interrupted twice (the harness "
                                               "died while it ran)"))
        return
    runner.progress.update(ref, done=False, phase="re-timing")
    spec = PairedSpec(target_halfwidth=config.retime_halfwidth,
                      max_seconds=retime_seconds(config.retime_max_seconds, config.retime_share,
                                                 time.time() - task_run.search_began))
    runner.open_evals.begin(ref, key)
    try:
        result = runner.run_evaluation(task_run.task, code, paired=spec)
    except BaseException as exc:  # the user, the evaluator or a bug stopped it: the resume times it again
        runner.open_evals.end(EvalAbort(task=ref, key=key, why=type(exc).__name__))
        raise
    if runner.stopping:
        runner.open_evals.end(EvalAbort(task=ref, key=key, why="run stopping"))
        raise RunInterrupted()
    event = FinalTiming(task=ref, key=key, best_key=best.key, code_sha256=sha256(code), result=result.to_dict(),
                        why=None if result.paired is not None else unpaired_reason(result))
    if not runner.open_evals.end(event):
        raise RunInterrupted()  # the stopping run already closed it with an eval_abort
    task_run.note_final_timing(event.to_dict())


RETIME_FLOOR_S = 5.0  # the blocks a re-timing always gets: a few pairs even after the shortest search


def retime_seconds(max_seconds: float, share: float, search_s: float) -> float:
    """Seconds of timed blocks a task's final re-timing may take: ``share`` of its search time, at least
    RETIME_FLOOR_S and at most ``max_seconds``. Why: at the default 60 s, a run of a few queries per task
    would spend most of its wall time re-timing; a paper-scale search (hours) always gets the full 60 s."""
    return min(max_seconds, max(RETIME_FLOOR_S, share * max(0.0, search_s)))


def describe_paired(paired: PairedTiming) -> str:
    """A paired timing in one line, as the run's log and `pikeh eval --against-reference` print it."""
    flag = f"; flagged: {paired.flagged}" if paired.flagged else ""
    return (f"{paired.speedup:.3f}x over eager (95% CI {paired.ci_low:.3f}x to {paired.ci_high:.3f}x; "
            f"{len(paired.pairs)} pairs, {paired.stop}{flag})")


WHY_LIMIT = 200  # characters of the re-evaluation's reason kept in ``why`` (the report's paired_why)


def unpaired_reason(result: EvalResult) -> str:
    """Why a final re-timing has no paired timing, in one line: the first line of a failed re-evaluation's
    reason cut to WHY_LIMIT characters (the candidate writes much of it; it reaches the HTML, CSV and terminal)."""
    if not result.is_correct:
        first = (result.reason or "").strip().splitlines()[:1]
        return f"the re-evaluation ended {result.category}" + (f": {shorten(first[0], WHY_LIMIT)}" if first else "")
    return "the evaluator returned no paired timing (it cannot pair on this backend)"


def _journal(runner: RunServices, task_run: TaskRun, event: FinalTiming) -> None:
    runner.store.append(event)
    task_run.note_final_timing(event.to_dict())


def _mirrored_code(runner: RunServices, ref: str, key: str, index: Any, code_sha256: str | None) -> str | None:
    """An attempt's code from its mirror, only if it is what the journal hashed."""
    try:
        code = (runner.store.attempt_dir(ref, key, index) / "code.py").read_text(encoding="utf-8")
    except OSError:
        return None
    return code if code_sha256 is None or sha256(code) == code_sha256 else None
