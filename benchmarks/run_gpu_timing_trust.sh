#!/usr/bin/env bash
# Issue 28's timing-trust evidence in one resumable device call (at most 570 s; repeat the same call
# until interleaved_rc=0): benchmarks/fidelity.py --interleaved on level3-pike's 30 tasks with PIKE-B's
# published solutions (.fidelity/pike-b-level3, an ignored folder of the checkout): rounds of the
# plain do_bench loop and of the harness (each solution re-timed paired against its eager reference),
# alternating, writing $OUT/reports/fidelity-interleaved-<gpu>.md. State in .fidelity/interleaved-state
# (carry it back and forth), STATE= names another. Builds go to .gpu-cache/fidelity (CACHE= names another),
# outside .fidelity: carrying .fidelity/* replaced the whole folder on the device and dropped the caches
# between two calls on one warm machine (2026-11-28); a top-level ignored folder that is not carried stays.
# Pruned to fit a few calls: 3 rounds (a plain process each: a host-bound side keeps one speed per
# process, and two processes' draws missed the harness on 7 of 20 tasks where three missed 1 of 7, H200
# 2026-11-29), 2 plain timings of each side per round at 50/150 ms, paired blocks of 30 ms, 4 to 8
# pairs, 2 s of blocks per solution. Packages go to .site in the checkout, not /tmp
# (candidates run in a sandbox whose /tmp is its own).
#   OUT=/some/folder [BUDGET_S=550] [ROUNDS=3] [PLAIN_REPEATS=2] [BLOCK_MS=30] [MAX_PAIRS=8] [PAIRED_MAX_S=2] [TASKS=1,2,4] benchmarks/run_gpu_timing_trust.sh
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/gpu_site.sh"
state="${STATE:-.fidelity/interleaved-state}"
mkdir -p "$state"
budget="${BUDGET_S:-550}"  # seconds of benchmark; the call limit is 600 s
start=$SECONDS
timeout $((budget + 15 - (SECONDS - start))) python3 benchmarks/fidelity.py --interleaved --suite level3-pike \
    --solutions .fidelity/pike-b-level3 --state "$state" --cache "${CACHE:-$repo/.gpu-cache/fidelity}" --out "$out" \
    --reports "$out/reports" --workdir "$repo/.fidelity/interleaved-work" --warm-jobs "${WARM_JOBS:-12}" \
    --rounds "${ROUNDS:-3}" --plain-repeats "${PLAIN_REPEATS:-2}" --warmup-ms 50 --rep-ms 150 --block-ms "${BLOCK_MS:-30}" \
    --min-pairs 4 --max-pairs "${MAX_PAIRS:-8}" --paired-max-s "${PAIRED_MAX_S:-2}" --margin-s 20 ${TASKS:+--tasks "$TASKS"} \
    --budget-s $((budget - (SECONDS - start))) > "$out/interleaved.log" 2>&1
echo "interleaved_rc=$?"
cp "$state"/*.jsonl "$out/" 2>/dev/null
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv > "$out/nvidia-smi.txt" 2>&1
tail -n 12 "$out/interleaved.log"
