#!/usr/bin/env bash
# Audit a suite's references on a CUDA GPU and render reports/audit-<suite>.md (and .json).
#
# Run from anywhere on the GPU host, with torch (CUDA build), click, rich, pluggy and einops
# importable; pike-harness itself need not be installed (the source tree is used when `pikeh` is
# not on PATH). The suite is always read from this checkout's tasks/<suite> folder.
#
#   benchmarks/audit_gpu.sh                          # level3-pike, all 30 tasks
#   OUT_DIR=$OUT benchmarks/audit_gpu.sh             # write the reports somewhere else
#   SUITE=smoke benchmarks/audit_gpu.sh --tasks 1-3  # extra arguments go to `pikeh tasks audit`
#
# Exit status: that of the audit (1 when a task could not run); the markdown is rendered anyway.
set -uo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
suite="${SUITE:-level3-pike}"
out_dir="${OUT_DIR:-$repo/reports}"
device="${DEVICE:-cuda}"

if command -v pikeh >/dev/null 2>&1; then
    pikeh=(pikeh)
else
    pikeh=(env "PYTHONPATH=$repo/src${PYTHONPATH:+:$PYTHONPATH}" "${PYTHON:-python3}" -c
           'from pike_harness.cli import main; main()')
fi
pikeh+=(--tasks-dir "$repo/tasks/$suite")

mkdir -p "$out_dir"
json="$out_dir/audit-$suite.json"
markdown="$out_dir/audit-$suite.md"

"${pikeh[@]}" tasks audit --suite "$suite" --device "$device" --json -o "$json" "$@"
status=$?

if [[ -s "$json" ]]; then
    "${pikeh[@]}" tasks audit --from-json "$json" --format markdown -o "$markdown" \
        --title "Task audit: $suite" || status=$?
    "${pikeh[@]}" tasks audit --from-json "$json" || true  # the table, for the log
fi
exit "$status"
