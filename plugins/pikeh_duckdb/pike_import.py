"""``pikeh import pike DIR``: turn a PIKE output tree into a pike-harness run directory.

PIKE's published runs are trees of files, not journals. Importing one writes an ordinary run directory
(run.json, journal.jsonl, attempt folders; docs/run-layout.md) so ``pikeh report`` shows it beside our
runs with no special case anywhere downstream. What the importer reads (docs/report.md has the details):

    DIR/tasks/task<N>/output/iter_output/iter_<i>/attempts/attempt_<j>/
        code: *.py (code.py, kernel.py, solution.py preferred)   prompt: prompt.*     response: response.*
        raw response: raw_response.* (token usage is read from it when it is JSON)
        metrics: metrics.json / eval*.json / result*.json (KernelBench-style: compiled, correctness,
                 runtime, runtime_stats, metadata; or a pike-harness result record)
    DIR/**/*baseline*.json (or --baseline FILE): KernelBench-style timing files,
        {level: {"<N>_<Name>.py": {"mean": ms, "std": ..., "min": ..., "max": ..., "num_trials": ...}}};
        the mode comes from the file name (eager, compile, compile-max-autotune, cudagraphs, tensorrt).

Attempts are numbered 1, 2, ... per task in (iteration, attempt) order; that number is the query index
that budgets truncate by. A fix is recognised from a ``role``/``agent``/``type`` field or a folder name
containing "fix"; PIKE's trees do not record lineage, so fixes have a parent only when a field names it.

A downloaded tree is someone else's files: no link in it is followed. A file or folder that is a symbolic
link, or lies behind one that leads out of the tree, is skipped with a warning line (a ``code.py`` linked to
``~/.ssh/id_rsa`` would otherwise be copied into the run, its best.py and the report), and files are opened
without following a link. Its texts are escaped and cut before they reach the journal.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import stat
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeGuard

import click

from pike_harness.api import CATEGORIES, Usage, UserError, check_output_dir, printable

CODE_NAMES = ("code.py", "kernel.py", "solution.py", "model_new.py", "candidate.py")
METRIC_PATTERNS = ("metrics*.json", "eval*.json", "result*.json", "*metrics*.json")
TASK_FILE = re.compile(r"^(\d+)_([A-Za-z0-9_.\-]+?)(?:\.py)?$")
NUMBER = re.compile(r"(\d+)")
REASON_LIMIT = 2000  # characters of a reason kept, as the evaluator keeps them
FIELD_LIMIT = 200  # characters of a one-line field (role, parent, hardware)

# Token-count keys of the APIs PIKE used: prompt, output, thinking (billed as output), cached prompt.
USAGE_KEYS = {
    "prompt": ("prompt_tokens", "input_tokens", "prompt_token_count", "promptTokenCount"),
    "output": ("completion_tokens", "output_tokens", "candidates_token_count", "candidatesTokenCount"),
    "thoughts": ("thoughts_token_count", "thoughtsTokenCount"),  # Gemini reports thinking apart
    "cached": ("cached_tokens", "cached_content_token_count", "cachedContentTokenCount", "cache_read_input_tokens"),
}


@dataclass
class PikeAttempt:
    iteration: int
    number: int
    folder: Path
    code: str | None = None
    prompt: str | None = None
    response: str | None = None
    raw_file: Path | None = None
    metrics: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"iter{self.iteration:03d}_attempt{self.number:03d}"


# -- reading --------------------------------------------------------------------------------------

def _number(path: Path) -> int:
    found = NUMBER.findall(path.name)
    return int(found[-1]) if found else 0


def warn(message: str) -> None:
    print(f"pikeh: warning: {message}", file=sys.stderr)


class Tree:
    """The imported tree, read without following a link: what it lists are its own files and folders."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.skipped: set[Path] = set()

    def own(self, path: Path) -> bool:
        """Whether ``path`` is the tree's own: not a symbolic link, and not reached through one leading out
        of the tree (warned about once, then skipped)."""
        try:
            inside = not path.is_symlink() and path.resolve().is_relative_to(self.root)
        except (OSError, RuntimeError):  # RuntimeError: a link loop
            inside = False
        if not inside and path not in self.skipped:
            self.skipped.add(path)
            warn(f"{printable(str(path))}: skipped: a symbolic link, or behind one leading out of {self.root} "
                 "(an imported tree's links are not followed)")
        return inside

    def entries(self, folder: Path, pattern: str, *, folders: bool = False) -> list[Path]:
        """``folder``'s own files (or folders) matching ``pattern``, sorted by name."""
        if not self.own(folder) or not folder.is_dir():
            return []
        return sorted(p for p in folder.glob(pattern) if self.own(p) and (p.is_dir() if folders else p.is_file()))

    def first(self, folder: Path, names: Iterable[str]) -> Path | None:
        for pattern in names:
            found = self.entries(folder, pattern)
            if found:
                return found[0]
        return None


def _read(path: Path | None) -> str | None:
    """A regular file's text, opened without following a link (None if it is not one, or unreadable)."""
    if path is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        with open(fd, encoding="utf-8", errors="replace") as handle:
            return handle.read() if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except OSError:
        return None


def read_attempt(folder: Path, iteration: int, tree: Tree | None = None) -> PikeAttempt:
    tree = tree or Tree(folder)
    attempt = PikeAttempt(iteration, _number(folder), folder)
    attempt.code = _read(tree.first(folder, CODE_NAMES) or tree.first(folder, ("*.py",)))
    attempt.prompt = _read(tree.first(folder, ("prompt.*", "*prompt*")))
    attempt.raw_file = tree.first(folder, ("raw_response.*", "raw*"))
    attempt.response = _read(tree.first(folder, ("response.*",))) or _read(attempt.raw_file)
    metrics_file = tree.first(folder, METRIC_PATTERNS)
    if metrics_file is not None:
        try:
            data = json.loads(_read(metrics_file) or "")
            attempt.metrics = data if isinstance(data, dict) else {}
        except (ValueError, RecursionError):  # JSONDecodeError, an int of 4,300+ digits, nested too deep
            attempt.metrics = {"metadata": {"runtime_error": f"unreadable metrics file {metrics_file.name}"}}
    return attempt


def task_attempts(task_dir: Path, tree: Tree | None = None) -> list[PikeAttempt]:
    """Every attempt of one task, in (iteration, attempt) order (numeric: attempt_10 after attempt_2)."""
    tree = tree or Tree(task_dir)
    iterations = sorted(tree.entries(task_dir / "output" / "iter_output", "iter_*", folders=True), key=_number)
    out = []
    for iteration in iterations:
        folders = sorted(tree.entries(iteration / "attempts", "attempt_*", folders=True), key=_number)
        out += [read_attempt(folder, _number(iteration), tree) for folder in folders]
    return out


def _truthy_text(value: Any) -> str | None:
    if value in (None, False, "", [], {}):
        return None
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _finite(value: Any) -> TypeGuard[float]:
    """Whether ``value`` is a finite number that fits a float (not a bool, a string, NaN or infinity)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer of hundreds of digits
        return False


def _positive(value: Any) -> TypeGuard[float]:
    """Whether ``value`` is a runtime: a finite number above 0."""
    return _finite(value) and value > 0


def _number_or_none(value: Any) -> float | int | None:
    return value if _finite(value) else None


def _field(value: Any, limit: int = FIELD_LIMIT) -> str | None:
    """A one-line text field of the tree, escaped and cut (None when it is not a non-empty string)."""
    return printable(value).replace("\n", " ")[:limit] if isinstance(value, str) and value else None


def verdict(metrics: dict[str, Any]) -> dict[str, Any]:
    """Category, runtime and reason from a metrics record (KernelBench-style, or ours). A record that says
    correct without a usable runtime is a runtime_error whose ``warning`` says why."""
    if metrics.get("category") in CATEGORIES:
        reason = _truthy_text(metrics.get("reason"))
        result = {"category": metrics["category"], "runtime_ms": None,
                  "reason": reason[:REASON_LIMIT] if reason else None, "stats": _object(metrics.get("runtime")) or None}
        if result["category"] == "correct":
            runtime = metrics.get("runtime_ms")
            if _positive(runtime):
                result["runtime_ms"] = float(runtime)
            else:
                bad = f"runtime_ms {printable(json.dumps(runtime, default=str))[:80]} is not a positive number"
                result.update(category="runtime_error", reason=f"correct but not timed: {bad}", stats=None,
                              warning=bad)
        return result
    meta = _object(metrics.get("metadata"))
    merged = {**metrics, **meta}
    # Only a flag or a message says it timed out; a number under such a key is a setting (timeout_s: 600).
    timeout = next((v for k in ("timeout", "timed_out", "is_timeout", "timeout_error")
                    if (v := merged.get(k)) is True or (isinstance(v, str) and v)), None)
    if timeout is not None:
        reason = "timed out" if timeout is True else f"timed out: {timeout}"
        return {"category": "timeout", "runtime_ms": None, "reason": reason[:2000], "stats": None}
    compile_error = next((_truthy_text(merged.get(k)) for k in ("compilation_error", "compile_error", "build_error")
                          if _truthy_text(merged.get(k))), None)
    if merged.get("compiled") is False or compile_error:
        return {"category": "compile_error", "runtime_ms": None, "reason": (compile_error or "did not compile")[:2000],
                "stats": None}
    runtime_error = next((_truthy_text(merged.get(k)) for k in ("runtime_error", "error", "exception")
                          if _truthy_text(merged.get(k))), None)
    if runtime_error:
        return {"category": "runtime_error", "runtime_ms": None, "reason": runtime_error[:2000], "stats": None}
    if merged.get("correctness") is False or merged.get("correct") is False:
        issue = _truthy_text(merged.get("correctness_issue")) or "output mismatch"
        diff = merged.get("max_difference")
        reason = f"{issue}; max difference {diff}" if diff is not None else issue
        return {"category": "incorrect", "runtime_ms": None, "reason": reason[:2000], "stats": None}
    if merged.get("correctness") is True or merged.get("correct") is True:
        stats = _object(metrics.get("runtime_stats"))
        runtime = stats.get("mean", metrics.get("runtime"))
        if _positive(runtime):
            return {"category": "correct", "runtime_ms": float(runtime), "reason": None, "stats": _stats(stats, runtime)}
        return {"category": "runtime_error", "runtime_ms": None, "reason": "correct but not timed", "stats": None}
    return {"category": "runtime_error", "runtime_ms": None, "reason": "no evaluation recorded", "stats": None}


def _object(value: Any) -> dict[str, Any]:
    """A record's field that should be an object: itself if it is one, else {} (PIKE trees vary)."""
    return value if isinstance(value, dict) else {}


def _stats(stats: dict[str, Any], headline: float) -> dict[str, Any]:
    """PIKE's runtime statistics in our RuntimeStats shape (PIKE's headline statistic is the mean)."""
    mean = _number_or_none(stats.get("mean", headline))
    std = _number_or_none(stats.get("std"))
    trials = stats.get("num_trials")
    return {"headline_ms": headline, "statistic": "mean", "mean_ms": mean,
            "median_ms": _number_or_none(stats.get("median")), "min_ms": _number_or_none(stats.get("min")),
            "max_ms": _number_or_none(stats.get("max")), "stdev_ms": std,
            "cv": (std / mean) if std is not None and mean else None, "iqr_ms": None,
            "n": trials if isinstance(trials, int) and not isinstance(trials, bool) else None, "host_wall_ms": None}


def find_usage(*records: Any) -> Usage | None:
    """Token counts from the first record that has them (a raw API response or a metrics file)."""
    for record in records:
        found = _search_usage(record)
        if found is not None:
            return found
    return None


def _search_usage(obj: Any) -> Usage | None:
    if isinstance(obj, dict):
        prompt = next((obj[k] for k in USAGE_KEYS["prompt"] if isinstance(obj.get(k), int)), None)
        output = next((obj[k] for k in USAGE_KEYS["output"] if isinstance(obj.get(k), int)), None)
        if prompt is not None and output is not None:
            thoughts = next((obj[k] for k in USAGE_KEYS["thoughts"] if isinstance(obj.get(k), int)), 0)
            cached = next((obj[k] for k in USAGE_KEYS["cached"] if isinstance(obj.get(k), int)), None)
            return Usage(prompt_tokens=prompt, output_tokens=output + thoughts,
                         reasoning_tokens=thoughts or None, cached_tokens=cached)
        for value in obj.values():
            found = _search_usage(value)
            if found is not None:
                return found
    elif isinstance(obj, list):
        for value in obj:
            found = _search_usage(value)
            if found is not None:
                return found
    return None


def baseline_mode(file_name: str) -> str:
    """The baseline mode a PIKE/KernelBench timing file holds, from its name."""
    name = file_name.lower().replace("_", "-")
    if "tensorrt" in name or "trt" in name:
        return "tensorrt"
    if "cudagraph" in name or "cuda-graph" in name:
        return "cudagraphs"
    if "compile" in name or "inductor" in name:
        return "compile-max-autotune" if "max-autotune" in name else "compile"
    return "eager"


def read_baselines(files: Iterable[Path]) -> dict[str, dict[int, dict[str, Any]]]:
    """mode -> task id -> {name, stats, hardware} from KernelBench-style timing JSON files."""
    out: dict[str, dict[int, dict[str, Any]]] = {}
    for path in files:
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            entries = list(_timing_entries(data))
        except (OSError, ValueError, RecursionError) as exc:  # ValueError: JSONDecodeError, bad UTF-8
            raise UserError(f"baseline file {path} cannot be read: {exc}") from None
        mode = baseline_mode(Path(path).name)
        for key, stats in entries:
            match = TASK_FILE.match(key)
            if match and _positive(stats.get("mean")):
                out.setdefault(mode, {}).setdefault(int(match.group(1)), {
                    "name": f"{match.group(1)}_{match.group(2)}", "stats": stats,
                    "hardware": _field(stats.get("hardware")), "source": str(path)})
    return out


def _timing_entries(data: Any) -> Iterable[tuple[str, dict[str, Any]]]:
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, dict) and "mean" in value:
                yield str(key), value
            else:
                yield from _timing_entries(value)


# -- writing --------------------------------------------------------------------------------------

def import_pike(source: Path, *, output_dir: Path, name: str | None, suite: str, llm: str, strategy: str,
                baseline_files: Iterable[Path] = (), query_budget: int | None = None, force: bool = False,
                task_names: dict[int, str] | None = None) -> Path:
    """Write ``source`` (a PIKE output tree) as a run directory; returns its path."""
    from pike_harness import __version__
    from pike_harness.api import PriceTable, RunEnd, RunStart, RunStore

    tree = Tree(source)
    tasks_root = source / "tasks"
    task_dirs = sorted((p for p in tree.entries(tasks_root, "task*", folders=True) if _number(p)), key=_number)
    if not task_dirs:
        raise UserError(f"{source} is not a PIKE output tree: expected {tasks_root}/task<N>/output/iter_output/...")
    # rglob descends into no linked folder; a linked file is skipped like any other
    files = list(baseline_files) or sorted(p for p in source.rglob("*baseline*.json") if tree.own(p) and p.is_file())
    baselines = read_baselines(files)
    attempts = {_number(d): task_attempts(d, tree) for d in task_dirs}
    provider, _, model = llm.partition(":")
    price = PriceTable.load().price(provider, model)
    budget = query_budget or max((len(a) for a in attempts.values()), default=1) or 1
    names = dict(task_names or {})
    for by_task in baselines.values():
        for task_id, entry in by_task.items():
            names.setdefault(task_id, entry["name"])
    hardware = next((e["hardware"] for m in baselines.values() for e in m.values() if e.get("hardware")), None)
    run_name = name or f"pike-import_{source.resolve().name}"
    target = output_dir / run_name
    if target.exists():
        if not force:
            raise UserError(f"{target} exists; pass --force to replace it, or --name to import under another name")
        shutil.rmtree(target)
    config = {"strategy": strategy, "suite": suite, "tasks": None, "llm": llm, "fix_llm": None,
              "query_budget": budget, "money_budget": None, "evaluator": "pike", "device": "cuda",
              "protocol": "pike", "seed": 0, "imported_from": "pike", "source": str(source.resolve())}
    environment = {"pikeh": __version__, "imported_from": "pike", "source": str(source.resolve()), "gpu": hardware,
                   "host": None}
    task_list = [{"ref": f"{suite}/{n}", "suite": suite, "id": n, "name": names.get(n, f"task{n}"), "atol": 1e-2,
                  "rtol": 1e-2, "precision": "fp32"} for n in attempts]
    store = RunStore(target)
    store.open({"name": run_name, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "config": config,
                "operational": {}, "tasks": task_list, "environment": environment,
                "strategy": {"name": strategy, "overshoot": 0}})
    try:
        store.append(RunStart(pid=0, resume=0, environment=environment))
        for task_id, items in attempts.items():
            _write_task(store, f"{suite}/{task_id}", items, baselines.items(), task_id, provider, model, price)
        store.append(RunEnd(status="complete"))
    finally:
        store.close()
    return target


def _write_task(store: Any, ref: str, items: list[PikeAttempt], baselines: Iterable[tuple[str, dict[int, Any]]],
                task_id: int, provider: str, model: str, price: Any) -> None:
    from pike_harness.api import AttemptDone, Baseline, EvalDone, LLMAnswer, LLMFailure, TaskEnd, sha256

    baseline_ms = None
    for mode, by_task in baselines:
        entry = by_task.get(task_id)
        if entry is None:
            continue
        mean = float(entry["stats"]["mean"])
        if mode == "eager":
            baseline_ms = mean
        store.append(Baseline(task=ref, mode=mode, device="cuda", protocol="pike",
                              result={"request_id": "", "task": ref, "category": "correct", "runtime_ms": mean,
                                      "runtime": _stats(entry["stats"], mean), "protocol": {"name": "pike"},
                                      "environment": {"device_name": entry.get("hardware")},
                                      "reason": f"imported from {entry['source']}", "schema": 1}))
    best: tuple[float, str] | None = None
    spend, spend_known = 0.0, True
    for index, item in enumerate(items, 1):
        role, parent = _role(item), _parent(item)
        meta = {"iteration": item.iteration, "attempt": item.number, "phase": item.iteration}
        raw_text = _read(item.raw_file)
        raw_json = None
        if raw_text:
            try:
                raw_json = json.loads(raw_text)
            except (ValueError, RecursionError):
                raw_json = None
        try:
            usage = find_usage(raw_json, item.metrics)
        except RecursionError:  # nested deeper than the search goes: no token counts
            usage = None
        cost = price.cost(usage) if (price is not None and usage is not None) else None
        folder = store.attempt_dir(ref, item.key, index)
        files = {"prompt.md": item.prompt or "", "response.md": item.response or ""}
        if raw_text is not None and item.raw_file is not None:
            files[f"raw_response{item.raw_file.suffix or '.txt'}"] = raw_text
        store.write_files(folder, files)
        if item.code is None and item.response is None:
            store.append(LLMFailure(task=ref, key=item.key, role=role, index=index, counted=True,
                                    error="no response recorded in the PIKE tree", status=None))
            store.append(AttemptDone(task=ref, key=item.key, role=role, index=index, parent=parent, meta=meta,
                                     category="llm_error", runtime_ms=None, reason="no response recorded",
                                     check=None, code_sha256=None, cost_usd=None))
            continue
        if cost is None:
            spend_known = False
        else:
            spend += cost
        response: dict[str, Any] = {"text": item.response or "", "usage": _usage_dict(usage), "latency_s": None, "provider": provider,
                    "model": model, "model_id": None, "cost_usd": cost, "finish_reason": None, "truncated": False,
                    "empty": not item.response, "retries": [], "from_cache": False, "is_llm": True,
                    "cost_source": f"prices:{price.key}" if cost is not None else None, "replayed": False}
        store.append(LLMAnswer(task=ref, key=item.key, role=role, index=index, counted=True,
                               request_sha256=sha256(item.prompt or ""), response=response))
        code = item.code or ""
        try:
            result = verdict(item.metrics)
        except RecursionError:  # a metrics file nested almost as deep as json reads
            result = {"category": "runtime_error", "runtime_ms": None, "reason": "unreadable metrics file",
                      "stats": None, "warning": "its metrics file is nested too deeply to read"}
        if result.get("warning"):
            warn(f"{printable(str(item.folder))}: {result['warning']}; imported as runtime_error")
        if isinstance(result["reason"], str):
            result["reason"] = printable(result["reason"])[:REASON_LIMIT]
        record = {"request_id": "", "task": ref, "category": result["category"], "reason": result["reason"],
                  "runtime_ms": result["runtime_ms"], "runtime": result["stats"], "protocol": {"name": "pike"},
                  "environment": {}, "schema": 1}
        store.write_files(folder, {"code.py": code, "result.json": json.dumps(record, indent=2)})
        store.append(EvalDone(task=ref, key=item.key, code_sha256=sha256(code), result=record))
        store.append(AttemptDone(task=ref, key=item.key, role=role, index=index, parent=parent, meta=meta,
                                 category=result["category"], runtime_ms=result["runtime_ms"],
                                 reason=result["reason"], check=None, code_sha256=sha256(code), cost_usd=cost))
        if result["category"] == "correct" and (best is None or result["runtime_ms"] < best[0]):
            best = (result["runtime_ms"], code)
    if best is not None:
        store.write_files(store.task_dir(ref), {"best.py": best[1]})
    store.append(TaskEnd(task=ref, reason="budget", queries_used=len(items), spend_usd=spend,
                         spend_known=spend_known, best_runtime_ms=best[0] if best else None, baseline_ms=baseline_ms))


def _usage_dict(usage: Usage | None) -> dict[str, Any]:
    if usage is None:
        return {"prompt_tokens": None, "output_tokens": None, "reasoning_tokens": None, "cached_tokens": None}
    return {"prompt_tokens": usage.prompt_tokens, "output_tokens": usage.output_tokens,
            "reasoning_tokens": usage.reasoning_tokens, "cached_tokens": usage.cached_tokens}


def _role(item: PikeAttempt) -> str:
    for key in ("role", "agent", "type", "kind"):
        value = _field(item.metrics.get(key))
        if value:
            return "fix" if "fix" in value.lower() else ("optimize" if "opt" in value.lower() else value)
    return "fix" if "fix" in item.folder.name.lower() else "optimize"


def _parent(item: PikeAttempt) -> str | None:
    for key in ("parent", "parent_attempt", "parent_key"):
        value = _field(item.metrics.get(key))
        if value:
            return value
    return None


# -- the command ----------------------------------------------------------------------------------

@click.group("import")
def import_group() -> None:
    """Bring results produced by other tools into pike-harness run directories."""


@import_group.command("pike")
@click.argument("source", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--output-dir", type=click.Path(path_type=Path), default=Path("runs"), show_default=True,
              help="Where the imported run directory is written.")
@click.option("--name", help="Run name (default: pike-import_<folder name>).")
@click.option("--suite", default="level3-pike", show_default=True, help="The suite the task numbers refer to.")
@click.option("--llm", default="google:gemini-2.5-pro", show_default=True,
              help="PROVIDER:MODEL that produced the tree (prices its token counts; PIKE used gemini-2.5-pro).")
@click.option("--strategy", default="pike-b", show_default=True, help="Strategy label for the imported run.")
@click.option("--baseline", "baseline_files", multiple=True,
              type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Baseline timing JSON file(s) (default: every *baseline*.json under SOURCE).")
@click.option("--query-budget", type=click.IntRange(min=1),
              help="Budget to record (default: the most attempts of any task).")
@click.option("--force", is_flag=True, help="Replace an existing run directory of the same name.")
@click.pass_context
def import_pike_command(ctx: click.Context, source: Path, output_dir: Path, name: str | None, suite: str, llm: str,
                        strategy: str, baseline_files: tuple[Path, ...], query_budget: int | None,
                        force: bool) -> None:
    """Import a PIKE output tree (SOURCE/tasks/task<N>/output/iter_output/...) as a run.

    \b
    Example:
      pikeh import pike ~/pike/results/level3-gemini --name pike-published
      pikeh report --input runs/pike-published --input runs/ --output report/
    """
    if ":" not in llm:
        raise click.BadParameter("write PROVIDER:MODEL, e.g. google:gemini-2.5-pro", param_hint="--llm")
    check_output_dir(output_dir, "--output-dir")
    target = import_pike(source, output_dir=output_dir, name=name, suite=suite, llm=llm, strategy=strategy,
                         baseline_files=baseline_files, query_budget=query_budget, force=force,
                         task_names=_catalog_names(ctx, suite))
    click.echo(f"imported {source} as {target}")


def _catalog_names(ctx: click.Context, suite: str) -> dict[int, str]:
    """Task names from the suite when this pikeh knows it (the root context's object is the CLI's App)."""
    catalog = getattr(ctx.find_root().obj, "catalog", None)
    try:
        return {t.id: t.name for t in catalog.suite(suite).tasks()} if catalog is not None else {}
    except Exception:  # an unknown suite only costs the names
        return {}
