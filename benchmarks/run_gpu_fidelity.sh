#!/usr/bin/env bash
# Issue 16's GPU evidence in one resumable device call (repeat the same call until fidelity_rc=0):
# the audit's probes of PIKE's published solutions, then benchmarks/fidelity.py (harness against the
# plain do_bench loop), writing into $OUT. State lives in .fidelity/state (carry it back and forth),
# STATE= names another state folder; builds in .fidelity/cache (kept on a warm machine). Packages go to .site in the checkout, not /tmp:
# candidates run in a sandbox whose /tmp is its own.
# A fresh machine has empty caches: the warm-up rows carry a cache token, so each call warms what it times.
#   OUT=/some/folder [PROTOCOLS=pike] [CONCURRENCY=all] [BASELINES=] [WARMUP_MS=250] [REP_MS=1000] \
#     [TASKS=1,2,4] [AUDIT=0] benchmarks/run_gpu_fidelity.sh
# TASKS: a subset, so that both sides of each task are measured in one call (one sitting); AUDIT=0 skips
# pike_audit.py (its probes are in the state once done).
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo" || exit 1
out="${OUT:?set OUT}"
state="${STATE:-.fidelity/state}"
mkdir -p "$out" "$state"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$repo/.site" .whl/*.whl
export PYTHONPATH="$repo/.site:$repo/benchmarks" PYTHONUNBUFFERED=1
common=(--solutions .fidelity/pike-b-level3 --state "$state" --cache "$repo/.fidelity/cache" --out "$out"
        --reports "$out/reports")
start=$SECONDS
if [ "${AUDIT:-1}" != 0 ]; then
  timeout 260 python3 benchmarks/pike_audit.py "${common[@]}" --budget-s 200 --probe-jobs 8 > "$out/audit.log" 2>&1
  echo "audit_rc=$?"
fi
timeout $((575 - (SECONDS - start))) python3 benchmarks/fidelity.py "${common[@]}" --workdir "$repo/.fidelity/work" \
    --warm-jobs 12 --warmup-ms "${WARMUP_MS:-250}" --rep-ms "${REP_MS:-1000}" --protocols "${PROTOCOLS:-pike}" \
    --concurrency "${CONCURRENCY:-all}" ${BASELINES:+--baselines "$BASELINES"} ${TASKS:+--tasks "$TASKS"} \
    --budget-s $((560 - (SECONDS - start))) > "$out/fidelity.log" 2>&1
echo "fidelity_rc=$?"
cp "$state"/*.jsonl "$out/" 2>/dev/null
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv > "$out/nvidia-smi.txt" 2>&1
tail -n 5 "$out"/*.log
