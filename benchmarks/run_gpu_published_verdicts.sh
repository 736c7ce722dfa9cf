#!/usr/bin/env bash
# The harness's verdicts on PIKE-B's 30 published level3-pike solutions (.fidelity/pike-b-level3, an
# ignored folder of the checkout), all submitted at once to one `pikeh eval` at the default protocol,
# in one device call: what a change of the checks does to solutions that were judged before
# (reports/pike-b-published-audit.md, "ours"). Writes $OUT/verdicts.jsonl (one result per solution),
# $OUT/eval.log (the table and --stages) and prints one line per task: category/check, flags, runtime,
# and the fresh calls' median ratio [lowest-highest] and the tests' chances (docs/evaluator.md, Timing, step 6).
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
        fresh = (r.get("environment") or {}).get("fresh_inputs") or {}
        ratios = fresh.get("ratios") or []
        spread = (f"{fresh.get('median_ratio')} [{min(ratios):.2f}-{max(ratios):.2f}] rank_p {fresh.get('rank_p')} "
                  f"median_p {fresh.get('median_p')}" if ratios else "-")
        rows.append((r.get("task"), r.get("category"), r.get("check"), r.get("flags"),
                     r.get("runtime_ms"), spread, ratios))
for task, category, check, flags, ms, spread, _ in sorted(rows, key=lambda r: str(r[0])):
    print(f"{task}\t{category}/{check}\t{','.join(flags or [])}\t{ms}\tfresh {spread}")
print(f"{sum(1 for r in rows if r[1] == 'correct')} correct of {len(rows)}")
every = sorted(x for row in rows for x in row[6])
if every:  # the fresh calls' ratios over all solutions: how far an honest model's drift from 1
    share = sum(1 for x in every if x >= 1.5) / len(every)
    print(f"fresh calls: {len(every)}, median ratio {every[len(every) // 2]:.3f}, "
          f"max {every[-1]:.2f}, share at 1.5x or more {share:.3f}")
PY
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.limit,temperature.gpu,driver_version --format=csv > "$out/nvidia-smi.txt" 2>&1
