#!/usr/bin/env bash
# Two GPUs at once through the `local` evaluator: a mixed batch of candidate evaluations on
# --device cuda:0,1, with proof (from the evaluator's own records and traces, and nvidia-smi as an
# outside observer) that both GPUs were held at the same time and that no two evaluations ever held
# one GPU at once. Writes into $OUT: two_gpu_local.json (every evaluation: GPU label, the UUID the
# candidate's process saw, verdict, hold and timing windows; the checks), two_gpu_local.md (summary),
# two_gpu_local.log and environment-2gpu.txt. About 3 to 5 minutes on a 2 x H100 host; capped at 8.
#
#   OUT=/some/folder benchmarks/two_gpu_local.sh                 # from the repository root or anywhere
#   DEVICE=cuda REPEAT=3 OUT=... benchmarks/two_gpu_local.sh     # every GPU; a bigger batch
#
# Needs python3 with torch (CUDA), triton, click, rich, pluggy and numpy; nvcc and ninja for the one
# load_inline build. Nothing else: no duckdb, altair, openai, anthropic or ray, and pike-harness need
# not be installed (src/ and plugins/ are put on PYTHONPATH). Exit status 0 when the concurrency checks
# passed (see two_gpu_local.py).
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$repo/bench-out}"
python="${PYTHON:-python3}"
mkdir -p "$out"
export PYTHONPATH="$repo/src:$repo/plugins${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

{
    date -u
    nvidia-smi || true
    nvidia-smi --query-gpu=index,uuid,name,pci.bus_id --format=csv || true
    "$python" -c 'import torch, platform; print("torch", torch.__version__, "cuda", torch.version.cuda, "gpus", torch.cuda.device_count(), "python", platform.python_version())' || true
    "$python" -c 'import triton; print("triton", triton.__version__)' || true
    command -v nvcc >/dev/null && nvcc --version | tail -2
    command -v ninja >/dev/null && echo "ninja $(ninja --version)" || echo "ninja: missing (the load_inline candidate will fail)"
    lscpu | grep -E "Model name|^CPU\(s\)" || true
} > "$out/environment-2gpu.txt" 2>&1

timeout --kill-after=15 480 "$python" "$repo/benchmarks/two_gpu_local.py" --out "$out" \
    --device "${DEVICE:-cuda:0,1}" --repeat "${REPEAT:-2}" --budget-s "${BUDGET_S:-420}" "$@" 2>&1 \
    | tee "$out/two_gpu_local.log"
exit "${PIPESTATUS[0]}"
