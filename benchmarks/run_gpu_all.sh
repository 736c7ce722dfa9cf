#!/usr/bin/env bash
# Evaluator II on a GPU host, in one go: per-candidate overhead, timing noise while others compile,
# and throughput (ours cold/warm cache against a PIKE-like serial evaluator). Everything lands in $OUT:
# overhead.{json,md}, noise.{json,md}, throughput.{json,md}, performance-gpu.md (the three fragments),
# environment.txt (nvidia-smi, versions, CPU). Sized for an H100 host with 16 cores: about 8.5 minutes.
#
#   OUT=/some/folder benchmarks/run_gpu_all.sh            # from the repository root or anywhere
#   BUDGET_S=300 OUT=... benchmarks/run_gpu_all.sh        # a shorter run (sections shrink)
#
# Needs python3 with torch (CUDA), click, rich, pluggy; nvcc and ninja for the load_inline builds.
# pike-harness need not be installed (src/ and plugins/ are put on PYTHONPATH).
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$repo/bench-out}"
budget="${BUDGET_S:-510}"
device="${DEVICE:-cuda:0}"
python="${PYTHON:-python3}"
mkdir -p "$out"
export PYTHONPATH="$repo/src:$repo/plugins${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
# In memory when /dev/shm has room (outputs of big tasks are written and read back): the disk is not
# what is being measured. Containers often give /dev/shm 64 MB only: then a temporary folder.
shm_free_kb=$(df -Pk /dev/shm 2>/dev/null | awk 'NR==2 {print $4}')
if [[ -w /dev/shm && "${shm_free_kb:-0}" -gt 16000000 ]]; then base="/dev/shm/pikeh-bench-$$"; else base="$(mktemp -d)"; fi
mkdir -p "$base"
trap 'rm -rf "$base"' EXIT

start=$(date +%s)
left() { echo $(( budget - ($(date +%s) - start) )); }

{
    date -u
    nvidia-smi || true
    "$python" -c 'import torch, platform; print("torch", torch.__version__, "cuda", torch.version.cuda, "python", platform.python_version())' || true
    "$python" -c 'import triton; print("triton", triton.__version__)' || true
    command -v nvcc >/dev/null && nvcc --version | tail -2
    command -v ninja >/dev/null && echo "ninja $(ninja --version)" || echo "ninja: missing (load_inline builds will fail)"
    lscpu | grep -E "Model name|^CPU\(s\)|Thread|MHz" || true
} > "$out/environment.txt" 2>&1

run() {  # run NAME SECONDS ARGS...: one benchmark with its own cap, killed 60 s after it
    local name=$1 seconds=$2; shift 2
    if (( seconds < 30 )); then echo "[$name] skipped: budget spent"; return; fi
    echo "[$name] up to ${seconds}s"
    timeout --kill-after=10 $(( seconds + 60 )) "$python" "$repo/benchmarks/bench_$name.py" --out "$out" \
        --device "$device" --budget-s "$seconds" --workdir "$base/$name" "$@" 2>&1 | tee "$out/$name.log"
}

run overhead 95 --reps 6
run noise 125 --state "$base/noise-state"  # a fresh measurement each time, not the tasks of an earlier noise.jsonl in $out
run throughput $(( $(left) - 10 ))

cat "$out"/overhead.md "$out"/noise.md "$out"/throughput.md > "$out/performance-gpu.md" 2>/dev/null
echo "done in $(( $(date +%s) - start )) s; results in $out"
