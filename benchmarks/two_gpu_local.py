"""Two GPUs busy at once, never two timings on one GPU: a batch through the ``local`` evaluator.

Builds the ``local`` evaluator through the plugin host (the ``EvaluatorSpec`` factory, as ``pikeh``
does), with ``--device cuda:0,1`` by default, and evaluates a mixed batch: every smoke task's
reference as a candidate (correct), a wrong and a crashing variant, a ``load_inline`` CUDA GELU (one
cold build, then a cache hit), a Triton GELU (JIT warm-up outside the lock), and three level3-pike
references. It then checks, from what the evaluator recorded:

* which GPU ran each evaluation: ``EvalResult.environment["device"]`` (the evaluator's label), and
  the UUID the candidate's own process saw (each candidate prints it at import; the line comes back
  in ``stdout_tail``), matched against ``nvidia-smi``'s index-to-UUID table;
* when each evaluation held its GPU: the engine's trace of every job (``granted`` / ``released``,
  ``timing_start`` / ``timing_end``, one clock), since result records keep durations only;
* that both GPUs were held at the same time (overlap of the per-GPU busy intervals > 0), and that on
  each GPU no two holds overlapped;
* as an outside observer, ``nvidia-smi`` utilisation sampled every 200 ms during the batch.

Writes ``two_gpu_local.json`` (every record's summary and the checks) and ``two_gpu_local.md`` into
``--out`` (default ``$OUT``). Exit status 0 when the concurrency checks passed (every evaluation
judged, both GPUs used and held at once, no overlap on one GPU, labels matching the physical GPUs);
verdicts other than expected are listed and recorded (``verdicts_as_expected``) but do not fail it.

  PYTHONPATH=src:plugins python3 benchmarks/two_gpu_local.py --out $OUT [--device cuda:0,1]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
for path in (REPO / "src", REPO / "plugins", REPO / "benchmarks"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from pike_harness.contracts.model import Limits, Task  # noqa: E402
from pike_harness.host.tasks import load_suite  # noqa: E402

PROBE = """
import torch as _pikeh_torch
if _pikeh_torch.cuda.is_available():
    _props = _pikeh_torch.cuda.get_device_properties(0)
    print("PIKEH_GPU uuid=%s name=%s" % (getattr(_props, "uuid", None), _props.name), flush=True)
"""
UUID_LINE = re.compile(r"PIKEH_GPU uuid=(\S+)")

TRITON_GELU = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _gelu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = 0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))
    tl.store(y_ptr + offsets, y, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _gelu[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        return y  # variant NONCE
'''


def as_candidate(task: Task) -> str:
    """The task's own reference, renamed ModelNew: a correct candidate with nothing to compile."""
    return re.sub(r"\bModel\b", "ModelNew", task.source)


def wrong(task: Task) -> str:
    return as_candidate(task) + "\n\n_forward = ModelNew.forward\nModelNew.forward = lambda self, *a: _forward(self, *a) + 0.5\n"


def raises(task: Task) -> str:
    return as_candidate(task) + "\n\ndef _boom(self, *a):\n    raise RuntimeError('kernel launch failed')\n\nModelNew.forward = _boom\n"


def batch(repeat: int, *, gpu: bool = True) -> list[tuple[str, Task, str, str]]:
    """(label, task, source, expected category) for the whole batch (``gpu=False``: the CPU dry run,
    without the CUDA/Triton candidates and the level3-pike models)."""
    from perf_common import INLINE_CUDA

    smoke = load_suite(REPO / "tasks" / "smoke", origin="benchmarks")
    level3 = load_suite(REPO / "tasks" / "level3-pike", origin="benchmarks")
    items: list[tuple[str, Task, str, str]] = []
    inline_nonce = secrets.token_hex(6)  # one cold build per run, then cache hits
    for rep in range(repeat):
        for task in smoke.tasks():
            items.append((f"{task.ref} clone", task, as_candidate(task) + f"\n# rep {rep}\n", "correct"))
        items.append(("smoke/1 wrong", smoke.task(1), wrong(smoke.task(1)) + f"\n# rep {rep}\n", "incorrect"))
        items.append(("smoke/3 raises", smoke.task(3), raises(smoke.task(3)) + f"\n# rep {rep}\n", "runtime_error"))
        if not gpu:
            continue
        items.append(("smoke/5 load_inline", smoke.task(5), INLINE_CUDA.replace("NONCE", inline_nonce), "correct"))
        items.append(("smoke/5 triton", smoke.task(5), TRITON_GELU.replace("NONCE", str(rep)), "correct"))
        for task_id in (1, 17, 9):
            task = level3.task(task_id)
            items.append((f"{task.ref} clone", task, as_candidate(task) + f"\n# rep {rep}\n", "correct"))
    return [(label, task, PROBE + source, expected) for label, task, source, expected in items]


def nvidia_smi_uuids() -> dict[str, str]:
    """GPU index -> UUID, as nvidia-smi lists them (physical order)."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    table = {}
    for line in out.strip().splitlines():
        index, _, uuid = line.partition(",")
        table[index.strip()] = uuid.strip()
    return table


class Sampler:
    """nvidia-smi utilisation every 200 ms in the background: an observer outside the harness."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, dict[str, int]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            proc = subprocess.Popen(["nvidia-smi", "--query-gpu=index,utilization.gpu", "--format=csv,noheader,nounits",
                                     "-lms", "200"], stdout=subprocess.PIPE, text=True)
        except OSError:
            return
        assert proc.stdout is not None
        current: dict[str, int] = {}
        for line in proc.stdout:
            if self._stop.is_set():
                break
            index, _, util = line.partition(",")
            if index.strip() in current:
                self.samples.append((time.monotonic(), current))
                current = {}
            try:
                current[index.strip()] = int(util.strip())
            except ValueError:
                continue
        proc.terminate()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()


def union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def overlap_s(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    total = 0.0
    for start_a, end_a in union(a):
        for start_b, end_b in union(b):
            total += max(0.0, min(end_a, end_b) - max(start_a, start_b))
    return total


def self_overlaps(intervals: list[tuple[float, float]]) -> int:
    ordered = sorted(intervals)
    return sum(1 for (_, end), (start, _) in zip(ordered, ordered[1:], strict=False) if start < end)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT") or "bench-out"))
    parser.add_argument("--device", default="cuda:0,1",
                        help="cuda:0,1 (default), cuda (every GPU), or cpu (a dry run of the script's logic: "
                             "one device, so the two-GPU checks fail by design)")
    parser.add_argument("--protocol", default="robust")
    parser.add_argument("--repeat", type=int, default=2, help="times the whole batch is submitted (default 2)")
    parser.add_argument("--budget-s", type=float, default=420.0, help="stop waiting after this (default 420)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    from pike_harness.contracts.evaluation import EvaluatorOptions
    from pike_harness.host.plugins import PluginHost

    try:  # the installed plugins when pike-harness is installed, else the source tree's local plugin
        host = PluginHost()
        spec = host.get("evaluators", "local")
    except Exception:  # noqa: BLE001 - not installed: register the built-in plugin by hand
        import pikeh_local

        host = PluginHost(entry_points=False, extra=[("local", pikeh_local, True)])
        spec = host.get("evaluators", "local")

    base = Path(tempfile.mkdtemp(prefix="pikeh-2gpu-", dir="/dev/shm" if os.access("/dev/shm", os.W_OK) else None))
    evaluator = spec.factory(EvaluatorOptions(device=args.device, protocol=args.protocol, workdir=base / "work",
                                              config=spec.make_config({"build_cache": str(base / "cache")})))
    devices = list(getattr(evaluator, "devices", []))
    print(f"[two_gpu_local] evaluator {evaluator.name} on {devices}: {json.dumps(evaluator.describe().get('scheduling'))}",
          flush=True)
    items = batch(args.repeat, gpu=args.device != "cpu")
    sampler = Sampler()
    sampler.start()
    started = time.monotonic()
    limits = Limits(compile_timeout_s=600, run_timeout_s=300)
    futures = [evaluator.submit(task.eval_request(source, limits=limits)) for _, task, source, _ in items]
    traces = list(getattr(getattr(evaluator, "engine", None), "traces", []))  # submission order
    results: list[Any] = []
    for (label, _, _, _), future in zip(items, futures, strict=True):
        left = args.budget_s - (time.monotonic() - started)
        try:
            result = future.result(timeout=max(1.0, left))
            results.append(result)
            print(f"[two_gpu_local] {time.monotonic() - started:6.1f} s  {label:28s} {result.environment.get('device')}"
                  f"  {result.category}{'/' + result.check if result.check else ''}"
                  f"{f'  {result.runtime_ms:.3f} ms' if result.runtime_ms else ''}", flush=True)
        except Exception as exc:  # noqa: BLE001 - recorded and reported, the batch goes on
            results.append(exc)
            print(f"[two_gpu_local] {label}: {type(exc).__name__}: {exc}", flush=True)
    wall = time.monotonic() - started
    sampler.stop()
    stats = evaluator.stats() if hasattr(evaluator, "stats") else {}
    evaluator.close()
    for _ in range(3):  # processes that were just killed may still be writing into their scratch
        shutil.rmtree(base, ignore_errors=True)
        if not base.exists():
            break
        time.sleep(1.0)

    uuids = nvidia_smi_uuids()
    rows = []
    for index, ((label, task, _, expected), result) in enumerate(zip(items, results, strict=True)):
        trace = traces[index].to_dict() if index < len(traces) else {}
        row: dict[str, Any] = {"label": label, "task": task.ref, "expected": expected, "trace": trace}
        if isinstance(result, Exception):
            row["error"] = f"{type(result).__name__}: {result}"
        else:
            seen = UUID_LINE.search(result.stdout_tail or "")
            label_device = result.environment.get("device")
            index_str = str(label_device).split(":")[1] if label_device and ":" in str(label_device) else None
            row.update({"category": result.category, "check": result.check, "runtime_ms": result.runtime_ms,
                        "device": label_device, "gpu": result.environment.get("gpu"),
                        "uuid_seen_by_candidate": seen.group(1) if seen else None,
                        "uuid_of_label": uuids.get(index_str) if index_str else None,
                        "stage_seconds": result.stage_seconds})
        rows.append(row)

    checks: dict[str, Any] = {}
    checks["all_evaluated"] = all("category" in r for r in rows)
    checks["verdicts_as_expected"] = all(r.get("category") == r["expected"] for r in rows)
    checks["both_gpus_used"] = len({r.get("device") for r in rows if r.get("device")}) >= 2
    # torch reports a UUID without the "GPU-" prefix that nvidia-smi prints.
    checks["label_matches_physical_gpu"] = all(
        _uuid(r["uuid_seen_by_candidate"]) in (_uuid(r["uuid_of_label"]), None) or r["uuid_of_label"] is None
        for r in rows if "category" in r) and any(r.get("uuid_seen_by_candidate") for r in rows)
    holds: dict[str, list[tuple[float, float]]] = {}
    timings: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        t = r["trace"]
        if t.get("granted") is not None and t.get("released") is not None:
            holds.setdefault(r["device"] or t.get("device"), []).append((t["granted"], t["released"]))
        if t.get("timing_start") is not None and t.get("timing_end") is not None:
            timings.setdefault(r["device"] or t.get("device"), []).append((t["timing_start"], t["timing_end"]))
    names = sorted(holds)
    checks["traces_available"] = bool(traces)
    checks["no_overlap_on_one_gpu"] = bool(holds) and all(self_overlaps(v) == 0 for v in holds.values())
    both_busy = overlap_s(holds[names[0]], holds[names[1]]) if len(names) >= 2 else 0.0
    both_timing = overlap_s(timings.get(names[0], []), timings.get(names[1], [])) if len(names) >= 2 else 0.0
    checks["both_gpus_held_at_once_s"] = round(both_busy, 3)
    checks["both_gpus_timing_at_once_s"] = round(both_timing, 3)
    checks["both_gpus_busy_at_once"] = both_busy > 0
    busy_samples = [s for _, s in sampler.samples if len(s) >= 2 and sum(1 for v in s.values() if v > 0) >= 2]
    checks["nvidia_smi_samples"] = len(sampler.samples)
    checks["nvidia_smi_samples_both_busy"] = len(busy_samples)
    # The exit status is the concurrency proof; a verdict other than expected is printed and recorded
    # (it says something about a candidate or a GPU, not about scheduling).
    passed = all(checks[k] for k in ("all_evaluated", "both_gpus_used", "label_matches_physical_gpu",
                                     "traces_available", "no_overlap_on_one_gpu", "both_gpus_busy_at_once"))
    per_device = {name: {"evaluations": len(holds[name]), "held_s": round(sum(e - s for s, e in holds[name]), 3)}
                  for name in names}
    env = next((r for r in results if not isinstance(r, Exception)), None)
    environment = {k: env.environment.get(k) for k in ("host", "cpu", "cpu_count", "gpu", "driver", "torch", "cuda",
                                                        "triton")} if env else {}
    payload = {"benchmark": "two_gpu_local", "date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "device": args.device,
               "protocol": args.protocol, "evaluations": len(rows), "wall_s": round(wall, 3), "passed": passed,
               "checks": checks, "per_device": per_device, "environment": environment, "nvidia_smi_uuids": uuids,
               "evaluator_stats": stats, "rows": rows}
    (args.out / "two_gpu_local.json").write_text(json.dumps(payload, indent=2, default=str) + "\n")

    lines = [f"## Two GPUs at once with the local evaluator ({environment.get('gpu')}, {environment.get('host')})", "",
             f"{len(rows)} evaluations, `--device {args.device}`, protocol `{args.protocol}`, wall {wall:.1f} s, "
             f"torch {environment.get('torch')}, driver {environment.get('driver')}, {time.strftime('%Y-%m-%d')}.", "",
             "| GPU | evaluations | held (s) |", "|---|---|---|"]
    lines += [f"| {name} | {v['evaluations']} | {v['held_s']} |" for name, v in per_device.items()]
    lines += ["", "| check | result |", "|---|---|"]
    lines += [f"| {key} | {value} |" for key, value in checks.items()]
    lines += ["", f"**{'PASSED' if passed else 'FAILED'}**: both GPUs held at once for {both_busy:.1f} s "
                  f"(timing stages at once: {both_timing:.1f} s); per GPU, no two holds overlapped: "
                  f"{checks['no_overlap_on_one_gpu']}."]
    markdown = "\n".join(lines) + "\n"
    (args.out / "two_gpu_local.md").write_text(markdown)
    print(markdown, flush=True)
    bad = [r for r in rows if r.get("category") != r["expected"]]
    for r in bad[:10]:
        print(f"[two_gpu_local] unexpected: {r['label']}: {r.get('category')}/{r.get('check')} "
              f"{r.get('error', '')}", flush=True)
    return 0 if passed else 1


def _uuid(value: str | None) -> str | None:
    return value.removeprefix("GPU-") if value else None


if __name__ == "__main__":
    sys.exit(main())
