"""Wall time of one `pikeh report` call, this checkout's reporter against another version of it.

A report is mostly fixed cost on small runs (loading, the metric views, the figures), which every test
of tests/report and every user's `pikeh report` pays. This times the same command with this checkout's
``duckdb`` reporter and with another version of it, in alternating rounds (so a busy machine slows
both alike), prints each call's seconds, the medians and their ratio, and checks that the two wrote
the same files (the HTML page compared without its generation time).

The other version is a folder holding a ``pikeh_duckdb`` package, for instance an earlier commit's:

  mkdir -p /tmp/old && git archive REV plugins/pikeh_duckdb | tar -x -C /tmp/old
  python3 benchmarks/report_speed.py --input runs/ --baseline-plugins /tmp/old/plugins --format csv,html
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GENERATED = re.compile(rb"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")  # the page's generation time


def one_report(inputs: list[str], output: Path, formats: str, plugins: Path | None) -> float:
    """Seconds of one `pikeh report` process; ``plugins``: where its ``pikeh_duckdb`` comes from."""
    env = dict(os.environ)
    if plugins is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(plugins), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    command = ["pikeh", "report", "--output", str(output), "--format", formats]
    for path in inputs:
        command += ["--input", path]
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"report_speed: `{' '.join(command)}` failed:\n{done.stdout}{done.stderr}")
    return seconds


def differing_files(a: Path, b: Path) -> list[str]:
    """Files the two reports do not share byte for byte (report.duckdb aside: it records its own pages)."""
    names = {p.name for p in a.iterdir()} | {p.name for p in b.iterdir()}
    differ = []
    for name in sorted(names - {"report.duckdb"}):
        if not (a / name).is_file() or not (b / name).is_file():
            differ.append(name)
            continue
        left, right = (a / name).read_bytes(), (b / name).read_bytes()
        if name.endswith(".html"):
            left, right = GENERATED.sub(b"", left), GENERATED.sub(b"", right)
        if left != right:
            differ.append(name)
    return differ


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", action="append", required=True, help="as `pikeh report --input` (repeatable)")
    parser.add_argument("--baseline-plugins", type=Path, required=True,
                        help="a folder holding the other version's pikeh_duckdb package")
    parser.add_argument("--format", default="csv,html", help="as `pikeh report --format` (default csv,html)")
    parser.add_argument("--rounds", type=int, default=3, help="calls of each version (default 3)")
    args = parser.parse_args(argv)
    if not (args.baseline_plugins / "pikeh_duckdb" / "__init__.py").is_file():
        parser.error(f"--baseline-plugins {args.baseline_plugins} holds no pikeh_duckdb package")
    times: dict[str, list[float]] = {"baseline": [], "this": []}
    with tempfile.TemporaryDirectory(prefix="report-speed-") as tmp:
        outputs = {side: Path(tmp) / side for side in times}
        for _ in range(args.rounds):
            for side, plugins in (("baseline", args.baseline_plugins), ("this", None)):
                times[side].append(one_report(args.input, outputs[side], args.format, plugins))
                print(f"{side}: {times[side][-1]:.2f} s", flush=True)
        differ = differing_files(outputs["baseline"], outputs["this"])
    medians = {side: statistics.median(values) for side, values in times.items()}
    print(f"median: baseline {medians['baseline']:.2f} s, this {medians['this']:.2f} s, "
          f"ratio baseline/this {medians['baseline'] / medians['this']:.2f}")
    print("outputs: identical" if not differ else f"outputs differ: {', '.join(differ)}")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
