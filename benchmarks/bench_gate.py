"""Gate-held time by stage, the previous source tree against this one, in one sitting (issue 19).

Each tree runs in a subprocess of its own (``PYTHONPATH=TREE/src:TREE/plugins:$PYTHONPATH``) that
submits the whole candidate set at once to a fresh ``LocalEvaluator`` (as a run does) and writes
``side-<label>.json``: per candidate its verdict, runtime, stage seconds and the time it held the
device gate (``JobTrace.granted`` to ``released``), plus the wall time. This process then prints and
writes ``gate.md``/``gate.json``:

* wall time per tree;
* gate-held seconds per evaluation, mean, split by stage (``correctness``, ``reference``,
  ``reference_wait``, ``compare``, ``timing``; what they do not cover is ``other``; ``inputs`` is
  shown too, but runs before the gate);
* the timing share (timing / gate-held, summed over evaluations);
* with a shared check phase (``--check-slots``, new trees), how long checks ran (the device's
  ``check_busy_s``: some candidate checking, none timed), each candidate's check phase, and the device
  time per evaluation that counts both (gate-held + check phase, over the evaluations);
* verdict agreement, and runtime agreement for candidates correct in both (new/old ratio; the
  issue's goal: within 2 %), over the candidates both trees finished.

The candidate set: the suite's task sources as candidates (``eager``: the reference itself, no
compile) and the solution files of ``--solutions`` named ``task_N.py`` (default ``.fidelity/pike-b-level3``,
an ignored folder of this checkout). Compile-heavy solutions take 50-120 s
each on an H100: ``--set``, ``--tasks`` and ``--max-solutions`` choose a subset that fits the budget.

  # one GPU call: the old tree (src/ and plugins/ suffice) in an ignored folder the call carries
  mkdir -p .bench-trees && git archive b2b48a1 --prefix=old/ src plugins | tar -x -C .bench-trees
  python3 benchmarks/bench_gate.py --old-tree .bench-trees/old --out $OUT --max-solutions 8
  # a CPU smoke check of the script
  python3 benchmarks/bench_gate.py --old-tree DIR --device cpu --suite smoke --protocol quick --out /tmp/gate
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
STAGES = ("inputs", "correctness", "reference", "reference_wait", "compare", "timing")
NAME = re.compile(r"^(?:task_)?(\d+)(?:_.*)?\.py$")
RUNTIME_TOLERANCE = 0.02


def default_solutions() -> Path:
    """PIKE-B's published solutions, in the ignored folder where perf_common keeps them (this module
    imports nothing of the benchmarks: it also drives an old tree)."""
    return REPO / ".fidelity" / "pike-b-level3"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "bench-out"))
    parser.add_argument("--old-tree", type=Path, help="Source tree of the previous commit (has src/ and plugins/).")
    parser.add_argument("--new-tree", type=Path, default=REPO, help="Source tree of the new code (default: this one).")
    parser.add_argument("--device", default=None, help="cpu or cuda:N (default: cuda:0 if available).")
    parser.add_argument("--suite", default="level3-pike")
    parser.add_argument("--solutions", type=Path, default=None, help="Folder of task_N.py solutions.")
    parser.add_argument("--set", choices=("eager", "solutions", "all"), default="all")
    parser.add_argument("--tasks", default=None, help="Comma-separated task ids (default: all).")
    parser.add_argument("--max-solutions", type=int, default=None, help="At most this many solution files.")
    parser.add_argument("--protocol", default=None, help="Default: pike on a GPU (500/2000 ms), quick on the CPU.")
    parser.add_argument("--warmup-ms", type=float, default=500.0)
    parser.add_argument("--rep-ms", type=float, default=2000.0)
    parser.add_argument("--budget-s", type=float, default=480.0,
                        help="For both trees together (each side stops at its share; unfinished ones are left out).")
    parser.add_argument("--check-slots", type=int, default=None,
                        help="The engine's check slots (default: its own; trees without them ignore it).")
    parser.add_argument("--old-check-slots", type=int, default=None,
                        help="The old tree's check slots, when it has them (default: --check-slots): "
                             "an A/B of two slot counts with --old-tree set to this tree.")
    parser.add_argument("--order", choices=("old-first", "new-first"), default="new-first")
    parser.add_argument("--side", default=None, help=argparse.SUPPRESS)  # internal: run one tree, write its JSON
    parser.add_argument("--side-budget-s", type=float, default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


# -- one tree, in its own process ---------------------------------------------------------------------

def candidates(args: argparse.Namespace) -> list[tuple[str, Any, str]]:
    """(name, task, source) for the chosen set; only APIs both trees have."""
    from pike_harness.host.tasks import load_suite

    suite = load_suite(REPO / "tasks" / args.suite, origin="benchmarks")
    wanted = {int(t) for t in args.tasks.split(",")} if args.tasks else None
    items: list[tuple[str, Any, str]] = []
    if args.set in ("eager", "all"):
        for task in suite.tasks():
            if wanted is None or task.id in wanted:
                items.append((f"eager/{task.id}", task, task.source))
    if args.set in ("solutions", "all"):
        folder = args.solutions or default_solutions()
        found = []
        for path in sorted(folder.glob("*.py"), key=lambda p: (len(p.name), p.name)) if folder.is_dir() else []:
            match = NAME.match(path.name)
            if match is None or (wanted is not None and int(match.group(1)) not in wanted):
                continue
            try:
                found.append((f"solution/{match.group(1)}", suite.task(int(match.group(1))), path.read_text()))
            except Exception as exc:  # noqa: BLE001 - a file for a task this suite lacks
                print(f"[gate] skipped {path.name}: {exc}", file=sys.stderr)
        items.extend(found[: args.max_solutions] if args.max_solutions is not None else found)
    return items


def run_side(args: argparse.Namespace) -> None:
    from pikeh_local import LocalEvaluator

    from pike_harness.contracts.evaluation import EvaluatorOptions
    from pike_harness.contracts.model import Limits

    began = time.monotonic()
    deadline = began + (args.side_budget_s or args.budget_s)
    params = {} if args.protocol == "quick" else {"warmup_ms": args.warmup_ms, "rep_ms": args.rep_ms}
    work = Path(tempfile.mkdtemp(prefix=f"pikeh-gate-{args.side}-"))
    extra = {"check_slots": args.check_slots} if args.check_slots else {}
    evaluator = LocalEvaluator(EvaluatorOptions(device=args.device, protocol=args.protocol, protocol_params=params,
                                                workdir=work, config=LocalEvaluator.Config(**extra)))
    engine = evaluator.engine
    items = candidates(args)
    first = len(engine.traces)
    submitted = time.monotonic()
    limits = Limits(compile_timeout_s=600, run_timeout_s=600)
    futures = [(name, task, evaluator.submit(task.eval_request(source, limits=limits))) for name, task, source in items]
    rows = []
    for index, (name, task, future) in enumerate(futures):
        row: dict[str, Any] = {"name": name, "task": task.ref}
        try:
            result = future.result(timeout=max(0.0, deadline - time.monotonic()))
            row.update(category=result.category, check=result.check, runtime_ms=result.runtime_ms,
                       stages=dict(result.stage_seconds), environment_gpu=(result.environment or {}).get("gpu"))
        except Exception as exc:  # noqa: BLE001 - out of budget, or an evaluator error: recorded, not fatal
            row.update(category="unfinished" if time.monotonic() >= deadline else "evaluator_error",
                       reason=str(exc)[:300])
        trace = engine.traces[first + index] if first + index < len(engine.traces) else None
        if trace is not None and trace.granted is not None and trace.released is not None:
            row["gate_s"] = trace.released - trace.granted
            row["granted_at"], row["released_at"] = trace.granted - submitted, trace.released - submitted
        if trace is not None and getattr(trace, "check_granted", None) is not None and trace.checked is not None:
            row["check_s"] = trace.checked - trace.check_granted  # the shared check phase (new trees only)
        rows.append(row)
    wall = time.monotonic() - submitted
    stats = engine.stats()
    evaluator.close()
    payload = {"label": args.side, "tree": os.environ.get("PIKEH_GATE_TREE"), "wall_s": wall, "rows": rows,
               "engine": stats, "device": args.device, "protocol": args.protocol, "params": params}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"side-{args.side}.json").write_text(json.dumps(payload, indent=1, default=str))
    print(f"[gate] {args.side}: {len(rows)} candidates in {wall:.1f} s")


# -- both trees, and the comparison ----------------------------------------------------------------------

def launch(args: argparse.Namespace, label: str, tree: Path, budget_s: float) -> dict[str, Any] | None:
    tree = tree.resolve()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree / "src"), str(tree / "plugins"), *filter(None, [env.get("PYTHONPATH")])])
    env["PIKEH_GATE_TREE"] = str(tree)
    caches = Path(tempfile.mkdtemp(prefix=f"pikeh-gate-cache-{label}-"))  # no JIT cache shared by the two
    env["TRITON_CACHE_DIR"], env["TORCHINDUCTOR_CACHE_DIR"] = str(caches / "triton"), str(caches / "inductor")
    argv = [sys.executable, str(Path(__file__).resolve()), "--side", label, "--side-budget-s", f"{budget_s:.0f}",
            "--out", str(args.out), "--device", args.device, "--suite", args.suite, "--set", args.set,
            "--protocol", args.protocol, "--warmup-ms", str(args.warmup_ms), "--rep-ms", str(args.rep_ms)]
    if args.tasks:
        argv += ["--tasks", args.tasks]
    slots = args.old_check_slots if label == "old" and args.old_check_slots else args.check_slots
    if slots:
        argv += ["--check-slots", str(slots)]
    if args.max_solutions is not None:
        argv += ["--max-solutions", str(args.max_solutions)]
    if args.solutions is not None:
        argv += ["--solutions", str(args.solutions.resolve())]
    try:
        subprocess.run(argv, env=env, timeout=budget_s + 60, check=False)
    except subprocess.TimeoutExpired:
        print(f"[gate] {label}: killed past its budget", file=sys.stderr)
    path = args.out / f"side-{label}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def side_summary(side: dict[str, Any]) -> dict[str, Any]:
    rows = [r for r in side["rows"] if "gate_s" in r]
    gate = [r["gate_s"] for r in rows]
    stages = {name: _mean([float(r.get("stages", {}).get(name, 0.0)) for r in rows]) for name in STAGES}
    checked_apart = ("timing",)  # a tree with a shared check phase holds the gate for timing only
    inside = ("correctness", "reference", "reference_wait", "compare", "timing")
    other = _mean([r["gate_s"] - sum(float(r.get("stages", {}).get(n, 0.0))
                                     for n in (checked_apart if "check_s" in r else inside)) for r in rows])
    timing_total = sum(float(r.get("stages", {}).get("timing", 0.0)) for r in rows)
    devices = (side.get("engine") or {}).get("devices") or {}
    exclusive = sum(float(d.get("busy_s") or 0.0) for d in devices.values())
    checking = sum(float(d.get("check_busy_s") or 0.0) for d in devices.values())
    n = len(side["rows"])
    return {"wall_s": side["wall_s"], "evaluations": n, "gated": len(rows),
            "gate_total_s": sum(gate), "gate_mean_s": _mean(gate), "stage_mean_s": stages, "other_mean_s": other,
            "timing_share": timing_total / sum(gate) if gate else None,
            "check_phase_s": checking, "check_mean_s": _mean([r["check_s"] for r in side["rows"] if "check_s" in r]),
            "occupied_per_eval_s": (exclusive + checking) / n if n else None,
            "timing_share_occupied": timing_total / (exclusive + checking) if exclusive + checking else None,
            "categories": _count(r["category"] for r in side["rows"])}


def _count(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for value in values:
        out[value] = out.get(value, 0) + 1
    return dict(sorted(out.items()))


def agreement(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    finished = lambda side: {r["name"]: r for r in side["rows"] if r["category"] not in ("unfinished",)}  # noqa: E731
    a, b = finished(old), finished(new)
    both = sorted(set(a) & set(b))
    differ = [{"name": n, "old": f"{a[n]['category']}/{a[n].get('check')}", "new": f"{b[n]['category']}/{b[n].get('check')}"}
              for n in both if a[n]["category"] != b[n]["category"]]
    ratios = {n: b[n]["runtime_ms"] / a[n]["runtime_ms"] for n in both
              if a[n].get("runtime_ms") and b[n].get("runtime_ms")}
    off = {n: r for n, r in ratios.items() if abs(r - 1.0) > RUNTIME_TOLERANCE}
    return {"compared": len(both), "verdicts_agree": len(both) - len(differ), "verdict_differences": differ,
            "runtimes_compared": len(ratios), "runtime_ratio_median": statistics.median(ratios.values()) if ratios else None,
            "runtime_ratio_max_dev": max((abs(r - 1) for r in ratios.values()), default=None),
            "runtimes_within_2pct": len(ratios) - len(off), "runtime_outliers": off}


def fmt(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def report(summaries: dict[str, dict[str, Any]], agree: dict[str, Any] | None, setup: dict[str, Any]) -> str:
    labels = list(summaries)
    lines = [f"## Gate-held time by stage ({setup['suite']}, {setup['device']}, {setup['protocol']}, "
             f"set {setup['set']}, {setup['candidates']} candidates)", "",
             f"Check slots: old {setup['check_slots']['old'] or 'default'}, new {setup['check_slots']['new'] or 'default'} "
             "(a tree without a check phase ignores them).", "",
             "| | " + " | ".join(labels) + " |", "|---|" + "---|" * len(labels)]
    rows = [("wall time (s)", lambda s: fmt(s["wall_s"], 1)),
            ("evaluations (held the gate)", lambda s: f"{s['evaluations']} ({s['gated']})"),
            ("gate-held, total (s)", lambda s: fmt(s["gate_total_s"], 1)),
            ("gate-held per evaluation, mean (s)", lambda s: fmt(s["gate_mean_s"], 3))]
    rows += [(f"  {name} (s, mean)", lambda s, n=name: fmt(s["stage_mean_s"][n], 3)) for name in STAGES]
    rows += [("  other, in the gate (s, mean)", lambda s: fmt(s["other_mean_s"], 3)),
             ("timing share (timing / gate-held)", lambda s: fmt(s["timing_share"], 3)),
             ("shared check phase, wall (s)", lambda s: fmt(s.get("check_phase_s"), 1)),
             ("  one candidate's check phase, mean (s)", lambda s: fmt(s.get("check_mean_s"), 3)),
             ("device occupied (gate + check phase) per evaluation (s)", lambda s: fmt(s.get("occupied_per_eval_s"), 3)),
             ("timing share of the occupied time", lambda s: fmt(s.get("timing_share_occupied"), 3)),
             ("verdicts", lambda s: ", ".join(f"{k} {v}" for k, v in s["categories"].items()))]
    for title, cell in rows:
        lines.append(f"| {title} | " + " | ".join(cell(summaries[label]) for label in labels) + " |")
    if agree is not None:
        lines += ["", f"Verdicts agree on {agree['verdicts_agree']} of {agree['compared']} candidates both finished; "
                      f"runtimes within 2 % on {agree['runtimes_within_2pct']} of {agree['runtimes_compared']} "
                      f"(median new/old {fmt(agree['runtime_ratio_median'], 4)}, max deviation "
                      f"{fmt(agree['runtime_ratio_max_dev'], 4)})."]
        lines += [f"- verdict differs: {d['name']}: old {d['old']}, new {d['new']}" for d in agree["verdict_differences"]]
        lines += [f"- runtime off by more than 2 %: {n}: new/old {r:.4f}" for n, r in agree["runtime_outliers"].items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.device is None:
        import torch

        args.device = "cuda:0" if torch.cuda.is_available() else "cpu"
    args.protocol = args.protocol or ("pike" if args.device.startswith("cuda") else "quick")
    if args.side:
        run_side(args)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    trees = [("new", args.new_tree)] + ([("old", args.old_tree)] if args.old_tree else [])
    if args.order == "old-first":
        trees.reverse()
    sides: dict[str, dict[str, Any]] = {}
    for index, (label, tree) in enumerate(trees):
        left = args.budget_s - (time.monotonic() - began)
        share = left / (len(trees) - index)
        side = launch(args, label, tree, share - 30)  # start-up and shutdown of the side process
        if side is not None:
            sides[label] = side
    summaries = {label: side_summary(sides[label]) for label in ("old", "new") if label in sides}
    agree = agreement(sides["old"], sides["new"]) if {"old", "new"} <= set(sides) else None
    setup = {"suite": args.suite, "device": args.device, "protocol": args.protocol, "set": args.set,
             "candidates": max((s["evaluations"] for s in summaries.values()), default=0),
             "params": {"warmup_ms": args.warmup_ms, "rep_ms": args.rep_ms},
             "check_slots": {"old": args.old_check_slots or args.check_slots, "new": args.check_slots}}
    text = report(summaries, agree, setup)
    (args.out / "gate.md").write_text(text)
    (args.out / "gate.json").write_text(json.dumps({"setup": setup, "summaries": summaries, "agreement": agree},
                                                   indent=1, default=str))
    print(text)
    return 0 if summaries else 1


if __name__ == "__main__":
    sys.exit(main())
