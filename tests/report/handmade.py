"""Hand-made run stores for the reporter's tests: real run directories written through ``RunStore``.

Every number in them is chosen so metrics can be worked out by hand (see test_metrics.py); the runs are
written exactly as the run loop writes them (run.json, journal events, attempt folders with code.py),
so the reporter under test reads them through the same loader as a real run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pike_harness.host.store import RunStore, sha256

SUITE = "hand"
LLM = "google:gemini-2.5-pro"  # $1.25 / M prompt tokens, $10 / M output tokens (shipped price table)


@dataclass
class HandRun:
    """Collects events for one run directory; ``write()`` journals them in order."""

    root: Path
    name: str
    query_budget: int = 4
    seed: int = 0
    strategy: str = "pike-b"
    llm: str = LLM
    tasks: dict[int, str] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    codes: dict[tuple[str, str, int | None], str] = field(default_factory=dict)
    finished: bool = True
    suite: str = SUITE
    device: str = "cpu"  # what --device asked for; the evaluator's environment says "cpu" was used
    strategy_options: dict[str, Any] = field(default_factory=dict)

    def ref(self, task_id: int) -> str:
        return f"{self.suite}/{task_id}"

    def task(self, task_id: int, name: str) -> HandRun:
        self.tasks[task_id] = name
        return self

    def baseline(self, task_id: int, ms: float | None, *, mode: str = "eager", category: str = "correct",
                 device_name: str = "cpu") -> HandRun:
        self.events.append({"type": "baseline", "task": self.ref(task_id), "mode": mode, "device": "cpu",
                            "protocol": "robust", "result": result(self.ref(task_id), category, ms, device_name)})
        return self

    def call(self, task_id: int, key: str, *, role: str, index: int | None, prompt_tokens: int = 40_000,
             output_tokens: int = 10_000, ok: bool = True, provider: str = "google",
             model: str = "gemini-2.5-pro", cached_tokens: int | None = None, cost_usd: float | None = None,
             cost_source: str | None = None) -> HandRun:
        if not ok:
            self.events.append({"type": "llm_error", "task": self.ref(task_id), "key": key, "role": role,
                                "index": index, "counted": index is not None, "error": "HTTP 500 five times",
                                "status": 500})
            return self
        response = {"text": f"reply for {key}", "usage": {"prompt_tokens": prompt_tokens, "output_tokens": output_tokens,
                                                         "reasoning_tokens": None, "cached_tokens": cached_tokens},
                    "latency_s": 1.0, "provider": provider, "model": model, "model_id": model,
                    "cost_usd": cost_usd, "finish_reason": "stop", "truncated": False, "empty": False, "retries": [],
                    "from_cache": False, "is_llm": True, "cost_source": cost_source, "replayed": False}
        self.events.append({"type": "llm", "task": self.ref(task_id), "key": key, "role": role, "index": index,
                            "counted": index is not None, "request_sha256": sha256(key), "response": response})
        return self

    def brainstorm(self, task_id: int, prompt_tokens: int = 8_000, output_tokens: int = 2_000) -> HandRun:
        return self.call(task_id, "brainstorm", role="brainstorm", index=None, prompt_tokens=prompt_tokens,
                         output_tokens=output_tokens)

    def attempt(self, task_id: int, index: int, category: str, runtime_ms: float | None = None, *,
                role: str = "optimize", parent: int | None = None, key: str | None = None,
                code: str | None = None, device_name: str = "cpu", noisy: bool = False, **call: Any) -> HandRun:
        """One counted query and its verdict (an LLM error when category is ``llm_error``); ``noisy``: its
        timing carries the noisy_timing flag."""
        key = key or f"q{index:03d}"
        ref = self.ref(task_id)
        self.call(task_id, key, role=role, index=index, ok=category != "llm_error", **call)
        if category != "llm_error":
            code = code or f"# {self.name} {ref} {key}\nclass ModelNew:\n    runtime_ms = {runtime_ms!r}\n"
            self.codes[(ref, key, index)] = code
            verdict = result(ref, category, runtime_ms, device_name)
            if noisy:
                verdict["flags"] = ["noisy_timing"]
            self.events.append({"type": "eval", "task": ref, "key": key, "code_sha256": sha256(code),
                                "result": verdict})
        self.events.append({
            "type": "attempt", "task": ref, "key": key, "role": role, "index": index,
            "parent": f"q{parent:03d}" if parent is not None else None,
            "meta": {"phase": 0, "fix": 1 if role == "fix" else 0}, "category": category,
            "runtime_ms": runtime_ms if category == "correct" else None,
            "reason": None if category == "correct" else f"{category} in {key}", "check": None,
            "code_sha256": sha256(code) if code is not None else None, "cost_usd": None})
        return self

    def final_timing(self, task_id: int, index: int, speedup: float | None, ci: tuple[float, float] = (0.0, 0.0), *,
                     flagged: str | None = None, why: str | None = None, code_sha256: str | None = None,
                     time: str = "2026-01-01T01:00:00+0000", effective_pairs: float | None = None) -> HandRun:
        """The run's final re-timing of the attempt of query ``index`` (its code's hash unless given);
        ``speedup`` None: an evaluator that could not pair (``why``)."""
        ref, key = self.ref(task_id), f"q{index:03d}"
        paired = None if speedup is None else {
            "speedup": speedup, "ci_low": ci[0], "ci_high": ci[1], "pairs": [[1.0, 1.0 / speedup]] * 5,
            "reference_ms": 1.0, "candidate_ms": 1.0 / speedup, "stop": "converged", "seconds": 2.0, "noise": None,
            "flagged": flagged, "effective_pairs": effective_pairs}
        verdict = {**result(ref, "correct", 1.0), "paired": paired}
        self.events.append({"type": "final_timing", "task": ref, "key": f"final/{key}", "best_key": key,
                            "code_sha256": code_sha256 or sha256(self.codes[(ref, key, index)]), "result": verdict,
                            "why": why, "time": time})
        return self

    def write(self) -> Path:
        store = RunStore(self.root / self.name)
        config = {"strategy": self.strategy, "suite": self.suite, "tasks": None, "llm": self.llm, "fix_llm": None,
                  "query_budget": self.query_budget, "money_budget": None, "evaluator": "local", "device": self.device,
                  "protocol": "robust", "seed": self.seed, "strategy_options": self.strategy_options}
        store.open({"name": self.name, "created": "2026-01-01T00:00:00+0000", "config": config, "operational": {},
                    "tasks": [{"ref": self.ref(i), "suite": self.suite, "id": i, "name": n, "atol": 1e-2, "rtol": 1e-2}
                              for i, n in sorted(self.tasks.items())],
                    "environment": {"pikeh": "test", "host": "handmade", "gpu": None, "cpu": "Hand CPU", "cpu_count": 2,
                                    "torch": "2.13.0+cpu", "python": "3.11.7",
                                    "evaluator": {"evaluator": "local", "devices": ["cpu"],
                                                  "protocol": {"name": "robust", "statistic": "median",
                                                               "min_reps": 10, "max_reps": 100}}},
                    "strategy": {"name": self.strategy, "overshoot": 0}})
        try:
            store.append({"type": "run_start", "pid": 1, "resume": 0, "environment": {}})
            for event in self.events:
                store.append(event)
            for (ref, key, index), code in self.codes.items():
                store.write_files(store.attempt_dir(ref, key, index), {"code.py": code})
            if self.finished:
                store.append({"type": "run_end", "status": "complete"})
        finally:
            store.close()
        return store.path


def result(ref: str, category: str, ms: float | None, device_name: str = "cpu") -> dict[str, Any]:
    """An EvalResult record as the worker writes it (``device_name``: what timed it)."""
    runtime = None
    if category == "correct" and ms is not None:
        runtime = {"headline_ms": ms, "statistic": "median", "mean_ms": ms, "median_ms": ms, "min_ms": ms,
                   "max_ms": ms, "stdev_ms": 0.0, "cv": 0.0, "iqr_ms": 0.0, "n": 10, "host_wall_ms": ms * 10}
    return {"request_id": "r", "task": ref, "category": category, "reason": None if category == "correct" else category,
            "check": None, "runtime_ms": ms if category == "correct" else None, "runtime": runtime, "outputs": [],
            "flags": [], "stage_seconds": {}, "stdout_tail": "", "stderr_tail": "", "protocol": {"name": "robust"},
            "environment": {"device_name": device_name, "host": "handmade"}, "seeds": {}, "schema": 1}


def scenario_a(root: Path, name: str = "A") -> Path:
    """The worked example of test_metrics.py (budget 4; every value there is derived from this)."""
    run = HandRun(root, name)
    for task_id, task_name in ((1, "1_Alpha"), (2, "2_Beta"), (3, "3_Gamma"), (4, "4_Delta"), (5, "5_Eps")):
        run.task(task_id, task_name).brainstorm(task_id)
    # task 1: baseline 10 ms; correct at q2 (5 ms), q3 (8 ms), q4 (2.5 ms); q5 (1 ms) is past the budget.
    run.baseline(1, 10.0).baseline(1, 5.0, mode="compile")
    run.attempt(1, 1, "compile_error").attempt(1, 2, "correct", 5.0).attempt(1, 3, "correct", 8.0)
    run.attempt(1, 4, "correct", 2.5).attempt(1, 5, "correct", 1.0)
    # task 2: baseline 4 ms; q1 correct but slower (8 ms); q3 fixes q2 (2 ms).
    run.baseline(2, 4.0).baseline(2, 8.0, mode="compile")
    run.attempt(2, 1, "correct", 8.0).attempt(2, 2, "incorrect")
    run.attempt(2, 3, "correct", 2.0, role="fix", parent=2).attempt(2, 4, "runtime_error")
    # task 3: baseline 6 ms; nothing correct (q2 is an LLM error).
    run.baseline(3, 6.0)
    run.attempt(3, 1, "timeout").attempt(3, 2, "llm_error").attempt(3, 3, "incorrect").attempt(3, 4, "rejected")
    # task 4: the eager baseline failed, so the task has no speedup at all.
    run.baseline(4, None, category="runtime_error")
    run.attempt(4, 1, "correct", 1.0)
    # task 5: baseline 3 ms; q1 fails, fixed twice (q2 still fails, q3 correct at 3 ms); q4 1.5 ms.
    run.baseline(5, 3.0).baseline(5, 3.0, mode="compile", category="incorrect")
    run.attempt(5, 1, "compile_error").attempt(5, 2, "runtime_error", role="fix", parent=1)
    run.attempt(5, 3, "correct", 3.0, role="fix", parent=2).attempt(5, 4, "correct", 1.5)
    return run.write()


def write_baseline_set(folder: Path) -> Path:
    """A `pikeh baselines` folder: eager and max-autotune for hand/1, hand/2 and hand/9 (not in any run)."""
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for task_id, eager, tuned in ((1, 10.0, 4.0), (2, 4.0, 2.0), (9, 1.0, 0.1)):
        for mode, ms in (("eager", eager), ("compile-max-autotune", tuned)):
            lines.append({"type": "baseline", "task": f"{SUITE}/{task_id}", "mode": mode, "device": "cuda",
                          "protocol": "robust", "result": result(f"{SUITE}/{task_id}", "correct", ms),
                          "time": "2026-01-01T00:00:00+0000"})
    (folder / "baselines.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (folder / "meta.json").write_text(json.dumps({"name": "h100-set", "environment": {"gpu": "H100", "host": "x"}}))
    return folder
