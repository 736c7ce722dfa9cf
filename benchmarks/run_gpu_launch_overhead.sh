#!/usr/bin/env bash
# Why launch-bound models read slower in the harness's candidate process, in one device call (at most
# 9 min): benchmarks/diag_launch_overhead.py on the eager references of level3-pike 4 and 20 (TASKS),
# ROUNDS rounds (default 3) of the plain loop, our loop in a plain process (with and without the
# reference guard's audit hook), and the harness alone: sandboxed, unsandboxed, without the seccomp
# filter, without pre-started processes, and beside HELPERS (default 12) idle processes holding a
# CUDA context, stopped and running, and in a batch with BATCH (default 16) other eager references
# (quiet rule stop and cores). CONFIGS picks configurations (default all). Writes $OUT/diag_launch_overhead.{json,md} (after every round, so
# a call cut short keeps the rounds that ended), the log and the card.
# Packages go to .site in the checkout, not /tmp (candidates run in a sandbox whose /tmp is its own).
#   OUT=/some/folder [BUDGET_S=460] [ROUNDS=3] [HELPERS=12] [BATCH=16] [CONFIGS=plain,harness,...] [TASKS=4,20]
#   [DEVICE=cuda:0] benchmarks/run_gpu_launch_overhead.sh
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/gpu_site.sh"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv > "$out/nvidia-smi.txt" 2>&1
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' >> "$out/nvidia-smi.txt" 2>&1
python3 -c 'from pike_harness.worker.supervise.isolation import choose; print(choose())' > "$out/isolation.txt" 2>&1
budget="${BUDGET_S:-460}"  # seconds of benchmark; the call limit is 600 s, the installs above take some
timeout $((budget + 40)) python3 benchmarks/diag_launch_overhead.py --out "$out" --device "${DEVICE:-cuda:0}" \
    --tasks "${TASKS:-4,20}" --rounds "${ROUNDS:-3}" --helpers "${HELPERS:-12}" \
    --batch "${BATCH:-16}" ${CONFIGS:+--configs "$CONFIGS"} --warmup-ms 50 --rep-ms 150 \
    --budget-s "$budget" > "$out/diag_launch_overhead.log" 2>&1
echo "diag_rc=$?"
tail -n 40 "$out/diag_launch_overhead.log"
