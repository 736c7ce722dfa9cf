"""The speed-of-light table of a suite on this host's GPU: FLOPs, least bytes, the bound, and how close
the eager and torch.compile references come to it.

    python3 benchmarks/sol_table.py --suite level3-pike --output-dir OUT \\
        --baselines reports/baselines/h100-level3-pike

writes OUT/sol-<suite>-<gpu>.md (and .json): per task the precision the tolerance allows, GFLOP, MB, the
bound on the datasheet peaks and on the peaks this card measured (a large copy and large matmuls,
worker/microbench.py), and, from a `pikeh baselines` folder, the eager and compile runtimes as
percentages of the bound. Counting runs on meta tensors (seconds for level3-pike); the microbenchmark
takes a few seconds on a GPU. ``--device cpu`` exercises the same code on a CPU (CI). pike-harness need
not be installed: src/ is put on the path.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO / "src") not in sys.path:
    sys.path.insert(0, str(REPO / "src"))

from pike_harness.contracts.suite import parse_id_list  # noqa: E402
from pike_harness.host import speed_of_light as sol  # noqa: E402
from pike_harness.host.tasks import load_suite  # noqa: E402


def measured_peaks(device: str) -> dict[str, Any] | None:
    """worker/microbench.py in a process of its own (the counting process holds no GPU memory)."""
    done = subprocess.run([sys.executable, "-m", "pike_harness.worker.microbench", "--device", device],
                          capture_output=True, text=True, timeout=300, check=False)
    if done.returncode != 0:
        print(f"microbenchmark failed: {done.stderr[-1000:]}", file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def measured_sol_ms(flops: float, nbytes: float, precision: str, measured: dict[str, Any] | None) -> float | None:
    """The bound on what this card measured: the matmul rate of the precision (fp16 falls back to bf16,
    then fp32, where a device has no such mode) and the copy bandwidth."""
    if not measured:
        return None
    rates = measured.get("matmul_tflops") or {}
    rate = next((rates[p] for p in (precision, "bf16", "fp32") if rates.get(p)), None)
    if not rate or not measured.get("copy_gbs"):
        return None
    return max(flops / (rate * 1e12), nbytes / (measured["copy_gbs"] * 1e9)) * 1e3


def baseline_runtimes(folder: Path | None) -> tuple[dict[tuple[str, str], float], str | None]:
    """(task, mode) -> the latest correct runtime of a `pikeh baselines` folder, and its GPU's name."""
    if folder is None:
        return {}, None
    runtimes: dict[tuple[str, str], float] = {}
    for line in (folder / "baselines.jsonl").read_text(encoding="utf-8").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        result = event.get("result") or {}
        if result.get("category") == "correct" and result.get("runtime_ms"):
            runtimes[(event["task"], event["mode"])] = float(result["runtime_ms"])
    try:
        gpu = json.loads((folder / "meta.json").read_text()).get("environment", {}).get("gpu")
    except (OSError, ValueError):
        gpu = None
    return runtimes, gpu


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def pct(sol_ms: float | None, runtime_ms: float | None) -> str:
    value = sol.fraction(sol_ms, runtime_ms)
    return "–" if value is None else f"{value * 100:.3g}%"


@contextlib.contextmanager
def _children_find_this_checkout() -> Iterator[None]:
    """The counting and microbenchmark processes import pike_harness too, installed or not. Only while
    ``main`` runs: set at import, it leaked into every later subprocess of a test run that imports this
    module (a packaging test's fresh venv then imported this checkout instead of its wheel)."""
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), saved) if p)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def main(argv: list[str] | None = None) -> int:
    with _children_find_this_checkout():
        return _main(argv)


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="level3-pike")
    parser.add_argument("--tasks", help="Only these ids, e.g. 1-5,9.")
    parser.add_argument("--output-dir", type=Path, required=True)
    parser.add_argument("--baselines", type=Path, help="A `pikeh baselines` folder measured on this GPU.")
    parser.add_argument("--device", default="cuda", help="cuda (this host's GPU) or cpu.")
    parser.add_argument("--device-name", help="Bound for this device name instead of the one found.")
    parser.add_argument("--peaks", action="append", default=[], help="Extra peak table (TOML).")
    parser.add_argument("--no-microbench", action="store_true", help="Skip the measured copy and matmuls.")
    args = parser.parse_args(argv)

    started = time.monotonic()
    suite = load_suite(REPO / "tasks" / args.suite, origin="tree")
    tasks = suite.tasks()
    if args.tasks:
        wanted = set(parse_id_list(args.tasks))
        tasks = [t for t in tasks if t.id in wanted]
    precisions = [sol.bound_precision(t.meta.precision, t.meta.precision_rule, t.meta.atol, t.meta.rtol)
                  for t in tasks]
    counts, gpu = sol.count_work(list(zip([t.source for t in tasks], precisions, strict=True)),
                                 gpu_name=args.device.startswith("cuda"))
    if args.device.startswith("cuda") and gpu is None:
        print("no GPU is visible: use --device cpu", file=sys.stderr)
        return 2
    if args.device == "cpu":
        from pike_harness.worker.environment import cpu_model

        gpu = None
        device_name = args.device_name or cpu_model()
    else:
        device_name = args.device_name or gpu
    peaks = sol.find_peaks(device_name, sol.load_peaks(args.peaks))
    measured = None if args.no_microbench else measured_peaks(args.device)
    runtimes, baseline_gpu = baseline_runtimes(args.baselines)
    if baseline_gpu and gpu and baseline_gpu != gpu:
        print(f"warning: the baselines were measured on {baseline_gpu}, this is {gpu}", file=sys.stderr)

    records = []
    for task, count in zip(tasks, counts, strict=True):
        record = sol.task_bound(task, count, peaks)
        if "error" not in record:
            record["measured_sol_ms"] = measured_sol_ms(record["flops"], record["bytes"], record["precision"], measured)
        record["eager_ms"] = runtimes.get((task.ref, "eager"))
        record["compile_ms"] = runtimes.get((task.ref, "compile"))
        records.append(record)

    args.output_dir.mkdir(parents=True, exist_ok=True)
    stem = f"sol-{args.suite}-{slug(device_name or 'unknown')}"
    (args.output_dir / f"{stem}.json").write_text(json.dumps(
        {"suite": args.suite, "device_name": device_name, "peaks": sol.peaks_dict(peaks), "microbenchmark": measured,
         "baselines": str(args.baselines) if args.baselines else None, "tasks": records}, indent=1, default=str))
    lines = [f"# Speed of light: {args.suite} on {device_name}", ""]
    if peaks is None:
        lines += [f"No peak figures for this device ({device_name}): counts only.", ""]
    else:
        lines += [f"Datasheet peaks ({peaks.name}, {peaks.source}): FP32 {peaks.fp32:g}, TF32 {peaks.tf32:g}, "
                  f"BF16 {peaks.bf16:g}, FP16 {peaks.fp16:g} TFLOP/s dense; {peaks.bandwidth_gbs:g} GB/s.", ""]
    if measured:
        rates = ", ".join(f"{k} {v:.3g}" for k, v in measured["matmul_tflops"].items())
        lines += [f"Measured on this card: copy {measured['copy_gbs']:.0f} GB/s (read + write of "
                  f"{measured['copy_mb']} MB); {measured['matmul_n']}^2 matmul TFLOP/s: {rates}.", ""]
    lines += ["SoL time = max(FLOPs / peak, least bytes / bandwidth) at the precision the tolerance allows "
              "(fp16 where rtol >= 4.9e-3); least bytes = inputs + parameters + buffers + outputs, once each. "
              "FLOPs: matmul/convolution/attention (torch.utils.flop_counter). Eager and compile: runtimes "
              f"from {_shown(args.baselines) or 'no baseline set'} as % of the datasheet SoL time. docs/report.md "
              "explains the assumptions.", "",
              "| task | precision | GFLOP | MB | SoL ms (datasheet) | bound | SoL ms (measured) | eager ms | eager | "
              "compile ms | compile |", "|" + "---|" * 11]

    def ms(value: float | None) -> str:
        return "–" if value is None else f"{value:.4g}"

    for r in records:
        if r.get("error"):
            lines.append(f"| {r['task']} | counting failed: {r['error'][:80]} |" + " |" * 9)
            continue
        lines.append(f"| {r['task']} {r['name']} | {r['precision']} | {r['flops'] / 1e9:.4g} | {r['bytes'] / 1e6:.4g} "
                     f"| {ms(r.get('sol_ms'))} | {r.get('bound', '–')} | {ms(r.get('measured_sol_ms'))} "
                     f"| {ms(r['eager_ms'])} | {pct(r.get('sol_ms'), r['eager_ms'])} | {ms(r['compile_ms'])} "
                     f"| {pct(r.get('sol_ms'), r['compile_ms'])} |")
    (args.output_dir / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.output_dir / stem}.md and .json ({len(records)} tasks, {time.monotonic() - started:.0f} s)")
    return 0


def _shown(path: Path | None) -> str | None:
    """A baseline folder as the report names it: relative to the checkout when inside it (no machine paths)."""
    if path is None:
        return None
    try:
        return str(path.resolve().relative_to(Path(__file__).resolve().parents[1]))
    except ValueError:
        return str(path)


if __name__ == "__main__":
    sys.exit(main())

