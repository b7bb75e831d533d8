#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# MaskBench, full set (maskbench-dev: 8,968 schemas), single thread, real 202,048-token
# vocabulary: `glint grammar check --json` over every case file, then the table that
# docs/GRAMMAR.md records (passing, soundness, completeness, compile and mask percentiles, the
# compile errors by keyword, and passing per dataset). Takes minutes; run on a quiet machine.
# usage: bench/maskbench.sh [extra glint grammar check options, e.g. --every 10]
set -euo pipefail
cd "$(dirname "$0")/.."
. tests/oracle/lib.sh
. tests/oracle/grammar_lib.sh
case "$GLINT_BIN" in /*) ;; *) GLINT_BIN="$PWD/$GLINT_BIN" ;; esac
[ -x "$GLINT_BIN" ] || { echo "maskbench: $GLINT_BIN not built (make build)"; exit 1; }
RANKS="$(gl_grammar_ranks)"
MB="$(gl_grammar_extract maskbench-dev)/maskbench"
OUT="${GLINT_BENCH_OUT:-$GL_REPO_ROOT/build/bench}"
mkdir -p "$OUT"
echo "glint $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet 2>/dev/null || echo '+dirty'), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, single thread"
rc=0
taskset -c 0 "$GLINT_BIN" grammar check --tokenizer "$RANKS" --cases "$MB" --json \
    --per-file "$OUT/maskbench-per-file.jsonl" "$@" >"$OUT/maskbench.json" || rc=$?
/usr/bin/python3 - "$OUT/maskbench.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
t = r["schemas_total"]
def pc(n): return "%.1f%%" % (100.0 * n / max(1, t))
c, m = r["compile_ms"], r["mask_us"]
rows = [
    ("schemas", "%d" % t, ""),
    ("compiled", "%d" % r["schemas_compiled"], pc(r["schemas_compiled"])),
    ("passing (goal >= 90%)", "%d" % r["schemas_passing"], pc(r["schemas_passing"])),
    ("instances (valid / invalid)", "%d (%d / %d)" % (r["instances"], r["instances_valid"], r["instances_invalid"]), ""),
    ("invalid instances accepted (goal 0)", "%d" % r["invalid_accepted"], ""),
    ("valid instances rejected", "%d" % r["valid_rejected"], ""),
    ("matcher contract errors", "%d" % r["errors"], ""),
    ("masks timed", "%d" % r["masks"], ""),
    ("mask us mean (goal <= 30)", "%.2f" % m["mean"], ""),
    ("mask us p50 / p90", "%.2f / %.2f" % (m["p50"], m["p90"]), ""),
    ("mask us p99 (goal <= 250)", "%.2f" % m["p99"], ""),
    ("mask us p99.9 / max", "%.1f / %.1f" % (m["p999"], m["max"]), ""),
    ("compile ms p50 (goal <= 1)", "%.3f" % c["p50"], ""),
    ("compile ms p99 (goal <= 10)", "%.3f" % c["p99"], ""),
    ("compile ms mean / max", "%.3f / %.1f" % (c["mean"], c["max"]), ""),
    ("wall s", "%.1f" % r["wall_s"], ""),
]
print("| metric | value | |\n|---|---:|---:|")
for a, b, d in rows:
    print("| %s | %s | %s |" % (a, b, d))
print("\ncompile errors by keyword (schemas):")
print(", ".join("%s %d" % kv for kv in r["errors_by_keyword"].items()))
PY
/usr/bin/python3 tests/oracle/grammar_summary.py "$OUT/maskbench-per-file.jsonl" || true
echo "raw: $OUT/maskbench.json, $OUT/maskbench-per-file.jsonl"
exit "$rc"
