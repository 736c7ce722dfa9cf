#!/usr/bin/env bash
# Where a model's speed is decided (per process, per core, by our loop, by the harness), in one device
# call (at most 9 min): benchmarks/diag_process_speed.py on level3-pike TASKS (default 27,30:eager,26,31)
# with PIKE-B's published solutions (.fidelity/pike-b-level3, an ignored folder of the checkout, carried),
# ROUNDS rounds (default 2) of a plain process and the harness's paired re-timing per task. Writes
# $OUT/diag_process_speed.{json,md} after every measurement, the log and the card.
# Packages go to .site in the checkout, not /tmp (candidates run in a sandbox whose /tmp is its own).
#   OUT=/some/folder [BUDGET_S=480] [ROUNDS=2] [TASKS=27,30:eager] [PIN_CORE=3] [VARIANTS=stock,free,...] benchmarks/run_gpu_process_speed.sh
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/gpu_site.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit,temperature.gpu,driver_version --format=csv > "$out/nvidia-smi.txt" 2>&1
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' >> "$out/nvidia-smi.txt" 2>&1
lscpu > "$out/lscpu.txt" 2>&1
budget="${BUDGET_S:-480}"
timeout $((budget + 90)) python3 benchmarks/diag_process_speed.py --out "$out" --device "${DEVICE:-cuda:0}" \
    --solutions .fidelity/pike-b-level3 --tasks "${TASKS:-27,30:eager,26,31}" --rounds "${ROUNDS:-2}" \
    --pin-core "${PIN_CORE:-3}" --variants "${VARIANTS:-stock}" --budget-s "$budget" > "$out/diag_process_speed.log" 2>&1
echo "diag_rc=$?"
tail -n 30 "$out/diag_process_speed.log"
