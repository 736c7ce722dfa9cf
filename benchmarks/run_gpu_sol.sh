#!/usr/bin/env bash
# Speed of light, GPU clocks and profiles on this host's GPU, in one go (about 3-4 minutes on an H100):
#   1. the level3-pike SoL table (datasheet and measured peaks; eager/compile fractions from the committed
#      H100 baseline set): $OUT/sol-level3-pike-<gpu>.{md,json}  -> copy the .md to reports/
#   2. `pikeh tasks show level3-pike/9` (the bound line): $OUT/tasks-show-9.txt
#   3. `pikeh eval` of a reference on the GPU (environment.gpu_clocks present): $OUT/eval-clocks.json
#   4. `pikeh profile --reference` of two tasks on the GPU (kernels, origins, gaps): $OUT/profile-*.{json,txt}
#
#   OUT=/some/folder benchmarks/run_gpu_sol.sh
#
# Needs python3 with torch (CUDA), click, rich, pluggy; pike-harness need not be installed.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${OUT:-$repo/bench-out}"
python="${PYTHON:-python3}"
baselines="${BASELINES:-$repo/reports/baselines/h100-level3-pike}"
mkdir -p "$out"
export PYTHONPATH="$repo/src:$repo/plugins${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
cd "$repo"
dev="$repo/benchmarks/pikeh_dev.py"
{ nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit,temperature.gpu --format=csv; } > "$out/nvidia-smi.txt" 2>&1

echo "== 1. SoL table"
timeout 300 "$python" benchmarks/sol_table.py --suite level3-pike --output-dir "$out" --baselines "$baselines" \
    2>&1 | tee "$out/sol_table.log"
echo "== 2. tasks show"
timeout 120 "$python" "$dev" tasks show level3-pike/9 > "$out/tasks-show-9.txt" 2>&1; head -4 "$out/tasks-show-9.txt"
echo "== 3. eval with clocks"
task9="$(ls tasks/level3-pike/9_*.py | head -1)"
timeout 180 "$python" "$dev" eval "$task9" --task level3-pike/9 --device cuda --protocol quick --json \
    > "$out/eval-clocks.json" 2> "$out/eval-clocks.err"
"$python" -c "import json,sys; r=json.load(open(sys.argv[1])); print(r['category'], r['runtime_ms'], r['environment'].get('gpu_clocks'))" "$out/eval-clocks.json"
echo "== 4. profiles"
for id in 9 44; do
    file="$(ls tasks/level3-pike/${id}_*.py | head -1)"
    timeout 180 "$python" "$dev" profile "$file" --task "level3-pike/$id" --reference --device cuda --protocol quick \
        > "$out/profile-$id.txt" 2>&1
    timeout 180 "$python" "$dev" profile "$file" --task "level3-pike/$id" --reference --device cuda --protocol quick \
        --json > "$out/profile-$id.json" 2> "$out/profile-$id.err"
    tail -3 "$out/profile-$id.txt"
done
echo "done: $out"
