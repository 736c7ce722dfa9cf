#!/usr/bin/env bash
# Slow windows against the GPU's clock, in one device call (at most 8 min): benchmarks/diag_gpu_clock.py
# on level3-pike TASKS (default 14,31,6) with PIKE-B's published solutions (.fidelity/pike-b-level3, an
# ignored folder of the checkout, carried). Writes $OUT/diag_gpu_clock.{json,md} after every task, the
# log and the card.
#   OUT=/some/folder [BUDGET_S=360] [TASKS=14,31,6] [WINDOWS=30] benchmarks/run_gpu_clock.sh
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/gpu_site.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu,driver_version --format=csv > "$out/nvidia-smi.txt" 2>&1
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' >> "$out/nvidia-smi.txt" 2>&1
budget="${BUDGET_S:-360}"
timeout $((budget + 90)) python3 benchmarks/diag_gpu_clock.py --out "$out" --device "${DEVICE:-cuda:0}" \
    --solutions .fidelity/pike-b-level3 --tasks "${TASKS:-14,31,6}" --windows "${WINDOWS:-30}" \
    --budget-s "$budget" > "$out/diag_gpu_clock.log" 2>&1
echo "diag_rc=$?"
tail -n 20 "$out/diag_gpu_clock.log"
