#!/usr/bin/env bash
# Does rotating a paired re-timing's pairs over the cores (--paired-cores rotate) make its interval
# honest on a shared host? One device call (at most 9 min), two parts of benchmarks/diag_process_speed.py:
#  1. self-pairs: level3-pike references paired with themselves (the true ratio is 1.0) under
#     --paired-cores free and rotate in turns, SELF_ROUNDS rounds (default 4) over SELF_TASKS
#     (default 4,2,30,26): how many intervals hold 1.0, and how far the estimates lie from it;
#  2. task 31 (PIKE-B's published solution, host-bound) against a plain process, free and rotate,
#     ROUNDS rounds (default 2).
# Writes $OUT/self/ and $OUT/solution/ (diag_process_speed.{json,md} each), the logs and the card.
#   OUT=/some/folder [SELF_BUDGET_S=330] [SOLUTION_BUDGET_S=130] benchmarks/run_gpu_paired_cores.sh
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/gpu_site.sh"
mkdir -p "$out/self" "$out/solution"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit,temperature.gpu,driver_version --format=csv > "$out/nvidia-smi.txt" 2>&1
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' >> "$out/nvidia-smi.txt" 2>&1
self_budget="${SELF_BUDGET_S:-330}"
timeout $((self_budget + 60)) python3 benchmarks/diag_process_speed.py --out "$out/self" --no-plain --pairs 8 \
    --tasks "${SELF_TASKS:-4:eager,2:eager,30:eager,26:eager}" --rounds "${SELF_ROUNDS:-4}" --variants free,rotate \
    --budget-s "$self_budget" > "$out/self/diag.log" 2>&1
echo "self_rc=$?"
solution_budget="${SOLUTION_BUDGET_S:-130}"
timeout $((solution_budget + 90)) python3 benchmarks/diag_process_speed.py --out "$out/solution" --pairs 8 \
    --solutions .fidelity/pike-b-level3 --tasks "${TASKS:-31}" --rounds "${ROUNDS:-2}" --variants free,rotate \
    --budget-s "$solution_budget" > "$out/solution/diag.log" 2>&1
echo "solution_rc=$?"
grep -A8 "^Self-pairs" "$out/self/diag_process_speed.md"
grep -A6 "^Harness variants" "$out/solution/diag_process_speed.md"
