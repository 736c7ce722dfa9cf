"""The hand-off of a candidate's checked outputs to the reference process: before against now, side by side.

Before (up to commit 8cfb207): the candidate's process copied each output to a fresh host tensor,
``torch.save``d the list into the exchange file, and the reference process ``torch.load``ed it
(``weights_only``) and moved each tensor to its device. Now: ``output_file.OutputWriter`` streams each
output from the device through one pinned buffer into the file, and ``output_file.read_outputs``
streams it back onto the device. The "before" side is those three steps written out here, line for
line as the old code had them.

Per size: the outputs of five checked calls (``check_plan(3)``), one tensor each of SIZE MB, on
``--device``; the write (candidate side) and the read (reference side) are timed separately, median
of ``--repeats``, each side's file in shared memory (/dev/shm when there is one). Prints both and the
ratio now / before, and writes ``bench_handoff.{json,md}``.

  python3 benchmarks/bench_handoff.py --device cpu --sizes 1,64,256 --out /tmp/handoff

With ``--disk DIR`` it also times today's hand-off with the file in shared memory against the same in a
folder of DIR (a disk-backed folder, as the candidate's scratch directory is): where an exchange folder
goes when ``/dev/shm`` lacks the room (``exchange.make``), side by side in one run, with the ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from pike_harness.worker.output_file import read_outputs, write_outputs

CALLS = 5  # check_plan(3): three first-sight calls, the second call of set 0, a second instance


def _before_write(path: Path, calls: list[list[torch.Tensor]]) -> None:
    torch.save([[t.to("cpu") for t in outputs] for outputs in calls], path)


def _before_read(path: Path, device: torch.device) -> list[list[torch.Tensor]]:
    with open(path, "rb") as handle:
        outputs = torch.load(handle, weights_only=True, map_location="cpu")
    return [[t.to(device) for t in values] for values in outputs]


def _now_write(path: Path, calls: list[list[torch.Tensor]]) -> None:
    write_outputs(path, calls)


def _now_read(path: Path, device: torch.device) -> list[list[torch.Tensor]]:
    return read_outputs(path, CALLS, device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def _time(step: Callable[[], object], device: torch.device) -> float:
    _sync(device)
    began = time.perf_counter()
    result = step()
    _sync(device)
    seconds = time.perf_counter() - began
    del result
    return seconds


def measure(size_mb: int, device: torch.device, repeats: int, folder: Path) -> dict:
    calls = [[torch.randn(size_mb * 2**20 // 4, device=device)] for _ in range(CALLS)]
    row: dict = {"size_mb": size_mb, "calls": CALLS}
    for name, write, read in (("before", _before_write, _before_read), ("now", _now_write, _now_read)):
        writes, reads = [], []
        for attempt in range(repeats):
            path = folder / f"{name}-{size_mb}-{attempt}"
            writes.append(_time(lambda path=path, write=write: write(path, calls), device))
            reads.append(_time(lambda path=path, read=read: read(path, device), device))
            back = read(path, device)
            assert all(torch.equal(a[0], b[0]) for a, b in zip(calls, back, strict=True)), name
            del back
            path.unlink()
        row[name] = {"write_s": statistics.median(writes), "read_s": statistics.median(reads)}
    for part in ("write_s", "read_s"):
        row[f"ratio_{part}"] = row["now"][part] / row["before"][part]
    row["ratio_total"] = (row["now"]["write_s"] + row["now"]["read_s"]) / (
        row["before"]["write_s"] + row["before"]["read_s"])
    return row


def place_row(size_mb: int, device: torch.device, repeats: int, shm: Path, disk: Path) -> dict:
    """Today's write and read of the outputs file in shared memory and on disk, alternating per repeat."""
    calls = [[torch.randn(size_mb * 2**20 // 4, device=device)] for _ in range(CALLS)]
    times: dict[str, list[float]] = {"shm": [], "disk": []}
    for attempt in range(repeats):
        for place, folder in (("shm", shm), ("disk", disk)):
            path = folder / f"place-{size_mb}-{attempt}"
            write = _time(lambda path=path: _now_write(path, calls), device)
            read = _time(lambda path=path: _now_read(path, device), device)
            path.unlink()
            times[place].append(write + read)
    row = {"size_mb": size_mb, "shm_s": statistics.median(times["shm"]), "disk_s": statistics.median(times["disk"])}
    row["ratio_disk_over_shm"] = row["disk_s"] / row["shm_s"]
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", default="1,64,256", help="MB per output, comma-separated.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("bench-out"))
    parser.add_argument("--disk", type=Path, default=None, help="Also compare shared memory with a folder here.")
    args = parser.parse_args()
    device = torch.device(args.device)
    shm = Path("/dev/shm")
    places: list[dict] = []
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None) as scratch:
        rows = [measure(int(size), device, args.repeats, Path(scratch)) for size in args.sizes.split(",")]
        if args.disk is not None:
            args.disk.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryDirectory(dir=args.disk) as on_disk:
                places = [place_row(int(size), device, args.repeats, Path(scratch), Path(on_disk))
                          for size in args.sizes.split(",")]
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    lines = [f"### Outputs hand-off, before / now ({gpu}, {time.strftime('%Y-%m-%d')})", "",
             f"{CALLS} checked calls, one output of SIZE MB each, median of {args.repeats}; write = the candidate's "
             "process, read = the reference process.", "",
             "| MB per output | write before (s) | write now (s) | read before (s) | read now (s) | total now / before |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['size_mb']} | {r['before']['write_s']:.3f} | {r['now']['write_s']:.3f} | "
                     f"{r['before']['read_s']:.3f} | {r['now']['read_s']:.3f} | {r['ratio_total']:.2f}x |")
    if places:
        lines += ["", f"Today's hand-off (write and read), file in shared memory against a folder of {args.disk}:", "",
                  "| MB per output | shared memory (s) | disk folder (s) | disk / shared memory |", "|---|---|---|---|"]
        lines += [f"| {r['size_mb']} | {r['shm_s']:.3f} | {r['disk_s']:.3f} | {r['ratio_disk_over_shm']:.2f}x |"
                  for r in places]
    text = "\n".join(lines) + "\n"
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_handoff.md").write_text(text)
    (args.out / "bench_handoff.json").write_text(json.dumps({"device": str(device), "gpu": gpu, "rows": rows,
                                                             "places": places}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
