#!/usr/bin/env bash
# The harness's verdicts on PIKE-B's 30 published level3-pike solutions (.fidelity/pike-b-level3, an
# ignored folder of the checkout), all submitted at once to one `pikeh eval` at the default protocol,
# in one device call: what a change of the checks does to solutions that were judged before
# (reports/pike-b-published-audit.md, "ours"). Writes $OUT/verdicts.jsonl (one result per solution),
# $OUT/eval.log (the table and --stages) and prints one line per task: category/check, flags, runtime.
#   OUT=/some/folder [BUDGET_S=540] benchmarks/run_gpu_published_verdicts.sh
set -uo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/gpu_site.sh"
timeout "${BUDGET_S:-540}" python3 -m pike_harness eval .fidelity/pike-b-level3 --suite level3-pike --device cuda:0 \
    --json --stages > "$out/verdicts.jsonl" 2> "$out/eval.log"
echo "eval_rc=$?"
python3 - "$out/verdicts.jsonl" <<'PY'
import json, sys
rows = []
for line in open(sys.argv[1]):
    line = line.strip()
    if line.startswith("{"):
        r = json.loads(line)
        rows.append((r.get("task"), r.get("category"), r.get("check"), r.get("flags"),
                     r.get("runtime_ms")))
for task, category, check, flags, ms in sorted(rows, key=lambda r: str(r[0])):
    print(f"{task}\t{category}/{check}\t{','.join(flags or [])}\t{ms}")
print(f"{sum(1 for r in rows if r[1] == 'correct')} correct of {len(rows)}")
PY
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit,temperature.gpu,driver_version --format=csv > "$out/nvidia-smi.txt" 2>&1
