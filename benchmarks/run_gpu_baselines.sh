#!/usr/bin/env bash
# `pikeh baselines` for level3-pike on this host's GPU with PIKE's protocol, then the markdown report.
# Resumable across calls: the set is seeded from reports/baselines/$SET_NAME (copy $OUT/baselines/
# $SET_NAME back there after a call, and the next call continues where this one stopped). A set
# belongs to one host; the command refuses to extend a set measured on another.
#
#   OUT=/some/folder benchmarks/run_gpu_baselines.sh                         # eager + compile, 30 tasks
#   MODES=eager OUT=... benchmarks/run_gpu_baselines.sh --tasks 1-15          # a subset
#   MODES=compile-max-autotune BUDGET_S=500 OUT=... benchmarks/run_gpu_baselines.sh
#
# Writes $OUT/baselines/$SET_NAME/{baselines.jsonl,meta.json}, $OUT/reports/baselines-$SET_NAME.md and
# $OUT/baselines.log. BUDGET_S (default 470) stops starting new entries; in-flight ones finish.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$repo/bench-out}"
name="${SET_NAME:-h100-level3-pike}"
suite="${SUITE:-level3-pike}"
modes="${MODES:-eager,compile}"
protocol="${PROTOCOL:-pike}"
device="${DEVICE:-cuda:0}"
budget="${BUDGET_S:-470}"
python="${PYTHON:-python3}"
export PYTHONPATH="$repo/src:$repo/plugins${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1

set_dir="$out/baselines/$name"
mkdir -p "$set_dir" "$out/reports"
seed="$repo/reports/baselines/$name"
if [[ -f "$seed/baselines.jsonl" && ! -f "$set_dir/baselines.jsonl" ]]; then
    cp "$seed/baselines.jsonl" "$seed/meta.json" "$set_dir/" 2>/dev/null
    echo "resuming from $seed ($(wc -l < "$set_dir/baselines.jsonl") entries)"
fi
# In memory when /dev/shm has room (outputs of big tasks are written and read back): the disk is not
# what is being measured. Containers often give /dev/shm 64 MB only: then a temporary folder.
shm_free_kb=$(df -Pk /dev/shm 2>/dev/null | awk 'NR==2 {print $4}')
if [[ -w /dev/shm && "${shm_free_kb:-0}" -gt 16000000 ]]; then work="/dev/shm/pikeh-baselines-$$"; else work="$(mktemp -d)"; fi
trap 'rm -rf "$work"' EXIT

timeout --kill-after=10 $(( budget + 100 )) "$python" "$repo/benchmarks/pikeh_dev.py" baselines \
    --suite "$suite" --modes "$modes" --protocol "$protocol" --device "$device" --output-dir "$set_dir" \
    --budget "$budget" --workdir "$work/work" --build-cache "$work/cache" --precompile-jobs 12 "$@" \
    2>&1 | tee "$out/baselines.log"
status=${PIPESTATUS[0]}
"$python" "$repo/benchmarks/baselines_report.py" "$set_dir" --out "$out/reports/baselines-$name.md" > /dev/null \
    && echo "report: $out/reports/baselines-$name.md"
nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || true
exit "$status"
