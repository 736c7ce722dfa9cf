"""Audit of PIKE's published solutions: which of them really pass, with a reproduction for each that doesn't.

For each solution (PIKE-B's 30 best programs for level3-pike, ``.fidelity/pike-b-level3``):
our verdict (the harness's, ``--protocol pike``, read from the fidelity benchmark's state, or run
here with ``--run-harness``), the verdict of PIKE's one-call protocol (one instance, one call, the
public input) and, from ``pike_probes.py`` in a process of its own per solution, what a second call,
a second instance and a new input give. The suite geomean speedup (PIKE's clamped definition:
max(1, s) per task, 1.0 for a task without a correct solution) is recomputed over the solutions that
really pass, next to the published 2.88x, with the plain loop's timings from the fidelity state.

Resumable: probe results are appended to the same ``fidelity.jsonl`` (keys ``probe|task_N.py``).
Writes ``pike-audit.json`` to ``--out`` and ``pike-b-published-audit.md`` under ``--reports``.

  PYTHONPATH=src:plugins python3 benchmarks/pike_audit.py --state .fidelity/state --cache .fidelity/cache \\
      --out $OUT --budget-s 300
"""

from __future__ import annotations

import concurrent.futures
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fidelity_runs as runs  # noqa: E402
from fidelity import DEFAULT_SOLUTIONS, solutions  # noqa: E402
from perf_common import REPO, Budget, arguments, default_device, workdir  # noqa: E402

from pike_harness.host.tasks import load_suite  # noqa: E402

PROBES = Path(__file__).resolve().parent / "pike_probes.py"
PUBLISHED_GEOMEAN = 2.88  # PIKE-B on level3-pike, H100, 300 queries per task (arXiv 2511.16964)
VARIATIONS = (("call_twice", "a second call with the same input"),
              ("second_instance", "a second instance in the same process"),
              ("new_input", "a new input (another seed)"),
              ("reused_new_input", "the same instance on a new input"),
              ("input_sensitivity", "output unchanged by a new input"))


def probe_all(work: list[tuple[Any, Path]], state: runs.State, device: str, budget: Budget, cache: Path | None,
              jobs: int, margin_s: float) -> bool:
    """``pike_probes`` for every solution not yet probed, ``jobs`` processes at a time (nothing is timed)."""
    todo = [(task, path) for task, path in work if not state.done(f"probe|{path.name}")]
    if not todo:
        return True
    print(f"[audit] probing {len(todo)} solutions, {jobs} at a time", flush=True)
    finished = True
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        futures = {pool.submit(runs.run_plain_within, ["--reference", str(task.path), "--solution", str(path), "--device",
                                                  device, "--atol", str(task.meta.atol), "--rtol", str(task.meta.rtol)],
                               budget, margin_s, cache, PROBES): (task, path) for task, path in todo}
        for future in concurrent.futures.as_completed(futures):
            task, path = futures[future]
            result = future.result()
            if result.get("verdict") == "timeout":
                finished = False
                continue
            state.add({"key": f"probe|{path.name}", "kind": "probe", "file": path.name, "task": task.id, **result})
            print(f"[audit] {path.name}: {_pike_verdict(result)} / {_breaks(result) or 'nothing breaks'}", flush=True)
    return finished


def _pike_verdict(probe: dict[str, Any] | None) -> str:
    if not probe:
        return "-"
    if probe.get("verdict") in ("crashed", "timeout"):
        return probe["verdict"]
    if "error" in probe:
        return "error"
    one = probe.get("one_call", {})
    return "correct" if one.get("ok") else ("error" if "error" in one else "incorrect")


def _breaks(probe: dict[str, Any] | None) -> list[str]:
    """The variations under which a solution that passes the one-call check fails."""
    if not probe or _pike_verdict(probe) != "correct":
        return []
    return [name for name, _ in VARIATIONS if name in probe and not probe[name].get("ok")]


def _num(value: float | None) -> str:
    return "-" if value is None else (f"{value:.3g}" if value else "0")


def _finding(probe: dict[str, Any]) -> str:
    """One sentence per broken variation, with its numbers."""
    parts = []
    one = probe["one_call"]
    for name in _breaks(probe):
        data = probe[name]
        if "error" in data:
            parts.append(f"{dict(VARIATIONS)[name]} raises `{data['error']}`")
        elif name == "call_twice":
            parts.append(f"call 1 max diff {_num(one['max_diff'])}, call 2 with the same input {_num(data['max_diff'])} "
                         f"(call 1 vs call 2: {_num(data.get('call1_vs_call2'))}): state kept across calls")
        elif name == "second_instance":
            parts.append(f"first instance max diff {_num(one['max_diff'])}, a second instance in the same process "
                         f"{_num(data['max_diff'])}: state shared across instances")
        elif name == "reused_new_input":
            parts.append(f"public input (seed 0) max diff {_num(one['max_diff'])}, the same instance then given "
                         f"seed {probe.get('new_seed')}'s input {_num(data['max_diff'])}: it replays what it "
                         "computed for the first input")
        elif name == "new_input":
            parts.append(f"public input (seed 0) max diff {_num(one['max_diff'])}, seed {probe.get('new_seed')} "
                         f"{_num(data['max_diff'])}")
        else:
            parts.append(f"the reference's output moves by {_num(data['reference_moves'])} between the two inputs, "
                         f"the solution's by {_num(data['solution_moves'])}: it ignores its input")
    return "; ".join(parts)


def audit_rows(work: list[tuple[Any, Path]], state: runs.State) -> list[dict[str, Any]]:
    rows = []
    for task, path in work:
        probe = state.get(f"probe|{path.name}")
        ours = state.get(f"harness|pike|all|{path.name}") or state.get(f"harness|pike|serial|{path.name}")
        plain = state.get(f"plain|{task.id}") or {}
        eager, sol = plain.get("eager_ms"), plain.get("solution_ms")
        speedup = (sum(eager) / len(eager)) / (sum(sol) / len(sol)) if eager and sol else None
        pike = _pike_verdict(probe)
        breaks = _breaks(probe)
        really = pike == "correct" and not breaks and probe is not None
        rows.append({"task": task.id, "name": task.name, "file": path.name, "ours": runs.verdict(ours),
                     "ours_reason": (ours or {}).get("reason"), "pike": pike, "breaks": breaks,
                     "really_passes": really, "finding": _finding(probe) if breaks else "",
                     "speedup_plain": speedup, "probe": probe,
                     "disagree": (runs.verdict(ours) == "correct") != (pike == "correct") if ours else None})
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    pike_pass = [r for r in rows if r["pike"] == "correct"]
    return {"solutions": len(rows), "pike_one_call_correct": len(pike_pass),
            "really_pass": sum(r["really_passes"] for r in rows),
            "ours_correct": sum(r["ours"] == "correct" for r in rows),
            "disagreements": sum(bool(r["disagree"]) for r in rows),
            "geomean_pike_verdicts": runs.geomean([runs.clamp(r["speedup_plain"] if r["pike"] == "correct" else None)
                                               for r in rows]),
            "geomean_really_pass": runs.geomean([runs.clamp(r["speedup_plain"] if r["really_passes"] else None) for r in rows]),
            "geomean_ours": runs.geomean([runs.clamp(r["speedup_plain"] if r["ours"] == "correct" else None) for r in rows]),
            "published": PUBLISHED_GEOMEAN, "timed": sum(r["speedup_plain"] is not None for r in rows)}


def markdown(rows: list[dict[str, Any]], s: dict[str, Any], setup: dict[str, Any]) -> str:
    def diff(probe: dict[str, Any] | None, name: str) -> str:
        data = (probe or {}).get(name)
        if not data:
            return "-"
        if "error" in data:
            return "error"
        value = data.get("max_diff") if name != "input_sensitivity" else data.get("solution_moves")
        return _num(value) + ("" if data.get("ok") else " **x**")

    lines = ["# Audit of PIKE-B's published level3-pike solutions", "",
             f"{setup['gpu']}, torch {setup['torch']}, {setup['date']}. Solutions: `{setup['solutions']}`"
             + (" (PIKE's repository, `best_agent_solutions/h100/level3-metr/prev_agents_300/best_solutions/`, "
                "commit fd5721e)" if setup["solutions"].endswith("pike-b-level3") else "")
             + f"; references: `tasks/{setup['suite']}` of this repository.", "",
             "**How each column was obtained.** *PIKE one-call*: PIKE's check as published (weights after "
             "`torch.manual_seed(1)`, inputs from `get_inputs()` after `torch.manual_seed(0)`, `.eval()`, `no_grad`, "
             "one call of one instance, `torch.allclose(atol=rtol=1e-2)`); the number is the max abs difference. "
             "The next columns vary one thing each (`benchmarks/pike_probes.py`, one process per solution, plain "
             "torch): *call 2* calls the same instance again with the same input; *2nd instance* builds another "
             "instance in the same process; *new input* builds a fresh instance and feeds `get_inputs()` after "
             f"`torch.manual_seed({setup['new_seed']})`; *same inst., new input* feeds that input to the first "
             "instance (new tensors), as any caller of one model does (probed from 2026-11-26 14:00; '-' where a "
             "solution was probed before); *input moves* is how much the solution's output changes "
             "between the two inputs (the reference's change is in the findings). **x** marks a failed check. "
             "*Ours*: `pikeh eval --protocol pike` (all solutions submitted at once). *Speedup*: eager / solution, "
             "both by the plain do_bench loop of `benchmarks/plain_loop.py` (`reports/fidelity-*.md`).", "",
             "| task | PIKE one-call | call 2 | 2nd instance | new input | same inst., new input | input moves | really passes | ours | speedup (plain) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        probe = r["probe"]
        one = (probe or {}).get("one_call") or {}
        lines.append(f"| {r['task']} {r['name'].split('_', 1)[-1]} | {r['pike']} ({_num(one.get('max_diff'))}) | "
                     f"{diff(probe, 'call_twice')} | {diff(probe, 'second_instance')} | {diff(probe, 'new_input')} | "
                     f"{diff(probe, 'reused_new_input')} | "
                     f"{diff(probe, 'input_sensitivity')} | {'yes' if r['really_passes'] else 'no'} | {r['ours']}"
                     f"{' **(differs from PIKE)**' if r['disagree'] else ''} | {_num(r['speedup_plain'])} |")
    lines += ["", "## Findings", ""]
    for r in rows:
        if r["breaks"]:
            lines.append(f"- **Task {r['task']}** passes PIKE's one-call check but fails on "
                         f"{', '.join(dict(VARIATIONS)[b] for b in r['breaks'])}: {r['finding']}.")
        elif r["pike"] != "correct":
            reason = ((r["probe"] or {}).get("one_call") or {}).get("error") or (r["probe"] or {}).get("error")
            lines.append(f"- **Task {r['task']}** fails PIKE's own one-call check here"
                         + (f": `{reason}`" if reason else f" (max diff {_num(((r['probe'] or {}).get('one_call') or {}).get('max_diff'))})")
                         + ".")
        if r["disagree"] and r["really_passes"]:
            lines.append(f"- **Task {r['task']}**: every variation passes, yet our verdict is `{r['ours']}`"
                         f"{': ' + r['ours_reason'] if r['ours_reason'] else ''}: a harness error to fix.")
    lines += ["", "## Suite score", "",
              f"Of {s['solutions']} solutions, {s['pike_one_call_correct']} pass PIKE's one-call check here and "
              f"{s['really_pass']} pass every variation; our harness judges {s['ours_correct']} correct "
              f"({s['disagreements']} verdicts differ from the one-call check).", "",
              "| suite geomean speedup (PIKE-clamped: max(1, s), 1.0 when not correct; plain-loop timings) | value |",
              "|---|---|", f"| published (PIKE-B, paper) | {s['published']:.2f}x |",
              f"| PIKE's one-call verdicts, this GPU | {_num(s['geomean_pike_verdicts'])}x |",
              f"| solutions that really pass, this GPU | {_num(s['geomean_really_pass'])}x |",
              f"| our harness's verdicts, this GPU | {_num(s['geomean_ours'])}x |", "",
              f"Timed: {s['timed']} of {s['solutions']} tasks (an untimed task counts as 1.0).", ""]
    return "\n".join(lines)


def main() -> int:
    parser = arguments(__doc__.split("\n\n")[0], budget_s=540.0)
    parser.add_argument("--suite", default="level3-pike")
    parser.add_argument("--solutions", type=Path, default=None, help=f"Default: {DEFAULT_SOLUTIONS} when present.")
    parser.add_argument("--tasks", default=None, help="Only these task ids, e.g. 1,2,9.")
    parser.add_argument("--state", type=Path, default=None, help="The fidelity benchmark's state folder (default --out).")
    parser.add_argument("--cache", type=Path, default=None, help="Build/JIT caches, shared with fidelity.py.")
    parser.add_argument("--reports", type=Path, default=None, help="Folder for the markdown (default OUT/reports).")
    parser.add_argument("--probe-jobs", type=int, default=4, help="Probe processes at a time (none times anything).")
    parser.add_argument("--run-harness", action="store_true",
                        help="Run the harness (pike, all at once) on solutions the state has no verdict for.")
    parser.add_argument("--margin-s", type=float, default=30.0)
    parser.add_argument("--render-only", action="store_true", help="Probe nothing: write the report from --state.")
    args = parser.parse_args()
    device = args.device or default_device()
    folder = args.solutions or DEFAULT_SOLUTIONS
    if not folder.is_dir():
        parser.error(f"no solutions folder {folder}: give --solutions DIR")
    suite = load_suite(REPO / "tasks" / args.suite, origin="benchmarks")
    work = solutions(folder, suite, {int(t) for t in args.tasks.split(",")} if args.tasks else None)
    budget = Budget(args.budget_s)
    state = runs.State(args.state or args.out)
    cache = args.cache.resolve() if args.cache else None
    finished = args.render_only or probe_all(work, state, device, budget, cache, args.probe_jobs, args.margin_s)
    if args.run_harness and finished and not args.render_only:
        settings = {"warmup_ms": 500.0, "rep_ms": 2000.0}
        finished = runs.harness_phase(work, state, device, "pike", "all", settings, budget, cache,
                                 workdir(args, "audit"), args.jobs, args.margin_s)
    rows = audit_rows(work, state)
    s = summary(rows)
    gpu = runs.gpu_name(device, state)
    setup = {"gpu": gpu, "torch": runs.torch_version(state), "date": time.strftime("%Y-%m-%d"), "solutions": str(folder),
             "new_seed": 42, "finished": finished,
             "suite": args.suite}
    text = markdown(rows, s, setup)
    if not finished:
        text += "\n**Partial**: the budget stopped this call; run it again with the same --state.\n"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "pike-audit.json").write_text(json.dumps({"setup": setup, "summary": s, "rows": rows}, indent=2,
                                                         default=str) + "\n")
    reports = args.reports or args.out / "reports"
    reports.mkdir(parents=True, exist_ok=True)
    (reports / "pike-b-published-audit.md").write_text(text)
    if (args.state or args.out).resolve() != args.out.resolve():
        (args.out / "fidelity.jsonl").write_bytes(state.path.read_bytes())
    print(text)
    return 0 if finished else 3


if __name__ == "__main__":
    sys.exit(main())
