#!/usr/bin/env bash
# Issue 16's GPU evidence in one resumable device call (repeat the same call until fidelity_rc=0):
# the audit's probes of PIKE's published solutions, then benchmarks/fidelity.py (harness against the
# plain do_bench loop), writing into $OUT. State lives in .fidelity/state (carry it back and forth),
# builds in .fidelity/cache (kept on a warm machine). Packages go to .site in the checkout, not /tmp:
# candidates run in a sandbox whose /tmp is its own.
#   OUT=/some/folder [PROTOCOLS=pike] [CONCURRENCY=all] [BASELINES=] [WARMUP_MS=250] [REP_MS=1000] benchmarks/run_gpu_fidelity.sh
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo" || exit 1
out="${OUT:?set OUT}"
mkdir -p "$out" .fidelity/state
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$repo/.site" .whl/*.whl
export PYTHONPATH="$repo/.site:$repo/benchmarks" PYTHONUNBUFFERED=1
common=(--solutions .fidelity/pike-b-level3 --state .fidelity/state --cache "$repo/.fidelity/cache" --out "$out"
        --reports "$out/reports")
start=$SECONDS
timeout 260 python3 benchmarks/pike_audit.py "${common[@]}" --budget-s 200 --probe-jobs 8 > "$out/audit.log" 2>&1
echo "audit_rc=$?"
timeout $((575 - (SECONDS - start))) python3 benchmarks/fidelity.py "${common[@]}" --workdir "$repo/.fidelity/work" \
    --warm-jobs 12 --warmup-ms "${WARMUP_MS:-250}" --rep-ms "${REP_MS:-1000}" --protocols "${PROTOCOLS:-pike}" \
    --concurrency "${CONCURRENCY:-all}" ${BASELINES:+--baselines "$BASELINES"} \
    --budget-s $((560 - (SECONDS - start))) > "$out/fidelity.log" 2>&1
echo "fidelity_rc=$?"
cp .fidelity/state/*.jsonl "$out/" 2>/dev/null
tail -n 5 "$out/audit.log" "$out/fidelity.log"
