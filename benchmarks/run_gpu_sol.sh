#!/usr/bin/env bash
# Speed of light, GPU clocks and profiles on this host's GPU, in one go (about 2-3 minutes on an H100):
#   1. the level3-pike SoL table (datasheet and measured peaks; eager/compile fractions from the committed
#      H100 baseline set): $OUT/sol-level3-pike-<gpu>.{md,json}  -> copy the .md to reports/
#   2. `pikeh tasks show level3-pike/9` (the bound line): $OUT/tasks-show.txt
#   3. `pikeh eval` of a reference on the GPU (environment.gpu_clocks present): $OUT/eval-clocks.json
#   4. `pikeh profile --reference --json` of two tasks on the GPU (kernels, origins, gaps): $OUT/profile-*.{json,txt}
#
#   OUT=/some/folder benchmarks/run_gpu_sol.sh
#
# Needs python3 with torch (CUDA), click, rich, pluggy; pike-harness need not be installed.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$repo/bench-out}"
python="${PYTHON:-python3}"
baselines="${BASELINES-$repo/reports/baselines/h100-level3-pike}"  # BASELINES= (empty): none
device="${DEVICE:-cuda}"      # DEVICE=cpu SUITE=smoke IDS="1 5" BASELINES= checks this script on a CPU
suite="${SUITE:-level3-pike}"
ids="${IDS:-9 44}"
mkdir -p "$out"
export PYTHONPATH="$repo/src:$repo/plugins${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
cd "$repo"
dev="$repo/benchmarks/pikeh_dev.py"
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv; } > "$out/nvidia-smi.txt" 2>&1

echo "== 1. SoL table"
timeout 300 "$python" benchmarks/sol_table.py --suite "$suite" --output-dir "$out" --device "$device" \
    ${baselines:+--baselines "$baselines"} 2>&1 | tee "$out/sol_table.log"
echo "== 2. tasks show"
first="${ids%% *}"
timeout 120 "$python" "$dev" tasks show "$suite/$first" > "$out/tasks-show.txt" 2>&1; head -4 "$out/tasks-show.txt"
echo "== 3. eval with clocks"
timeout 180 "$python" "$dev" eval "$(ls tasks/$suite/${first}_*.py | head -1)" --task "$suite/$first" \
    --device "$device" --protocol quick --json \
    > "$out/eval-clocks.json" 2> "$out/eval-clocks.err"
"$python" -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['category'], r['runtime_ms'], r['environment'].get('gpu_clocks'))" "$out/eval-clocks.json"
echo "== 4. profiles"
for id in $ids; do
    file="$(ls tasks/$suite/${id}_*.py | head -1)"
    timeout 180 "$python" "$dev" profile "$file" --task "$suite/$id" --reference --device "$device" --protocol quick \
        --json > "$out/profile-$id.json" 2> "$out/profile-$id.err"
    "$python" - "$out/profile-$id.json" <<'PY' | tee "$out/profile-$id.txt"
import json, sys
try:
    record = json.load(open(sys.argv[1]))
except ValueError:
    sys.exit(print("no profile: see the .err file"))
p = record["profile"]
print(record["task"], "runtime", record["runtime_ms"], "ms; clocks", record["environment"].get("gpu_clocks"))
print("share", p.get("share"), "launches/call", p.get("launches_per_call"), "gap ms/call", p.get("gap_ms_per_call"),
      "wall ms/call", p.get("wall_ms_per_call"), "error", p.get("error"))
for k in p.get("kernels", [])[:12]:
    print(f"  {k['ms_per_call']:.4f} ms x{k['per_call']:g} [{k['origin']}] {k['name'][:110]}")
PY
done
echo "done: $out"
