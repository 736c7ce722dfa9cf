"""Loading run journals into DuckDB tables: the one place that knows how events become rows.

Used by the run itself (``run.duckdb`` is written when a run stops) and by reporters (which load any
number of runs, finished or in progress, into one database). Rows are flattened in Python and bulk
loaded through newline-delimited JSON with declared column types, which is fast and keeps the table
schema in one readable place below. A ``JSON`` column holds the object itself (rows carry dicts, never
text already encoded), so SQL reads it directly: ``SELECT config->>'$.strategy' FROM runs``.

No one record can stop a load: a text cell (a ``VARCHAR`` column, or a string inside a ``JSON`` one)
longer than ``TEXT_CELL_CHARS`` keeps its first characters and a note of the cut (the journal keeps
it whole), and DuckDB's reader is told the longest line it will meet (its ``maximum_object_size``,
16 MB by default, would otherwise fail the whole load: one forged reason of 64 MB made every report
holding its run fail).

Besides run directories, reporters load *baseline sets*: folders written by ``pikeh baselines`` that
hold ``baselines.jsonl`` (lines shaped like the journal's ``baseline`` events) and ``meta.json``. Their
rows go to the same ``baselines`` table with ``run`` NULL and ``baseline_set`` naming the folder, so
torch.compile or TensorRT timings become reference lines beside the runs.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pike_harness.contracts.journal import (
    AttemptDone,
    Baseline,
    EvalDone,
    FinalTiming,
    LLMAbandoned,
    LLMAnswer,
    LLMFailure,
    RunEnd,
    RunStart,
    TaskEnd,
    attempt_dir,
)
from pike_harness.contracts.model import NOISY_TIMING
from pike_harness.host.baseline_sets import entries, read_meta
from pike_harness.host.final_best import uses_jit_trace
from pike_harness.host.journal_reading import latest_attempts, scan_journal
from pike_harness.host.store import JOURNAL, RUN_FILE
from pike_harness.worker import text_safety

# The longest text one cell keeps, in every VARCHAR column and for every string inside a JSON column.
# The real texts are far shorter: names, keys, hashes, times and categories a few dozen characters; a
# reason (attempts.reason) an exception summary of at most 2,000 characters behind a prefix, up to
# 12,600 once control characters are escaped (kit/failure_reports.py), and a result cuts each of its
# strings to 20,000 characters and a note (worker/records.py); an LLM error or a task's end reason a
# sentence or a provider's message. Only a journal written before that cut or by other code (a forged
# result, a runaway error body) holds longer ones: they keep their first TEXT_CELL_CHARS characters
# and a note of the cut.
TEXT_CELL_CHARS = 100_000
# DuckDB's read_json default for the longest line (one row); materialize passes the longest it wrote.
DUCKDB_MAX_OBJECT_BYTES = 16 * 1024 * 1024

TABLES: dict[str, dict[str, str]] = {
    "runs": {
        "run": "VARCHAR", "path": "VARCHAR", "strategy": "VARCHAR", "suite": "VARCHAR", "llm": "VARCHAR",
        "fix_llm": "VARCHAR", "query_budget": "INTEGER", "money_budget": "DOUBLE", "evaluator": "VARCHAR",
        "device": "VARCHAR",  # the device(s) the evaluator used ("cpu", "cuda:0"); see device_used
        "device_requested": "VARCHAR",  # what the run asked for (--device: "auto", "cpu", "cuda")
        "protocol": "VARCHAR", "seed": "INTEGER", "created": "VARCHAR",
        "status": "VARCHAR", "pikeh_version": "VARCHAR", "gpu": "VARCHAR", "host": "VARCHAR",
        "config": "JSON",
        "environment": "JSON",  # run.json's environment: versions, host, CPU, GPU
        # Runs that differ only in seed share it: reports group seeds of one configuration with it.
        "config_key": "VARCHAR",
        # Who provided each plugin the run used (run.json's "plugins"), and the third-party ones in one
        # line each ("strategy refine from acme-refine 1.0, replacing simple-strategies"), NULL if none.
        "plugins": "JSON", "third_party_plugins": "VARCHAR",
    },
    "tasks": {
        "run": "VARCHAR", "task": "VARCHAR", "suite": "VARCHAR", "task_id": "INTEGER", "name": "VARCHAR",
        "atol": "DOUBLE", "rtol": "DOUBLE", "end_reason": "VARCHAR", "queries_used": "INTEGER",
        "spend_usd": "DOUBLE",
    },
    "llm_calls": {
        "run": "VARCHAR", "task": "VARCHAR", "key": "VARCHAR", "role": "VARCHAR", "idx": "INTEGER",
        "counted": "BOOLEAN", "provider": "VARCHAR", "model": "VARCHAR", "model_id": "VARCHAR",
        "is_llm": "BOOLEAN", "prompt_tokens": "BIGINT", "output_tokens": "BIGINT",
        "reasoning_tokens": "BIGINT", "cached_tokens": "BIGINT", "cost_usd": "DOUBLE",
        "latency_s": "DOUBLE", "n_retries": "INTEGER", "truncated": "BOOLEAN", "empty": "BOOLEAN",
        "from_cache": "BOOLEAN", "ok": "BOOLEAN", "error": "VARCHAR", "time": "VARCHAR",
        "cost_source": "VARCHAR",  # "prices:<entry>", "reported", "free" or NULL (see LLMResponse)
    },
    # Queries still unanswered when a run stopped (``llm_abandoned`` events): perhaps billed, never
    # answered, never counted as a query or an attempt (a resume asks again: a later llm_calls row, billed
    # apart). ``estimated_cost_usd`` is the run's floor (prompt characters / 4 at the input price, no
    # output; NULL for an unpriced model), kept apart from every measured cost.
    "llm_abandoned": {
        "run": "VARCHAR", "task": "VARCHAR", "key": "VARCHAR", "role": "VARCHAR", "request_sha256": "VARCHAR",
        "estimated_prompt_tokens": "BIGINT", "estimated_cost_usd": "DOUBLE", "why": "VARCHAR", "time": "VARCHAR",
    },
    "attempts": {
        "run": "VARCHAR", "task": "VARCHAR", "key": "VARCHAR", "role": "VARCHAR", "idx": "INTEGER",
        "parent": "VARCHAR", "phase": "INTEGER", "category": "VARCHAR", "runtime_ms": "DOUBLE",
        "reason": "VARCHAR", "check_name": "VARCHAR", "code_sha256": "VARCHAR", "cost_usd": "DOUBLE",
        "time": "VARCHAR", "meta": "JSON",
        "hardware": "VARCHAR",  # what timed it (GPU name, else "cpu: " and the CPU model); see _hardware
        "clocks": "JSON",  # the GPU's clocks before and after timing (worker/supervise/gpu_clocks.py), or NULL
        "dir": "VARCHAR",  # the attempt's mirror folder (prompt.md, response.md, code.py), relative to the run
        # Its number on the speedup-vs-queries curve (see curve_positions): idx renumbered in PIKE's order.
        "curve_idx": "INTEGER",
        # A correct attempt's code contains torch.jit.trace (PIKE's final-best rule leaves it out; NULL:
        # not correct, or its code.py mirror is missing)
        "jit_trace": "BOOLEAN",
        "noisy_timing": "BOOLEAN",  # its timing was flagged noisy (NoiseReport, the noisy_timing flag)
    },
    # Each task's final best timed paired against its eager reference: by the run when the task ended
    # (``final_timing`` events, source 'run') or by `pikeh report --retime` (source 'report'). The
    # numbers are the PairedTiming's own; NULL speedup with ``why`` when there is no paired timing.
    "final_timings": {
        "run": "VARCHAR", "task": "VARCHAR", "best_key": "VARCHAR", "code_sha256": "VARCHAR", "source": "VARCHAR",
        "category": "VARCHAR", "speedup": "DOUBLE", "ci_low": "DOUBLE", "ci_high": "DOUBLE", "n_pairs": "INTEGER",
        "effective_pairs": "DOUBLE",  # the pairs' worth the interval counts (worker/paired_stats.py); NULL before
        "reference_ms": "DOUBLE", "candidate_ms": "DOUBLE", "stop": "VARCHAR", "seconds": "DOUBLE",
        "flagged": "VARCHAR", "why": "VARCHAR", "noise": "JSON", "pairs": "JSON", "device": "VARCHAR",
        "time": "VARCHAR",
    },
    "baselines": {
        "run": "VARCHAR", "task": "VARCHAR", "mode": "VARCHAR", "device": "VARCHAR", "protocol": "VARCHAR",
        "category": "VARCHAR", "runtime_ms": "DOUBLE", "stats": "JSON", "gpu": "VARCHAR", "host": "VARCHAR",
        "hardware": "VARCHAR", "time": "VARCHAR", "clocks": "JSON",
        "baseline_set": "VARCHAR",  # NULL for a run's own baselines; the set's name for `pikeh baselines` output
    },
    "baseline_sets": {
        "baseline_set": "VARCHAR", "path": "VARCHAR", "created": "VARCHAR", "gpu": "VARCHAR", "host": "VARCHAR",
        "meta": "JSON",
    },
}


def run_rows(run_dir: Path) -> dict[str, list[dict[str, Any]]]:
    """Every table's rows for one run directory."""
    meta = json.loads((run_dir / RUN_FILE).read_text())
    config = meta.get("config", {})
    run = meta.get("name", run_dir.name)
    scan = scan_journal(run_dir / JOURNAL)
    for bad in scan.bad:  # the rest of the journal still reads; `pikeh run --repair-journal` sets it aside
        print(f"pikeh: warning: {run_dir / JOURNAL}: line {bad.number} skipped ({bad.why})", file=sys.stderr)
    events = scan.events
    latest = {id(e) for e in latest_attempts(events)}
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in TABLES}
    status = "running"
    for event in events:
        if event.get("type") == RunEnd.type:
            status = event.get("status", "complete")
        elif event.get("type") == RunStart.type:
            status = "running"
    env = meta.get("environment", {})
    rows["runs"].append({
        "run": run, "path": str(run_dir), "strategy": config.get("strategy"), "suite": config.get("suite"),
        "llm": config.get("llm"), "fix_llm": config.get("fix_llm"), "query_budget": config.get("query_budget"),
        "money_budget": config.get("money_budget"), "evaluator": config.get("evaluator"),
        "device": device_used(config, env), "device_requested": config.get("device"), "protocol": config.get("protocol"), "seed": config.get("seed"),
        "created": meta.get("created"), "status": status, "pikeh_version": env.get("pikeh"),
        "gpu": env.get("gpu"), "host": env.get("host"), "config": config, "environment": env,
        "config_key": config_key(config),
        "plugins": meta.get("plugins") or {},
        "third_party_plugins": "; ".join((meta.get("plugins") or {}).get("third_party") or []) or None,
    })
    task_rows: dict[str, dict[str, Any]] = {}
    for task in meta.get("tasks", []):
        task_rows[task["ref"]] = {"run": run, "task": task["ref"], "suite": task["suite"], "task_id": task["id"],
                                  "name": task["name"], "atol": task.get("atol"), "rtol": task.get("rtol"),
                                  "end_reason": None, "queries_used": None, "spend_usd": None}
    hardware: dict[tuple[str, str], str | None] = {}  # (task, key) -> what timed its evaluation
    clocks: dict[tuple[str, str], dict[str, Any] | None] = {}  # (task, key) -> its GPU clocks around the timing
    noisy: set[tuple[str, str]] = set()  # (task, key) of evaluations flagged noisy_timing
    for event in events:
        kind = event.get("type")
        if kind == EvalDone.type:
            result = event.get("result") or {}
            environment = result.get("environment")
            hardware[(event["task"], event["key"])] = _hardware(environment)
            clocks[(event["task"], event["key"])] = _clocks(environment)
            if NOISY_TIMING in (result.get("flags") or []):
                noisy.add((event["task"], event["key"]))
        elif kind in (LLMAnswer.type, LLMFailure.type):
            rows["llm_calls"].append(_llm_row(run, event))
        elif kind == LLMAbandoned.type:
            rows["llm_abandoned"].append(_abandoned_row(run, event))
        elif kind == AttemptDone.type and id(event) in latest:
            meta_field = event.get("meta") or {}
            rows["attempts"].append({
                "run": run, "task": event["task"], "key": event["key"], "role": event.get("role"),
                "idx": event.get("index"), "parent": event.get("parent"), "phase": meta_field.get("phase"),
                "category": event.get("category"), "runtime_ms": event.get("runtime_ms"),
                "reason": event.get("reason"), "check_name": event.get("check"),
                "code_sha256": event.get("code_sha256"), "cost_usd": event.get("cost_usd"),
                "time": event.get("time"), "meta": meta_field,
                "hardware": hardware.get((event["task"], event["key"])),
                "clocks": clocks.get((event["task"], event["key"])),
                "dir": str(attempt_dir(event["task"], event["key"], event.get("index"))),
                "jit_trace": _jit_trace(run_dir, event),
                "noisy_timing": (event["task"], event["key"]) in noisy,
            })
        elif kind == FinalTiming.type:
            rows["final_timings"].append(final_timing_row(
                run=run, task=event["task"], best_key=event.get("best_key"), code_sha256=event.get("code_sha256"),
                result=event.get("result"), why=event.get("why"), time=event.get("time"), source="run"))
        elif kind == Baseline.type:
            rows["baselines"].append(_baseline_row(event, run=run, baseline_set=None))
        elif kind == TaskEnd.type and event["task"] in task_rows:
            task_rows[event["task"]].update(end_reason=event.get("reason"), queries_used=event.get("queries_used"),
                                            spend_usd=event.get("spend_usd"))
    curve_positions(rows["attempts"])
    rows["tasks"] = list(task_rows.values())
    return rows


def final_timing_row(*, run: str, task: str, best_key: str | None, code_sha256: str | None,
                     result: dict[str, Any] | None, why: str | None, time: str | None, source: str) -> dict[str, Any]:
    """One ``final_timings`` row from a paired re-timing's result (an ``EvalResult`` as a dict): the
    run's ``final_timing`` events and `pikeh report --retime` write the same row, so one table holds both."""
    result = result or {}
    paired = result.get("paired") or {}
    return {
        "run": run, "task": task, "best_key": best_key, "code_sha256": code_sha256, "source": source,
        "category": result.get("category"), "speedup": paired.get("speedup"), "ci_low": paired.get("ci_low"),
        "ci_high": paired.get("ci_high"), "n_pairs": len(paired.get("pairs") or []) if paired else None,
        "effective_pairs": paired.get("effective_pairs"),
        "reference_ms": paired.get("reference_ms"), "candidate_ms": paired.get("candidate_ms"),
        "stop": paired.get("stop"), "seconds": paired.get("seconds"), "flagged": paired.get("flagged"),
        "why": why, "noise": paired.get("noise"), "pairs": paired.get("pairs"),
        "device": (result.get("environment") or {}).get("device"), "time": time,
    }


def _jit_trace(run_dir: Path, event: dict[str, Any]) -> bool | None:
    """Whether a correct attempt's code (its code.py mirror) contains torch.jit.trace; None when it is not
    correct or the mirror is gone (the attempt then competes, as the run itself could not tell either)."""
    if event.get("category") != "correct":
        return None
    try:
        code = (run_dir / attempt_dir(event["task"], event["key"], event.get("index")) / "code.py").read_text(
            encoding="utf-8")
    except OSError:
        return None
    return uses_jit_trace(code)


def device_used(config: dict[str, Any], environment: dict[str, Any]) -> str | None:
    """The device(s) the run's evaluator timed on, as its environment recorded them; ``--device auto``
    says only what was asked, and a report must say whether the numbers came from a GPU or a CPU."""
    devices = (environment.get("evaluator") or {}).get("devices") or []
    return ", ".join(str(d) for d in devices) or config.get("device")


def config_key(config: dict[str, Any]) -> str:
    """A short hash of a run's configuration without its seed: seeds of one configuration share it."""
    identity = {k: v for k, v in config.items() if k != "seed"}
    return hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:12]


def curve_positions(attempts: list[dict[str, Any]]) -> None:
    """Number each task's counted attempts for the curves as PIKE's analysis does: phase by phase
    (``phase``, or ``round`` for best-of-n), sample by sample, each sample's original attempt followed by
    its fixes. ``idx`` is the order queries were charged in (a phase's optimize queries, then each fix
    round), so the two orders hold the same attempts per phase and differ only inside one; the budget
    cut by ``idx`` keeps the same set. Attempts without those meta fields keep their ``idx``."""
    by_task: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in attempts:
        row["curve_idx"] = row["idx"]
        if row["idx"] is not None:
            by_task.setdefault((row["run"], row["task"]), []).append(row)
    for rows in by_task.values():
        keys = [_curve_key(row) for row in rows]
        if any(key is None for key in keys):
            continue
        positions = sorted(row["idx"] for row in rows)
        ordered = sorted(zip(keys, rows, strict=True), key=lambda pair: (pair[0], pair[1]["idx"]))
        for position, (_, row) in zip(positions, ordered, strict=True):
            row["curve_idx"] = position


def _curve_key(row: dict[str, Any]) -> tuple[int, int, int] | None:
    meta = row.get("meta") or {}
    group = meta.get("phase", meta.get("round"))
    parts = (group, meta.get("sample"), meta.get("fix"))
    if not all(isinstance(part, int) and not isinstance(part, bool) for part in parts):
        return None
    return parts  # type: ignore[return-value]


def _baseline_row(event: dict[str, Any], *, run: str | None, baseline_set: str | None) -> dict[str, Any]:
    result = event.get("result") or {}
    environment = result.get("environment") or {}
    return {
        "run": run, "task": event["task"], "mode": event["mode"], "device": event.get("device"),
        "protocol": event.get("protocol"), "category": result.get("category"),
        "runtime_ms": result.get("runtime_ms"), "stats": result.get("runtime"),
        "gpu": environment.get("device_name") or environment.get("gpu"), "host": environment.get("host"),
        "hardware": _hardware(environment), "time": event.get("time"), "baseline_set": baseline_set,
        "clocks": _clocks(environment),
    }


def _clocks(environment: dict[str, Any] | None) -> dict[str, Any] | None:
    """The GPU clocks an evaluation recorded around its timing, or None (a CPU, no NVML)."""
    return (environment or {}).get("gpu_clocks") or None


def _hardware(environment: dict[str, Any] | None) -> str | None:
    """What a timing ran on, for telling whether two timings compare: the GPU's name, else the CPU model.

    Not the host name: a container or another node of a cluster with the same hardware times alike,
    while a resume on a different GPU model does not.
    """
    environment = environment or {}
    gpu = environment.get("device_name") or environment.get("gpu")
    if gpu:
        return str(gpu)
    cpu = environment.get("cpu")
    return f"cpu: {cpu}" if cpu else None


def baseline_set_rows(folder: Path) -> dict[str, list[dict[str, Any]]]:
    """The rows of one ``pikeh baselines`` folder: its ``baseline_sets`` row and its ``baselines`` rows.

    The set is named by ``meta.json``'s ``name`` when present, else by the folder. A torn last line
    (the command is still writing) is ignored, as for journals.
    """
    folder = Path(folder)
    meta = read_meta(folder)
    name = str(meta.get("name") or folder.name)
    environment = meta.get("environment") or meta
    events = entries(folder)
    baselines = [_baseline_row(e, run=None, baseline_set=name) for e in events if e.get("task") and e.get("mode")]
    gpu = environment.get("gpu") or next((b["gpu"] for b in baselines if b["gpu"]), None)
    host = environment.get("host") or next((b["host"] for b in baselines if b["host"]), None)
    return {
        "baseline_sets": [{"baseline_set": name, "path": str(folder), "created": meta.get("created"), "gpu": gpu,
                           "host": host, "meta": meta}],
        "baselines": baselines,
    }



def _abandoned_row(run: str, event: dict[str, Any]) -> dict[str, Any]:
    row = {"run": run, **{c: event.get(c) for c in TABLES["llm_abandoned"] if c != "run"}}
    for column in ("estimated_prompt_tokens", "estimated_cost_usd"):  # a number or NULL (unknown)
        value = row[column]
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            row[column] = None
    if row["estimated_prompt_tokens"] is not None:
        row["estimated_prompt_tokens"] = int(row["estimated_prompt_tokens"])
    return row


def _llm_row(run: str, event: dict[str, Any]) -> dict[str, Any]:
    response = event.get("response") or {}
    usage = response.get("usage") or {}
    return {
        "run": run, "task": event.get("task"), "key": event.get("key"), "role": event.get("role"),
        "idx": event.get("index"), "counted": event.get("counted"), "provider": response.get("provider"),
        "model": response.get("model") or event.get("model"), "model_id": response.get("model_id"),
        "is_llm": response.get("is_llm"), "prompt_tokens": usage.get("prompt_tokens"),
        "output_tokens": usage.get("output_tokens"), "reasoning_tokens": usage.get("reasoning_tokens"),
        "cached_tokens": usage.get("cached_tokens"),
        # An llm_error has no response; a refused prompt's event says it cost 0.0 (not billed), not unknown.
        "cost_usd": response.get("cost_usd") if response else event.get("cost_usd"),
        "latency_s": response.get("latency_s"), "n_retries": len(response.get("retries") or event.get("retries") or []),
        "truncated": response.get("truncated"), "empty": response.get("empty"),
        "from_cache": response.get("from_cache"), "ok": event.get("type") == LLMAnswer.type,
        "error": event.get("error"), "time": event.get("time"), "cost_source": response.get("cost_source"),
    }


def materialize(run_dirs: Iterable[Path], con: Any, baseline_dirs: Iterable[Path] = ()) -> int:
    """Create (or replace) the tables in DuckDB connection ``con`` from the given runs and baseline sets
    (``pikeh baselines`` folders); returns the run count."""
    collected: dict[str, list[dict[str, Any]]] = {name: [] for name in TABLES}
    count = 0
    for run_dir in run_dirs:
        for name, rows in run_rows(Path(run_dir)).items():
            collected[name].extend(rows)
        count += 1
    for folder in baseline_dirs:
        for name, rows in baseline_set_rows(Path(folder)).items():
            collected[name].extend(rows)
    with tempfile.TemporaryDirectory(prefix="pikeh-db-") as tmp:
        for name, columns in TABLES.items():
            path = Path(tmp) / f"{name}.jsonl"
            longest = 0
            with path.open("w", encoding="utf-8") as handle:
                for row in collected[name]:
                    # ASCII (json.dumps escapes the rest), so its length is its size in bytes.
                    line = json.dumps({c: cell(row.get(c), t) for c, t in columns.items()}, default=str)
                    longest = max(longest, len(line) + 1)
                    handle.write(line + "\n")
            spec = "{" + ", ".join(f"'{c}': '{t}'" for c, t in columns.items()) + "}"
            con.execute(f"DROP TABLE IF EXISTS {name}")
            if collected[name]:
                con.execute(f"CREATE TABLE {name} AS SELECT * FROM read_json('{path}', "
                            f"format='newline_delimited', columns={spec}, "
                            f"maximum_object_size={max(DUCKDB_MAX_OBJECT_BYTES, longest)})")
            else:
                ddl = ", ".join(f"{c} {t}" for c, t in columns.items())
                con.execute(f"CREATE TABLE {name} ({ddl})")
    return count


def cell(value: Any, column_type: str) -> Any:
    """A row's value as its column stores it: every string cut to ``TEXT_CELL_CHARS`` (inside a JSON
    value too), and an object or list in a VARCHAR column (a forged record's) as its JSON text, cut."""
    if column_type == "VARCHAR" and isinstance(value, dict | list):
        value = json.dumps(value, default=str)
    return _cut_strings(value)


def _cut_strings(value: Any) -> Any:
    if isinstance(value, str):
        return text_safety.head_capped(value, TEXT_CELL_CHARS)
    if isinstance(value, dict):
        return {_cut_strings(key): _cut_strings(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_cut_strings(item) for item in value]
    return value


def write_run_database(run_dir: Path) -> Path:
    """Refresh ``run.duckdb`` beside the journal (written when a run stops)."""
    import duckdb

    from pike_harness.host.store import DB_FILE

    target = Path(run_dir) / DB_FILE
    tmp = target.with_suffix(".duckdb.tmp")
    tmp.unlink(missing_ok=True)
    con = duckdb.connect(str(tmp))
    try:
        materialize([run_dir], con)
    finally:
        con.close()
    tmp.replace(target)
    return target
