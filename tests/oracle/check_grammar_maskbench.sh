#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# MaskBench subset: `glint grammar check` on every $GL_MB_EVERY-th case file of maskbench-dev
# (default 200: 45 of 8,968 schemas, sorted by name; 20 once masks meet the 30 us goal) with the
# real vocabulary. Fails on any matcher contract error, on any invalid instance accepted
# (soundness, which has no tolerance), or if fewer than $GL_MB_FLOOR_PCT percent of the schemas
# pass (default 90, the goal; measured 96.7% on every 100th, 45/45 on every 200th). Also
# checks that the harness serializes every instance exactly as Python's
# json.dumps(ensure_ascii=False, separators=(",", ":")) does.
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/oracle/lib.sh
. tests/oracle/grammar_lib.sh
case "$GLINT_BIN" in /*) ;; *) GLINT_BIN="$PWD/$GLINT_BIN" ;; esac
[ -x "$GLINT_BIN" ] || { echo "maskbench: $GLINT_BIN not built"; exit 1; }
GL_MB_FLOOR_PCT="${GL_MB_FLOOR_PCT:-90}"
EVERY="${GL_MB_EVERY:-200}"
RANKS="$(gl_grammar_ranks)"
MB="$(gl_grammar_extract maskbench-dev)/maskbench"
WORK="$GLINT_TEST_DIR/grammar-maskbench"
mkdir -p "$WORK"

# 1. The serialization the tokenizer sees is Python's compact dump of the instance.
"$GLINT_BIN" grammar check --cases "$MB" --every "$EVERY" --dump-instances >"$WORK/instances.txt"
/usr/bin/python3 - "$MB" "$EVERY" "$WORK/instances.txt" <<'PY'
import json, os, sys
d, every, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
files = sorted(f for f in os.listdir(d) if f.endswith(".json"))[::every]
want = []
for f in files:
    for t in json.load(open(os.path.join(d, f), encoding="utf-8")).get("tests", []):
        want.append(json.dumps(t["data"], ensure_ascii=False, separators=(",", ":")))
got = open(path, encoding="utf-8", errors="surrogateescape").read().split("\n")[:-1]
bad = [i for i, (a, b) in enumerate(zip(want, got)) if a != b]
print("serialization: %d instances, %d differ from Python" % (len(want), len(bad) + abs(len(want) - len(got))))
for i in bad[:3]:
    print("  python: %s\n  glint:  %s" % (want[i][:200], got[i][:200]))
sys.exit(1 if bad or len(want) != len(got) else 0)
PY

# 2. The matcher on the subset.
rc=0
"$GLINT_BIN" grammar check --tokenizer "$RANKS" --cases "$MB" --every "$EVERY" --json \
    --per-file "$WORK/per-file.jsonl" >"$WORK/result.json" || rc=$?
/usr/bin/python3 tests/oracle/grammar_summary.py "$WORK/per-file.jsonl" || rc=1
/usr/bin/python3 - "$WORK/result.json" "$GL_MB_FLOOR_PCT" <<'PY' || rc=1
import json, sys
r = json.load(open(sys.argv[1]))
floor = float(sys.argv[2])
pct = 100.0 * r["schemas_passing"] / max(1, r["schemas_total"])
print("schemas %d, compiled %d, passing %d (%.1f%%, floor %.0f%%); valid rejected %d, invalid "
      "accepted %d, contract errors %d" % (r["schemas_total"], r["schemas_compiled"],
      r["schemas_passing"], pct, floor, r["valid_rejected"], r["invalid_accepted"], r["errors"]))
print("compile ms p50 %.3f p99 %.3f max %.3f; mask us mean %.2f p50 %.2f p99 %.2f max %.1f "
      "(%d masks)" % (r["compile_ms"]["p50"], r["compile_ms"]["p99"], r["compile_ms"]["max"],
      r["mask_us"]["mean"], r["mask_us"]["p50"], r["mask_us"]["p99"], r["mask_us"]["max"],
      r["masks"]))
print("compile errors by keyword:", json.dumps(r["errors_by_keyword"]))
for f in r["failures"][:10]:
    print("  failure:", json.dumps(f))
ok = r["invalid_accepted"] == 0 and r["errors"] == 0 and pct >= floor
sys.exit(0 if ok else 1)
PY
[ "$rc" = 0 ] && echo "maskbench subset: OK" || echo "maskbench subset: FAILED"
exit "$rc"
